/**
 * Retention (docs/operations.md, Retention): the sweep deletes sessions archived long ago with every
 * row of them (MOORING_ARCHIVED_RETENTION_DAYS, a tenant's archivedRetentionDays), keeps the rest;
 * `DELETE /v1/sessions/:id?purge=true` archives and deletes at once, for the session's tenant or an
 * admin, and ends the session's WebSocket subscriptions (`events.ended`) and SSE streams (`event:
 * end`) cleanly, on another instance too (its feed poll). The purge counters (docs/metrics.md)
 * count what went.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { call, eventually, type TestGateway } from "../support/gateway.js";
import { parseExposition } from "../support/prometheus.js";
import { sessionRowCounts } from "../support/sql-fixtures.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { WsClients } from "../support/ws-client.js";

const A = { authorization: "Bearer tok-a" };
const B = { authorization: "Bearer tok-b" };
const OPS = { authorization: "Bearer tok-ops" };
const TENANTS = {
  a: { tokens: ["tok-a"] },
  // Its archived sessions are kept whatever the default.
  b: { tokens: ["tok-b"], archivedRetentionDays: 0 },
  ops: { tokens: ["tok-ops"], admin: true },
};

// The file's gateway starts in beforeAll, so that another instance can start without its retention settings.
const gt = useGateway({ workspace: true, start: false });
let gw: TestGateway;
let workspace: string;
const clients = new WsClients(() => gw.url);

beforeAll(async () => {
  gw = await gt.startGateway({
    MOORING_TENANTS: JSON.stringify(TENANTS),
    MOORING_ARCHIVED_RETENTION_DAYS: "30",
    // The retention sweep ticks every 6 sweeps: 600 ms here.
    MOORING_SWEEP_MS: "100",
  });
  workspace = gt.workspace;
});

/** Rows of `sessionId` in every table that holds session rows. */
const rowsOf = (sessionId: string) => sessionRowCounts(gt.sql, sessionId);
const NONE = {
  sessions: 0,
  tasks: 0,
  events: 0,
  permissionRequests: 0,
  transcriptChunks: 0,
  webhookDeliveries: 0,
  checkpoints: 0,
};

/** A session of `headers`' tenant with one completed turn (a tool call: several events). */
async function sessionWithTurn(headers: Record<string, string>): Promise<{ id: string; lastSeq: number }> {
  const id = await createSession(gw.url, workspace, {}, headers);
  const task = await submitPrompt(gw.url, id, "[tool 10]", headers);
  const done = await waitTask(gw.url, task.id, undefined, 60_000, headers);
  expect(done.status).toBe("completed");
  const session = await call(gw.url, "GET", `/v1/sessions/${id}`, undefined, headers);
  return { id, lastSeq: session.body.lastSeq };
}

async function archive(id: string, headers: Record<string, string>): Promise<void> {
  const res = await call(gw.url, "DELETE", `/v1/sessions/${id}`, undefined, headers);
  expect(res.status).toBe(200);
  expect(res.body.status).toBe("archived");
}

async function archivedDaysAgo(id: string, days: number): Promise<void> {
  await gt.sql`update sessions set archived_at = now() - make_interval(days => ${days}) where id = ${id}`;
}

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const res = await fetch(`${gw.url}/metrics`, { headers: OPS });
  const samples = parseExposition(await res.text()).samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return samples.reduce((sum, s) => sum + s.value, 0);
}

describe("the retention sweep", () => {
  it("deletes a session archived long ago with every row; yesterday's, an idle one and a keeping tenant's stay", async () => {
    const old = await sessionWithTurn(A);
    const yesterday = await sessionWithTurn(A);
    const idle = await sessionWithTurn(A);
    const kept = await sessionWithTurn(B);
    await archive(old.id, A);
    await archive(yesterday.id, A);
    await archive(kept.id, B);
    const before = await rowsOf(old.id);
    expect(before.tasks).toBe(1);
    expect(before.events).toBeGreaterThanOrEqual(4);
    const purgedBefore = await metric("mooring_sessions_purged_total", { trigger: "retention" });
    const eventsBefore = await metric("mooring_purged_rows_total", { table: "events" });

    await archivedDaysAgo(old.id, 40);
    await archivedDaysAgo(yesterday.id, 1);
    await archivedDaysAgo(kept.id, 400);
    // Idle for over a year and never archived: retention never touches it.
    await gt.sql`update sessions set created_at = now() - interval '400 days', last_activity_at = now() - interval '400 days'
                   where id = ${idle.id}`;

    await eventually(async () => (await rowsOf(old.id)).sessions === 0, 60_000);
    expect(await rowsOf(old.id)).toEqual(NONE);
    for (const id of [yesterday.id, idle.id, kept.id]) {
      const rows = await rowsOf(id);
      expect(rows.sessions).toBe(1);
      expect(rows.tasks).toBe(1);
      expect(rows.events).toBeGreaterThanOrEqual(4);
    }
    expect((await call(gw.url, "GET", `/v1/sessions/${old.id}`, undefined, A)).status).toBe(404);
    expect(await metric("mooring_sessions_purged_total", { trigger: "retention" })).toBe(purgedBefore + 1);
    expect(await metric("mooring_purged_rows_total", { table: "events" })).toBe(eventsBefore + before.events);
  }, 120_000);
});

