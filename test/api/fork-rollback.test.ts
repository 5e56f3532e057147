/**
 * Fork and rollback on the simulated agent (docs/api.md, Fork and rollback), across two instances
 * of one database, with tenants: the carried history, the events, monotonic turn indexes, what the
 * agent sees next (its `[history]` directive), both of its paths (native branch, recap), the
 * refusals (busy, too many turns, another tenant's id, nothing to fork), idempotent forks, and the
 * JSON-RPC methods.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { call, type TestGateway } from "../support/gateway.js";
import { cancelTask, terminal, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";

const TENANTS = JSON.stringify({ a: { tokens: ["token-a"] }, b: { tokens: ["token-b"] } });
const A = { authorization: "Bearer token-a" };
const B = { authorization: "Bearer token-b" };

// Two instances on one database: gw1 is the file's gateway, gw2 a second one.
const gt = useGateway({ env: { MOORING_TENANTS: TENANTS, MOORING_INSTANCE_ID: "fork-a" }, workspace: true });
let gw1: TestGateway;
let gw2: TestGateway;

beforeAll(async () => {
  gw1 = gt.gw;
  gw2 = await gt.startGateway({ MOORING_INSTANCE_ID: "fork-b" });
}, 120_000);

async function newSession(agentConfig: Record<string, unknown> = {}): Promise<string> {
  const r = await call(
    gw1.url,
    "POST",
    "/v1/sessions",
    { workspace: gt.workspace, agent: "simulated", agentConfig },
    A,
  );
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id;
}

/** Submit on `base` and wait for the end; the task must complete. */
async function turn(base: string, sessionId: string, prompt: string): Promise<any> {
  const t = await call(base, "POST", `/v1/sessions/${sessionId}/turns`, { prompt }, A);
  expect(t.status, JSON.stringify(t.body)).toBe(202);
  const done = await waitTask(base, t.body.id, undefined, 60_000, A);
  expect(done.status, JSON.stringify(done.error)).toBe("completed");
  return done;
}

/** What the agent's conversation held before the prompt, from a `[history]` turn's reply. */
async function history(base: string, sessionId: string): Promise<{ turn: any; seen: string }> {
  const done = await turn(base, sessionId, "[history]");
  const match = /history: (.*) $/.exec(done.result.text);
  expect(match, done.result.text).not.toBeNull();
  return { turn: done, seen: match![1] };
}

async function events(sessionId: string): Promise<any[]> {
  const r = await call(gw1.url, "GET", `/v1/sessions/${sessionId}/events?afterSeq=0&limit=1000`, undefined, {
    ...A,
    accept: "application/json",
  });
  expect(r.status).toBe(200);
  return r.body.items;
}

const session = async (id: string) => (await call(gw2.url, "GET", `/v1/sessions/${id}`, undefined, A)).body;

