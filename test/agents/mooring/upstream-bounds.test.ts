/**
 * What a downstream gateway takes from its upstream (docs/agents.md, Chained
 * gateways): a real downstream gateway whose `mooring` agent points at a hostile upstream
 * (support/hostile-upstream.ts). Each exceeded bound fails the turn UPSTREAM_FAILED with a reason
 * naming the bound; a tight long-poll loop is slowed by the poll backoff.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { claimTestDatabase, type TestDatabase } from "../../support/db.js";
import { eventually, startTestGateway } from "../../support/gateway.js";
import { HostileUpstream } from "../../support/hostile-upstream.js";
import { createSession, submitOk, tempWorkspace, waitTerminal } from "../../support/turns.js";

const MAX_MESSAGE = 65_536;
const MAX_EVENT = 16_384;
const MAX_BODY = 65_536;
const POLL_MIN_MS = 250;

let db: TestDatabase;
let upstream: HostileUpstream;
let down: Gateway;
let workspace: string;
const logs: Record<string, any>[] = [];

beforeAll(async () => {
  db = await claimTestDatabase();
  upstream = await HostileUpstream.start();
  workspace = await tempWorkspace();
  const agents = {
    up: {
      driver: "mooring",
      url: upstream.url,
      agent: "simulated",
      reconnectBaseMs: 100,
      reconnectMaxMs: 1000,
    },
  };
  down = await startTestGateway(
    db.url,
    {
      MOORING_AGENTS: JSON.stringify(agents),
      MOORING_UPSTREAM_MAX_MESSAGE_BYTES: String(MAX_MESSAGE),
      MOORING_UPSTREAM_MAX_EVENT_BYTES: String(MAX_EVENT),
      MOORING_UPSTREAM_MAX_BODY_BYTES: String(MAX_BODY),
      MOORING_UPSTREAM_POLL_MIN_MS: String(POLL_MIN_MS),
    },
    { onLog: (record) => logs.push(record) },
  );
});

afterAll(async () => {
  await down?.stop();
  await upstream?.close();
  await db?.drop();
});

/** One chained turn against the upstream as it now misbehaves; its terminal Task. */
async function chainedTurn(extra: Record<string, unknown> = {}): Promise<any> {
  const sessionId = await createSession(down.url, workspace, { agent: "up" });
  const task = await submitOk(down.url, sessionId, { prompt: "hello", ...extra });
  return waitTerminal(down.url, task.id, 60_000);
}

describe("a downstream gateway bounds what its upstream sends", () => {
  it("fails the turn on a WebSocket message larger than MOORING_UPSTREAM_MAX_MESSAGE_BYTES", async () => {
    upstream.set("ws-oversize", 4 * MAX_MESSAGE);
    const done = await chainedTurn();
    expect(done.status).toBe("failed");
    expect(done.error).toMatchObject({ code: "UPSTREAM_FAILED", reason: "upstream_message_too_large" });
    expect(done.error.message).toContain("MOORING_UPSTREAM_MAX_MESSAGE_BYTES");
    expect(upstream.count(/^GET \/v1\/ws/)).toBe(1);
  });

  it("fails the turn on a compressed message that inflates past the bound, a few KB on the wire", async () => {
    upstream.set("ws-inflate", 8 * 1024 * 1024);
    const done = await chainedTurn();
    expect(done.error).toMatchObject({ code: "UPSTREAM_FAILED", reason: "upstream_message_too_large" });
    expect(upstream.wsBytesOnWire).toBeGreaterThan(0);
    expect(upstream.wsBytesOnWire).toBeLessThan(MAX_MESSAGE);
    // The socket is closed at the first such message: a flood of them ends there.
    await eventually(async () => upstream.wsClosed === 1);
    expect(upstream.count(/^GET \/v1\/ws/)).toBe(1);
    // Nothing of it was stored or relayed.
    const [{ n }] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from events where type = 'message.delta' and task_id = ${done.id}`;
    expect(n).toBe(0);
  });

  it("fails the turn on an event larger than MOORING_UPSTREAM_MAX_EVENT_BYTES, relaying none of it", async () => {
    upstream.set("event-oversize", 2 * MAX_EVENT);
    const done = await chainedTurn();
    expect(done.error).toMatchObject({ code: "UPSTREAM_FAILED", reason: "upstream_event_too_large" });
    expect(done.error.message).toContain("MOORING_UPSTREAM_MAX_EVENT_BYTES");
    const [{ n }] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from events where type = 'message.delta' and task_id = ${done.id}`;
    expect(n).toBe(0);
  });

  it("fails the turn on a REST answer larger than MOORING_UPSTREAM_MAX_BODY_BYTES and stops reading it", async () => {
    const total = 256 * 1024 * 1024;
    upstream.set("rest-oversize", total);
    const done = await chainedTurn();
    expect(done.error).toMatchObject({ code: "UPSTREAM_FAILED", reason: "upstream_body_too_large" });
    expect(done.error.message).toContain("MOORING_UPSTREAM_MAX_BODY_BYTES");
    // The request was aborted: the upstream could write only what the socket buffers held.
    expect(upstream.bodyBytesWritten).toBeLessThan(total / 8);
  });

  it("polls an upstream that answers every long-poll at once no faster than the backoff allows, and says why it polls", async () => {
    upstream.set("poll-tight");
    // The downstream's own deadline ends the turn; until then the follower polls.
    const timeoutMs = 3000;
    const done = await chainedTurn({ timeoutMs });
    expect(done.error?.code).toBe("TURN_TIMEOUT");
    const polls = upstream.count(/^GET \/v1\/tasks\/tsk_hostile\?waitMs=/);
    expect(polls).toBeGreaterThan(0);
    // At most one poll per POLL_MIN_MS however early the upstream answers (the interval doubles
    // while nothing changes); without the backoff this was thousands.
    expect(polls).toBeLessThanOrEqual(timeoutMs / POLL_MIN_MS);
    const said = logs.filter((l) => l.msg === "following the upstream turn by polling");
    expect(said).toHaveLength(1);
    expect(said[0].why).toContain("streaming is refused");
  });
});