describe("DELETE /v1/sessions/:id?purge=true", () => {
  it("ends the session's WebSocket subscription and SSE stream, answers once nothing is left, then the session is missing everywhere", async () => {
    const s = await sessionWithTurn(A);
    const other = await sessionWithTurn(A);
    const ws = await clients.connect(gw.url, { headers: A });
    await ws.call("events.subscribe", { sessionId: s.id, afterSeq: 0 });
    await ws.call("events.subscribe", { sessionId: other.id, afterSeq: 0 });
    await ws.until(() => ws.eventsOf(s.id).length === s.lastSeq, 20_000, "the replay");

    const controller = new AbortController();
    const sse = await fetch(`${gw.url}/v1/sessions/${s.id}/events?afterSeq=0`, {
      headers: { ...A, accept: "text/event-stream" },
      signal: controller.signal,
    });
    expect(sse.status).toBe(200);
    const reader = sse.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    try {
      while (!text.includes(`id: ${s.lastSeq}\n`)) text += decoder.decode((await reader.read()).value);

      // Another tenant's session answers as a missing one; nothing is deleted.
      const foreign = await call(gw.url, "DELETE", `/v1/sessions/${s.id}?purge=true`, undefined, B);
      expect(foreign.status).toBe(404);
      expect(foreign.body.error.code).toBe("SESSION_NOT_FOUND");
      expect((await rowsOf(s.id)).sessions).toBe(1);

      const before = await rowsOf(s.id);
      const purged = await call(gw.url, "DELETE", `/v1/sessions/${s.id}?purge=true`, undefined, A);
      expect(purged.status).toBe(200);
      expect(purged.body).toEqual({
        id: s.id,
        purged: true,
        deleted: {
          sessions: 1,
          tasks: 1,
          events: before.events,
          permissionRequests: 0,
          transcriptChunks: 0,
          webhookDeliveries: 0,
          checkpoints: 0,
        },
      });
      // Answered when nothing of it is left.
      expect(await rowsOf(s.id)).toEqual(NONE);

      // SSE: a last `end` record, then the stream ends.
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value);
      }
      expect(text).toContain(
        `event: end\ndata: ${JSON.stringify({ sessionId: s.id, reason: "session_purged" })}\n\n`,
      );
      expect(
        text.endsWith(
          `event: end\ndata: ${JSON.stringify({ sessionId: s.id, reason: "session_purged" })}\n\n`,
        ),
      ).toBe(true);
    } finally {
      controller.abort();
    }

    // WebSocket: `events.ended` for that subscription; the socket and its other subscription go on.
    await ws.until(
      () => ws.received.some((r) => r.message?.method === "events.ended"),
      20_000,
      "events.ended",
    );
    const ended = ws.received.filter((r) => r.message?.method === "events.ended").map((r) => r.message);
    expect(ended).toEqual([
      { jsonrpc: "2.0", method: "events.ended", params: { sessionId: s.id, reason: "session_purged" } },
    ]);
    expect(ws.eventsOf(s.id).map((e) => e.seq)).toEqual(Array.from({ length: s.lastSeq }, (_, i) => i + 1));
    expect(ws.ws.readyState).toBe(ws.ws.OPEN);
    const task = await submitPrompt(gw.url, other.id, "hello", A);
    await ws.waitForTerminal(other.id, task.id, 30_000);
    // Unsubscribing the ended subscription finds nothing to end.
    expect(await ws.call("events.unsubscribe", { sessionId: s.id })).toEqual({
      sessionId: s.id,
      unsubscribed: false,
    });

    // An event-log cursor on it answers as for a missing session, on every way in.
    const resubscribe = await ws.request("events.subscribe", { sessionId: s.id, afterSeq: 3 });
    expect(resubscribe.error?.data?.code).toBe("SESSION_NOT_FOUND");
    const page = await call(gw.url, "GET", `/v1/sessions/${s.id}/events?afterSeq=3`, undefined, {
      ...A,
      accept: "application/json",
    });
    expect(page.status).toBe(404);
    expect(page.body.error.code).toBe("SESSION_NOT_FOUND");
    const stream = await call(gw.url, "GET", `/v1/sessions/${s.id}/events?afterSeq=3`, undefined, A);
    expect(stream.status).toBe(404);
    expect(stream.body.error.code).toBe("SESSION_NOT_FOUND");
    // A second purge finds nothing.
    const again = await call(gw.url, "DELETE", `/v1/sessions/${s.id}?purge=true`, undefined, A);
    expect(again.status).toBe(404);
  }, 120_000);

  it("cancels a running turn first, then deletes; an admin may purge any tenant's session", async () => {
    const purgedBefore = await metric("mooring_sessions_purged_total", { trigger: "request" });
    const id = await createSession(gw.url, workspace, {}, A);
    const task = await submitPrompt(gw.url, id, "[hang]", A);
    const running = await waitTask(gw.url, task.id, (t) => t.status !== "queued", 60_000, A);
    expect(running.status).toBe("running");
    const purged = await call(gw.url, "DELETE", `/v1/sessions/${id}?purge=true`, undefined, OPS);
    expect(purged.status).toBe(200);
    expect(purged.body.deleted.sessions).toBe(1);
    expect(purged.body.deleted.tasks).toBe(1);
    expect(await rowsOf(id)).toEqual(NONE);
    expect((await call(gw.url, "GET", `/v1/tasks/${task.id}`, undefined, A)).status).toBe(404);
    expect(await metric("mooring_sessions_purged_total", { trigger: "request" })).toBe(purgedBefore + 1);
  }, 120_000);

  it("waits out a lock another transaction holds on one of its rows (no 500), then deletes", async () => {
    const s = await sessionWithTurn(A);
    await gt.sql`insert into webhook_deliveries (tenant, url, event_type, session_id, seq, body, status)
                   values ('a', 'https://hooks.example.com/x', 'task.completed', ${s.id}, 1, '{}', 'delivered')`;
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked: () => void = () => {};
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve;
    });
    // A delivery being recorded, say: its row stays locked past the purge's 2 s lock wait.
    const holder = gt.sql.begin(async (tx) => {
      await tx`select 1 from webhook_deliveries where session_id = ${s.id} for update`;
      locked();
      await released;
    });
    try {
      await isLocked;
      const answer = call(gw.url, "DELETE", `/v1/sessions/${s.id}?purge=true`, undefined, A);
      // The purge's transaction waits on the lock, gives up (lock_timeout), rolls back and tries
      // again in a new transaction: a waiter whose transaction started later than the first one's.
      const waiters = () =>
        gt.sql<{ xactStart: Date }[]>`
            select xact_start from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`;
      const first = await eventually(async () => (await waiters())[0]?.xactStart, 30_000);
      await eventually(async () => (await waiters()).some((w) => w.xactStart > first), 30_000);
      expect((await rowsOf(s.id)).sessions).toBe(1);
      expect((await rowsOf(s.id)).webhookDeliveries).toBe(1);
      release();
      const purged = await answer;
      expect(purged.status).toBe(200);
      expect(purged.body.deleted.webhookDeliveries).toBe(1);
    } finally {
      release();
      await holder;
    }
    expect(await rowsOf(s.id)).toEqual(NONE);
  }, 120_000);

  it("ends a subscription on another instance too, within its feed poll", async () => {
    const other = await gt.startGateway({ MOORING_TENANTS: JSON.stringify(TENANTS) });
    try {
      const s = await sessionWithTurn(A);
      const ws = await clients.connect(other.url, { headers: A });
      await ws.call("events.subscribe", { sessionId: s.id, afterSeq: 0 });
      await ws.until(() => ws.eventsOf(s.id).length === s.lastSeq, 20_000, "the replay");
      const purged = await call(gw.url, "DELETE", `/v1/sessions/${s.id}?purge=true`, undefined, A);
      expect(purged.status).toBe(200);
      await ws.until(
        () => ws.received.some((r) => r.message?.method === "events.ended"),
        20_000,
        "events.ended from the other instance",
      );
      const ended = ws.received
        .filter((r) => r.message?.method === "events.ended")
        .map((r) => r.message.params);
      expect(ended).toEqual([{ sessionId: s.id, reason: "session_purged" }]);
      expect(other.holding()).toMatchObject({ subscribers: 0, feeds: 0 });
    } finally {
      await clients.closeAll();
    }
  }, 120_000);

  it("purge=false only archives; a purge value that is not a boolean is refused and changes nothing", async () => {
    const id = await createSession(gw.url, workspace, {}, A);
    const bad = await call(gw.url, "DELETE", `/v1/sessions/${id}?purge=yes`, undefined, A);
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("INVALID_REQUEST");
    expect((await call(gw.url, "GET", `/v1/sessions/${id}`, undefined, A)).body.status).toBe("idle");
    const archived = await call(gw.url, "DELETE", `/v1/sessions/${id}?purge=false`, undefined, A);
    expect(archived.status).toBe(200);
    expect(archived.body.status).toBe("archived");
    expect((await rowsOf(id)).sessions).toBe(1);
  });
});
