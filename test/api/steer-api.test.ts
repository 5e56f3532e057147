/**
 * Steering a running turn over REST and JSON-RPC (docs/api.md, Steering a running turn): the
 * simulated agent takes the input within the turn, each steer is stored once as `turn.input`
 * before the agent echoes it, refusals have defined codes (never a 500), ifBusy steer, and
 * tenants: another tenant's task answers as a missing one.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { call } from "../support/gateway.js";
import { cancelOpenTasks, createSession, submit, submitOk, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";

const auth = (tenant: string) => ({ authorization: `Bearer token-${tenant}` });
const gt = useGateway({
  env: {
    MOORING_POLL_MS: "100",
    MOORING_MAX_ACTIVE: "1",
    MOORING_TENANTS: JSON.stringify({
      a: { tokens: ["token-a"] },
      b: { tokens: ["token-b"] },
      ops: { tokens: ["token-ops"], admin: true },
    }),
  },
  workspace: true,
});
// As the tenant admin: a failed test must not leave the one slot taken (useGateway's own
// cancelOpenTasks has no token).
afterEach(() => cancelOpenTasks(gt.url, gt.sql, auth("ops")));

/** Until the task runs (or ended: the caller asserts which). */
const running = (taskId: string) => waitTask(gt.url, taskId, (t) => t.status !== "queued", 30_000, auth("a"));

const steer = (taskId: string, body: unknown, tenant = "a") =>
  call(gt.url, "POST", `/v1/tasks/${taskId}/input`, body, auth(tenant));

async function inputEvents(taskId: string): Promise<{ seq: number; data: { text: string } }[]> {
  return gt.sql`select seq, data from events where task_id = ${taskId} and type = 'turn.input' order by seq`;
}

describe("steer a running turn", () => {
  it("the agent takes each input once, within the turn; each is stored once before its echo", async () => {
    const s = await createSession(gt.url, gt.workspace, {}, auth("a"));
    const task = await submitOk(gt.url, s, { prompt: "[input] [input]" }, auth("a"));
    expect((await running(task.id)).status).toBe("running");
    const first = await steer(task.id, { text: "go left" });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ taskId: task.id, sessionId: s, text: "go left", created: true });
    const second = await steer(task.id, { text: "then right" });
    expect(second.status).toBe(202);
    expect(second.body.seq).toBeGreaterThan(first.body.seq);

    const done = await waitTask(gt.url, task.id, undefined, 30_000, auth("a"));
    expect(done.status).toBe("completed");
    expect(done.result.text).toBe("steered go left steered then right ");
    const stored = await inputEvents(task.id);
    expect(stored.map((e) => e.data.text)).toEqual(["go left", "then right"]);
    // Stored before the agent saw it: the delta holding each echo comes after its turn.input in the
    // log. Two echoes the agent emitted into one flush are one delta (consecutive deltas of a turn
    // are merged in a flush, stream/event-batch.ts): both inputs can reach the agent before its
    // first [input], or in one read.
    const echoes = await gt.sql<{ seq: number; data: { text: string } }[]>`
      select seq, data from events where task_id = ${task.id} and type = 'message.delta' order by seq`;
    expect(echoes.map((e) => e.data.text).join("")).toBe("steered go left steered then right ");
    for (const input of stored) {
      const echo = echoes.find((e) => e.data.text.includes(`steered ${input.data.text} `));
      expect(Number(echo?.seq)).toBeGreaterThan(Number(input.seq));
    }
  });

  it("a retry with the same idempotencyKey is stored and delivered once", async () => {
    const s = await createSession(gt.url, gt.workspace, {}, auth("a"));
    const task = await submitOk(gt.url, s, { prompt: "[input] [sleep 300]" }, auth("a"));
    await running(task.id);
    const a = await steer(task.id, { text: "once", idempotencyKey: "k1" });
    const b = await steer(task.id, { text: "once", idempotencyKey: "k1" });
    expect(a.status).toBe(202);
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({ seq: a.body.seq, created: false });
    const done = await waitTask(gt.url, task.id, undefined, 30_000, auth("a"));
    expect(done.result.text).toBe("steered once ");
    expect(await inputEvents(task.id)).toHaveLength(1);
    // After the turn, the retry still answers the stored input, not TASK_NOT_RUNNING.
    const late = await steer(task.id, { text: "once", idempotencyKey: "k1" });
    expect(late.status).toBe(200);
    expect(late.body.seq).toBe(a.body.seq);
  });

  it("JSON-RPC turns.steer does the same", async () => {
    const s = await createSession(gt.url, gt.workspace, {}, auth("a"));
    const task = await submitOk(gt.url, s, { prompt: "[input]" }, auth("a"));
    await running(task.id);
    const r = await call(
      gt.url,
      "POST",
      "/v1/rpc",
      { jsonrpc: "2.0", id: 1, method: "turns.steer", params: { taskId: task.id, text: "via rpc" } },
      auth("a"),
    );
    expect(r.body.result).toMatchObject({ taskId: task.id, text: "via rpc", created: true });
    const done = await waitTask(gt.url, task.id, undefined, 30_000, auth("a"));
    expect(done.result.text).toBe("steered via rpc ");
  });
});