describe("rollback", () => {
  it("drops the last turns from the conversation, keeps their events, and never reuses an index", async () => {
    const id = await newSession();
    await turn(gw1.url, id, "alpha");
    await turn(gw2.url, id, "bravo");
    const dropped = await turn(gw1.url, id, "charlie");
    const r = await call(gw2.url, "POST", `/v1/sessions/${id}/rollback`, { turns: 1 }, A);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.turns.map((t: any) => [t.turnIndex, t.rolledBack])).toEqual([
      [0, false],
      [1, false],
      [2, true],
    ]);
    const log = await events(id);
    const boundary = log.find((e) => e.type === "session.rollback");
    expect(boundary.data).toEqual({ fromTurn: 2, toTurn: 2, keptTurn: 1, turns: [2] });
    // Nothing was deleted: the dropped turn's events are still there, before the boundary.
    const droppedEvents = log.filter((e) => e.taskId === dropped.id);
    expect(droppedEvents.map((e) => e.type)).toContain("task.completed");
    expect(Math.max(...droppedEvents.map((e) => e.seq))).toBeLessThan(boundary.seq);

    const next = await history(gw1.url, id);
    expect(next.turn.turnIndex).toBe(3);
    expect(next.seen).toContain("alpha");
    expect(next.seen).toContain("bravo");
    expect(next.seen).not.toContain("charlie");
    // The native path branched the agent's conversation: no fresh start was announced.
    expect((await events(id)).filter((e) => e.type === "session.reset")).toEqual([]);
    expect((await session(id)).turnCount).toBeGreaterThanOrEqual(4);
  }, 120_000);

  it("starts fresh with the carried history when the agent cannot branch (recap path)", async () => {
    const id = await newSession({ forkPath: "recap" });
    await turn(gw1.url, id, "alpha");
    await turn(gw1.url, id, "bravo");
    expect((await call(gw1.url, "POST", `/v1/sessions/${id}/rollback`, { turns: 1 }, A)).status).toBe(200);
    const next = await history(gw2.url, id);
    expect(next.seen).toContain("recap: ");
    expect(next.seen).toContain("alpha");
    expect(next.seen).not.toContain("bravo");
    const reset = (await events(id)).find((e) => e.type === "session.reset");
    expect(reset.data).toMatchObject({ reason: "rollback", carriedOver: { turns: 1 } });
    expect(reset.taskId).toBe(next.turn.id);
  }, 120_000);

  it("refuses a busy session, more turns than it has, another tenant's id, and rolls back every turn", async () => {
    const id = await newSession();
    await turn(gw1.url, id, "alpha");
    const tooMany = await call(gw1.url, "POST", `/v1/sessions/${id}/rollback`, { turns: 2 }, A);
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toMatchObject({ code: "INVALID_REQUEST", field: "turns" });
    const bad = await call(gw1.url, "POST", `/v1/sessions/${id}/rollback`, { turns: 0 }, A);
    expect(bad.status).toBe(400);
    const foreign = await call(gw1.url, "POST", `/v1/sessions/${id}/rollback`, { turns: 1 }, B);
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("SESSION_NOT_FOUND");

    const running = await call(gw1.url, "POST", `/v1/sessions/${id}/turns`, { prompt: "[hang]" }, A);
    await waitTask(gw1.url, running.body.id, (t) => t.status === "running", 60_000, A);
    const busy = await call(gw2.url, "POST", `/v1/sessions/${id}/rollback`, { turns: 1 }, A);
    expect(busy.status).toBe(409);
    expect(busy.body.error.code).toBe("SESSION_BUSY");
    await cancelTask(gw1.url, running.body.id, A);
    await waitTask(gw1.url, running.body.id, (t) => terminal.includes(t.status), 60_000, A);

    // Every completed turn may go: the next turn's agent starts with nothing.
    expect((await call(gw1.url, "POST", `/v1/sessions/${id}/rollback`, { turns: 1 }, A)).status).toBe(200);
    const next = await history(gw1.url, id);
    expect(next.seen).not.toContain("alpha");
    expect(next.turn.turnIndex).toBe(2);
  }, 120_000);
});

