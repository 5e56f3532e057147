/**
 * What the client SDK needs from the server: `pingMs` in hello and a `ping` method,
 * `idempotencyKey` on session create (REST and JSON-RPC), the events of a session as a JSON page
 * for polling clients, and the boot id on every answer.
 */
import { rm } from "node:fs/promises";
import { afterAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call } from "../support/gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";
import { WsClient } from "../support/ws-client.js";

const t = useGateway({ env: { MOORING_WS_PING_MS: "700" }, workspace: true });

afterAll(async () => {
  await rm(t.workspace, { recursive: true, force: true });
});

describe("socket liveness", () => {
  it("hello carries pingMs and ping answers", async () => {
    const ws = await WsClient.connect(t.url);
    try {
      expect((await ws.hello) as unknown as { pingMs: number }).toMatchObject({ pingMs: 700 });
      expect(await ws.call("ping")).toMatchObject({ pong: true });
    } finally {
      await ws.close();
    }
  });
});

describe("idempotent session create", () => {
  it("makes one session for concurrent and retried creates with one key (REST and JSON-RPC)", async () => {
    const body = { workspace: t.workspace, agent: "simulated", idempotencyKey: "create-1" };
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => call(t.url, "POST", "/v1/sessions", body)),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(5);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    const rpc = await call(t.url, "POST", "/v1/rpc", {
      jsonrpc: "2.0",
      id: 1,
      method: "sessions.create",
      params: body,
    });
    expect(rpc.body.result.id).toBe(answers[0].body.id);
    const [{ n }] = await t.sql<
      { n: number }[]
    >`select count(*)::int as n from sessions where idempotency_key = 'create-1'`;
    expect(n).toBe(1);
    // Without a key every create is a new session.
    const a = await call(t.url, "POST", "/v1/sessions", { workspace: t.workspace, agent: "simulated" });
    const b = await call(t.url, "POST", "/v1/sessions", { workspace: t.workspace, agent: "simulated" });
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(a.body.id).not.toBe(b.body.id);
  });
});

describe("events as JSON", () => {
  it("pages a session's events after a cursor when asked for application/json", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const task = await submitOk(t.url, sessionId, { prompt: "[deltas 5]" });
    const done = await waitTask(t.url, task.id);
    const json = { accept: "application/json" };
    const all = await call(
      t.url,
      "GET",
      `/v1/sessions/${sessionId}/events?afterSeq=0&limit=1000`,
      undefined,
      json,
    );
    expect(all.status).toBe(200);
    expect(all.headers.get("content-type")).toMatch(/application\/json/);
    expect(all.headers.get("x-mooring-boot-id")).toBe(t.gw.identity.bootId);
    const seqs = all.body.items.map((e: { seq: number }) => e.seq);
    expect(seqs).toEqual(Array.from({ length: done.lastSeq }, (_, i) => i + 1));
    expect(all.body).toMatchObject({ headSeq: done.lastSeq, nextAfterSeq: null });
    expect(all.body.items.at(-1)).toMatchObject({ type: "task.completed", taskId: task.id });

    const first = await call(
      t.url,
      "GET",
      `/v1/sessions/${sessionId}/events?afterSeq=1&limit=2`,
      undefined,
      json,
    );
    expect(first.body.items.map((e: { seq: number }) => e.seq)).toEqual([2, 3]);
    expect(first.body.nextAfterSeq).toBe(3);
    const tail = await call(
      t.url,
      "GET",
      `/v1/sessions/${sessionId}/events?afterSeq=${done.lastSeq}`,
      undefined,
      json,
    );
    expect(tail.body).toEqual({ items: [], headSeq: done.lastSeq, nextAfterSeq: null });

    // EventSource's Accept (text/event-stream) still gets the stream.
    const controller = new AbortController();
    const sse = await fetch(`${t.url}/v1/sessions/${sessionId}/events`, {
      headers: { accept: "text/event-stream" },
      signal: controller.signal,
    });
    expect(sse.headers.get("content-type")).toMatch(/text\/event-stream/);
    controller.abort();
  });

  it("answers RESYNC_REQUIRED for a cursor older than what is kept", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const task = await submitOk(t.url, sessionId, { prompt: "[deltas 3]" });
    await waitTask(t.url, task.id);
    await t.sql`update sessions set pruned_seq = 3 where id = ${sessionId}`;
    const r = await call(t.url, "GET", `/v1/sessions/${sessionId}/events?afterSeq=1`, undefined, {
      accept: "application/json",
    });
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ code: "RESYNC_REQUIRED", oldestSeq: 4 });
  });
});
