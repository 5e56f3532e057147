/**
 * JSON-RPC is bounded (a flood of long-poll batches once held an instance): batches are capped, a socket's calls in flight are
 * capped, long-poll waits are capped per instance and share one watch per task; ids that cannot
 * come back exactly are refused. Real gateway, real Postgres, real WebSocket clients.
 */
import { afterAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, eventually } from "../support/gateway.js";
import { counts, createSession, submitOk, waitStatus, waitTask } from "../support/turns.js";
import { WsClients } from "../support/ws-client.js";

const MAX_LONG_POLLS = 150;

const t = useGateway({
  env: {
    MOORING_MAX_ACTIVE: "4",
    MOORING_MAX_LONG_POLLS: String(MAX_LONG_POLLS),
  },
  workspace: true,
});
const clients = new WsClients(() => t.url);

afterAll(async () => {
  await clients.closeAll();
});

/** A running turn that lasts `ms`. */
async function runningTask(ms: number): Promise<{ sessionId: string; taskId: string }> {
  const sessionId = await createSession(t.url, t.workspace);
  const task = await submitOk(t.url, sessionId, { prompt: `[sleep ${ms}]` });
  const running = await waitStatus(t.url, task.id, "running");
  expect(running.status).toBe("running");
  return { sessionId, taskId: task.id };
}

const batchOf = (n: number, make: (i: number) => object) =>
  JSON.stringify(Array.from({ length: n }, (_, i) => ({ jsonrpc: "2.0", ...make(i) })));

/**
 * /healthz answers 200 within `boundMs` (a probe that does not answer in time aborts and fails the
 * test), probed until `stop` resolves; how many probes answered.
 */