describe("refusals", () => {
  it("a queued or finished task answers 409 TASK_NOT_RUNNING and stores nothing", async () => {
    const s = await createSession(gt.url, gt.workspace, {}, auth("a"));
    // MOORING_MAX_ACTIVE=1: the second turn waits in the queue behind the first.
    const hung = await submitOk(gt.url, s, { prompt: "[hang]" }, auth("a"));
    const queued = await submitOk(gt.url, s, { prompt: "later" }, auth("a"));
    expect(queued.status).toBe("queued");
    const q = await steer(queued.id, { text: "too early" });
    expect(q.status).toBe(409);
    expect(q.body.error.code).toBe("TASK_NOT_RUNNING");
    expect(q.body.error.status).toBe("queued");
    await call(gt.url, "POST", `/v1/tasks/${hung.id}/cancel`, undefined, auth("a"));
    const finished = await waitTask(gt.url, hung.id, undefined, 30_000, auth("a"));
    expect(finished.status).toBe("cancelled");
    const f = await steer(hung.id, { text: "too late" });
    expect(f.status).toBe(409);
    expect(f.body.error.code).toBe("TASK_NOT_RUNNING");
    expect(await inputEvents(queued.id)).toHaveLength(0);
    expect(await inputEvents(hung.id)).toHaveLength(0);
  });

  it("another tenant's task, a missing one and a malformed id answer 404 TASK_NOT_FOUND", async () => {
    const s = await createSession(gt.url, gt.workspace, {}, auth("a"));
    const task = await submitOk(gt.url, s, { prompt: "[input]" }, auth("a"));
    await running(task.id);
    for (const r of [
      await steer(task.id, { text: "not yours" }, "b"),
      await steer(randomUUID(), { text: "x" }),
      await steer("not-a-uuid", { text: "x" }),
    ]) {
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe("TASK_NOT_FOUND");
    }
    expect(await inputEvents(task.id)).toHaveLength(0);
  });

  it("bad bodies answer 400 INVALID_REQUEST", async () => {
    const s = await createSession(gt.url, gt.workspace, {}, auth("a"));
    const task = await submitOk(gt.url, s, { prompt: "[input]" }, auth("a"));
    await running(task.id);
    for (const body of [{}, { text: "" }, { text: "   " }, { text: 5 }, { text: "x", extra: 1 }]) {
      const r = await steer(task.id, body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("INVALID_REQUEST");
    }
    expect(await inputEvents(task.id)).toHaveLength(0);
  });
});

describe("ifBusy steer", () => {
  it("a busy session's running turn takes the prompt (200, the running task); an idle one queues a turn (202)", async () => {
    const s = await createSession(gt.url, gt.workspace, {}, auth("a"));
    const busy = await submitOk(gt.url, s, { prompt: "[input]" }, auth("a"));
    await running(busy.id);
    const steered = await submit(
      gt.url,
      s,
      { prompt: "mid-turn", ifBusy: "steer", idempotencyKey: "sk" },
      auth("a"),
    );
    expect(steered.status).toBe(200);
    expect(steered.body.id).toBe(busy.id);
    // A retry of the same submit adds nothing.
    const retried = await submit(
      gt.url,
      s,
      { prompt: "mid-turn", ifBusy: "steer", idempotencyKey: "sk" },
      auth("a"),
    );
    expect(retried.status).toBe(200);
    expect(retried.body.id).toBe(busy.id);
    const done = await waitTask(gt.url, busy.id, undefined, 30_000, auth("a"));
    expect(done.result.text).toBe("steered mid-turn ");
    expect(await inputEvents(busy.id)).toHaveLength(1);

    const idle = await submit(gt.url, s, { prompt: "fresh", ifBusy: "steer" }, auth("a"));
    expect(idle.status).toBe(202);
    expect(idle.body.id).not.toBe(busy.id);
    expect((await waitTask(gt.url, idle.body.id, undefined, 30_000, auth("a"))).result.text).toBe(
      "You said: fresh",
    );
  });
});