describe("fork", () => {
  it("carries the source's history up to a turn, leaves the source alone, and is idempotent", async () => {
    const source = await newSession();
    const t0 = await turn(gw1.url, source, "alpha");
    await turn(gw1.url, source, "bravo");
    await turn(gw1.url, source, "charlie");
    const body = { atTurn: 1, title: "branch", metadata: { k: 1 }, idempotencyKey: "fork-1" };
    const r = await call(gw2.url, "POST", `/v1/sessions/${source}/fork`, body, A);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.headers.get("location")).toBe(`/v1/sessions/${r.body.id}`);
    expect(r.body).toMatchObject({
      tenant: "a",
      workspace: gt.workspace,
      agent: "simulated",
      title: "branch",
      metadata: { k: 1 },
      status: "idle",
      forkedFrom: { sessionId: source, turnIndex: 1 },
    });
    const again = await call(gw1.url, "POST", `/v1/sessions/${source}/fork`, body, A);
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(r.body.id);
    const fork = r.body.id as string;

    const snapshot = await session(fork);
    expect(snapshot.turns.map((t: any) => [t.turnIndex, t.prompt, t.status])).toEqual([
      [0, "alpha", "completed"],
      [1, "bravo", "completed"],
    ]);
    expect(snapshot.turns[0].id).not.toBe(t0.id);
    const log = await events(fork);
    expect(log[0]).toMatchObject({ seq: 1, type: "session.forked", taskId: null });
    expect(log[0].data).toEqual({ sessionId: source, turnIndex: 1, carriedTurns: 2 });
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
    expect(log.filter((e) => e.type === "task.completed").map((e) => e.taskId)).toEqual(
      snapshot.turns.map((t: any) => t.id),
    );

    const next = await history(gw1.url, fork);
    expect(next.turn.turnIndex).toBe(2);
    expect(next.seen).toContain("alpha");
    expect(next.seen).toContain("bravo");
    expect(next.seen).not.toContain("charlie");
    // The source goes on as it was.
    const sourceNext = await history(gw2.url, source);
    expect(sourceNext.turn.turnIndex).toBe(3);
    expect(sourceNext.seen).toContain("charlie");
    expect(sourceNext.seen).not.toContain("[history]");

    // A fork of a fork: its history is the fork's.
    const second = await call(gw1.url, "POST", `/v1/sessions/${fork}/fork`, {}, A);
    expect(second.status).toBe(201);
    expect(second.body.forkedFrom).toEqual({ sessionId: fork, turnIndex: 2 });
    const deeper = await history(gw2.url, second.body.id);
    expect(deeper.seen).toContain("bravo");
    expect(deeper.seen).toContain("[history]");
    expect(deeper.seen).not.toContain("charlie");
  }, 120_000);

  it("forks a busy source at its last completed turn, without the running one", async () => {
    const source = await newSession({ forkPath: "recap" });
    await turn(gw1.url, source, "alpha");
    const running = await call(gw1.url, "POST", `/v1/sessions/${source}/turns`, { prompt: "[hang] zulu" }, A);
    await waitTask(gw1.url, running.body.id, (t) => t.status === "running", 60_000, A);
    const r = await call(gw2.url, "POST", `/v1/sessions/${source}/fork`, {}, A);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.forkedFrom).toEqual({ sessionId: source, turnIndex: 0 });
    const snapshot = await session(r.body.id);
    expect(snapshot.turns.map((t: any) => t.prompt)).toEqual(["alpha"]);
    expect((await events(r.body.id)).some((e) => e.taskId === running.body.id)).toBe(false);
    // The recap path: a fresh agent conversation with the carried history, announced.
    const next = await history(gw1.url, r.body.id);
    expect(next.seen).toContain("alpha");
    expect(next.seen).not.toContain("zulu");
    const reset = (await events(r.body.id)).find((e) => e.type === "session.reset");
    expect(reset.data).toMatchObject({ reason: "fork", carriedOver: { turns: 1 } });
    await cancelTask(gw1.url, running.body.id, A);
    await waitTask(gw1.url, running.body.id, (t) => terminal.includes(t.status), 60_000, A);
  }, 120_000);

  it("refuses another tenant's id, a turn that does not exist, and a source with no completed turn", async () => {
    const source = await newSession();
    const none = await call(gw1.url, "POST", `/v1/sessions/${source}/fork`, {}, A);
    expect(none.status).toBe(400);
    expect(none.body.error).toMatchObject({ code: "INVALID_REQUEST", field: "atTurn" });
    await turn(gw1.url, source, "alpha");
    const foreign = await call(gw1.url, "POST", `/v1/sessions/${source}/fork`, {}, B);
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("SESSION_NOT_FOUND");
    const missing = await call(gw1.url, "POST", `/v1/sessions/${source}/fork`, { atTurn: 7 }, A);
    expect(missing.status).toBe(400);
    expect(missing.body.error.field).toBe("atTurn");
    const unknown = await call(
      gw1.url,
      "POST",
      "/v1/sessions/00000000-0000-4000-8000-000000000000/fork",
      {},
      A,
    );
    expect(unknown.status).toBe(404);
    // A rolled-back turn is no fork point.
    await turn(gw1.url, source, "bravo");
    expect((await call(gw1.url, "POST", `/v1/sessions/${source}/rollback`, { turns: 1 }, A)).status).toBe(
      200,
    );
    const rolled = await call(gw1.url, "POST", `/v1/sessions/${source}/fork`, { atTurn: 1 }, A);
    expect(rolled.status).toBe(400);
  }, 120_000);
});

describe("JSON-RPC", () => {
  it("has sessions.fork and sessions.rollback", async () => {
    const id = await newSession();
    await turn(gw1.url, id, "alpha");
    await turn(gw1.url, id, "bravo");
    const rpc = async (method: string, params: unknown) =>
      (await call(gw2.url, "POST", "/v1/rpc", { jsonrpc: "2.0", id: 1, method, params }, A)).body;
    const forked = await rpc("sessions.fork", { sessionId: id, atTurn: 0 });
    expect(forked.result.forkedFrom).toEqual({ sessionId: id, turnIndex: 0 });
    const rolled = await rpc("sessions.rollback", { sessionId: id, turns: 1 });
    expect(rolled.result.turns.at(-1)).toMatchObject({ turnIndex: 1, rolledBack: true });
    const foreign = (
      await call(
        gw2.url,
        "POST",
        "/v1/rpc",
        { jsonrpc: "2.0", id: 2, method: "sessions.rollback", params: { sessionId: id, turns: 1 } },
        B,
      )
    ).body;
    expect(foreign.error.data?.code ?? foreign.error.message).toMatch(/SESSION_NOT_FOUND|does not exist/);
  }, 120_000);
});