async function watchHealth(stop: Promise<unknown>, boundMs: number): Promise<number> {
  let done = false;
  void stop.finally(() => {
    done = true;
  });
  let probes = 0;
  while (!done) {
    const res = await fetch(`${t.url}/healthz`, { signal: AbortSignal.timeout(boundMs) });
    expect(res.status).toBe(200);
    probes++;
    // A probe loop's pacing: a probe every 100 ms, not a flood of probes on top of the flood.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return probes;
}

describe("a flood of long-poll batches", () => {
  it("8 frames of 8,000 tasks.get {waitMs: 60000}: refused at once; /healthz answers; the running turn completes", async () => {
    const { taskId } = await runningTask(3000);
    const client = await clients.connect();
    const before = client.received.length;
    const frame = batchOf(8000, (i) => ({
      id: i + 1,
      method: "tasks.get",
      params: { taskId, waitMs: 60_000 },
    }));
    expect(Buffer.byteLength(frame)).toBeLessThan(1024 * 1024); // under the frame limit
    for (let i = 0; i < 8; i++) client.sendRaw(frame);
    // Refused, not held for the wait: a held call would answer after a minute, past this wait.
    const answered = client.until(() => client.received.length - before >= 8, 10_000, "8 answers");
    const probes = await watchHealth(answered, 2000);
    await answered;
    const answers = client.received.slice(before).map((r) => r.message);
    for (const answer of answers) {
      // One error for the whole batch: nothing in it ran.
      expect(answer).toMatchObject({
        id: null,
        error: { code: -32600, data: { code: "INVALID_REQUEST", reason: "batch_too_large" } },
      });
    }
    expect(probes).toBeGreaterThan(0);
    expect(t.gw.holding().longPolls).toBe(0);
    // The turn that was running meanwhile was not disturbed: its sleep ends on the gateway's clock.
    await t.clock.advance(3000);
    expect((await waitTask(t.url, taskId)).status).toBe("completed");
  });

  it("calls in flight per socket are capped: past 200 a frame's calls get GATEWAY_BUSY at once, unrun", async () => {
    // Shorter than the waits (10 s), so it ends first when the clock is stepped over it.
    const { taskId } = await runningTask(5000);
    const client = await clients.connect();
    const before = client.received.length;
    // Three frames of 100 long-polls: two fit in the socket's 200 calls in flight, the third not.
    for (let f = 0; f < 3; f++) {
      client.sendRaw(
        batchOf(100, (i) => ({ id: `f${f}-${i}`, method: "tasks.get", params: { taskId, waitMs: 10_000 } })),
      );
    }
    // The capped waits are held; the turn's sleep then ends on the gateway's clock, which they wait for.
    await eventually(async () => t.gw.holding().longPolls === MAX_LONG_POLLS);
    await t.clock.advance(5000);
    await client.until(() => client.received.length - before >= 3, 20_000, "three answers");
    const answers = client.received.slice(before).map((r) => r.message as any[]);
    // The refused frame is answered first (the others wait for the task to change).
    const [refused, ...held] = answers;
    expect(refused).toHaveLength(100);
    for (const a of refused) {
      expect(a.id).toMatch(/^f2-/);
      expect(a.error).toMatchObject({
        code: -32002,
        data: { code: "GATEWAY_BUSY", reason: "calls_in_flight", retryAfterSeconds: 1 },
      });
    }
    // The calls that ran: MAX_LONG_POLLS waited for the change, the rest answered at once with what
    // they read, running, or completed when their read came after the turn ended (the clock's
    // advance does not wait for them: under load some read late; seen in CI).
    const results = held.flat();
    expect(results).toHaveLength(200);
    for (const a of results) expect(a.error).toBeUndefined();
    const completed = results.filter((a) => a.result.status === "completed").length;
    const running = results.filter((a) => a.result.status === "running").length;
    expect(completed).toBeGreaterThanOrEqual(MAX_LONG_POLLS);
    expect(completed + running).toBe(200);
    await eventually(async () => t.gw.holding().socketCalls === 0);
  });
});

describe("long-poll waits", () => {
  it("are capped per instance and share one watch per task; past the cap a read answers at once", async () => {
    const { taskId } = await runningTask(60_000);
    const client = await clients.connect();
    const waits = Array.from({ length: 100 }, () => client.request("tasks.get", { taskId, waitMs: 20_000 }));
    const waits2 = Array.from({ length: 50 }, () => client.request("tasks.get", { taskId, waitMs: 20_000 }));
    await eventually(async () => t.gw.holding().longPolls === MAX_LONG_POLLS);
    // One watched task for all its waiters.
    expect(t.gw.holding().watchedTasks).toBe(1);

    // The instance holds no more: REST and JSON-RPC long-polls answer at once with the state (a
    // held one would wait a minute, past the test's own time).
    const rest = await call(t.url, "GET", `/v1/tasks/${taskId}?waitMs=60000`);
    const rpc = await client.call("tasks.get", { taskId, waitMs: 60_000 });
    expect(rest.status).toBe(200);
    expect(rest.body.status).toBe("running");
    expect(rpc.status).toBe("running");
    expect(t.gw.holding().longPolls).toBe(MAX_LONG_POLLS);

    // A change answers every waiter, promptly, with the new state.
    const cancel = await call(t.url, "POST", `/v1/tasks/${taskId}/cancel`);
    expect(cancel.status).toBe(200);
    const answers = await Promise.all([...waits, ...waits2]);
    for (const a of answers) expect(["cancelling", "cancelled"]).toContain(a.result.status);
    await eventually(async () => t.gw.holding().longPolls === 0 && t.gw.holding().watchedTasks === 0);
  });

  it("a wait that runs out answers with the state at its end", async () => {
    const { taskId } = await runningTask(60_000);
    let answered = false;
    // Half the agent's own sleep, which runs on the same clock.
    const held = call(t.url, "GET", `/v1/tasks/${taskId}?waitMs=30000`).finally(() => {
      answered = true;
    });
    await eventually(async () => t.gw.holding().longPolls === 1);
    expect(answered).toBe(false);
    await t.clock.advance(30_000);
    const r = await held;
    expect(r.body.status).toBe("running");
    expect(t.gw.holding().longPolls).toBe(0);
    await call(t.url, "POST", `/v1/tasks/${taskId}/cancel`);
    expect((await waitTask(t.url, taskId)).status).toBe("cancelled");
  });
});

describe("POST /v1/rpc", () => {
  const post = (body: string) => call(t.url, "POST", "/v1/rpc", body, { "content-type": "application/json" });

  it("a batch of 101 is one -32600 error and nothing in it runs; 100 run", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const before = await counts(t.sql);
    const tooMany = await post(
      batchOf(101, (i) => ({ id: i, method: "turns.submit", params: { sessionId, prompt: "hi" } })),
    );
    expect(tooMany.status).toBe(200);
    expect(tooMany.body).toMatchObject({
      id: null,
      error: { code: -32600, data: { reason: "batch_too_large" } },
    });
    expect(await counts(t.sql)).toEqual(before);
    const fits = await post(batchOf(100, (i) => ({ id: i, method: "gate.status" })));
    expect(fits.body).toHaveLength(100);
    for (const a of fits.body) expect(a.result).toMatchObject({ maxActive: 4 });
  });

  it.each([
    ["1e400", "Infinity"],
    ["1.5", "a fraction"],
    ["{}", "an object"],
    ["[1]", "an array"],
    ["true", "a boolean"],
    ["12345678901234567890", "past 2^53"],
  ])("refuses the id %s (%s)", async (id) => {
    const r = await post(`{"jsonrpc":"2.0","id":${id},"method":"gate.status"}`);
    expect(r.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
    expect(r.body.result).toBeUndefined();
  });

  it("keeps string, safe integer and null ids exactly", async () => {
    for (const id of ['"k\\u00e9"', "9007199254740991", "-3", "0", "null"]) {
      const r = await post(`{"jsonrpc":"2.0","id":${id},"method":"gate.status"}`);
      expect(r.body.id).toEqual(JSON.parse(id));
      expect(r.body.result).toBeDefined();
    }
  });
});
