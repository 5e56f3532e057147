/**
 * The task API over REST: results and failures, ifBusy, idempotent submits, long-poll, listing with
 * filters and cursors, the gate, and bad input that writes nothing.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, eventually } from "../support/gateway.js";
import {
  counts,
  createSession,
  submit,
  submitOk,
  taskEventTypes,
  waitStatus,
  waitTask,
} from "../support/turns.js";

const MAX_PROMPT = 200;
const gt = useGateway({
  env: {
    MOORING_POLL_MS: "100",
    MOORING_MAX_PROMPT_CHARS: String(MAX_PROMPT),
  },
  workspace: true,
  cancelOpenTasks: true,
});

describe("results", () => {
  it("a completed task carries the final text, stop reason and usage", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const t = await submitOk(gt.url, s, { prompt: "[deltas 2] [tokens 50000]" });
    const done = await waitTask(gt.url, t.id);
    expect(done.status).toBe("completed");
    expect(done.error).toBeNull();
    expect(done.result).toEqual({
      text: "chunk 1 chunk 2 ",
      stopReason: "end_turn",
      usage: { inputTokens: 50000, outputTokens: 4, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
      contextPercent: 25,
    });
    expect(done.pollAfterMs).toBeNull();
    expect(done.finishedAt).not.toBeNull();
    const [terminal] = await gt.sql<{ data: any }[]>`
      select data from events where task_id = ${t.id} and type = 'task.completed'`;
    expect(terminal.data.result).toEqual(done.result);
  });

  it("failures carry a spec code and a readable message; a crashed agent does not poison the session", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const failed = await waitTask(gt.url, (await submitOk(gt.url, s, { prompt: "[fail AGENT_ERROR]" })).id);
    expect(failed.status).toBe("failed");
    expect(failed.error.code).toBe("AGENT_ERROR");
    expect(failed.error.message).toMatch(/\w+ \w+/);
    expect(failed.result).toBeNull();

    const tooLarge = await waitTask(
      gt.url,
      (await submitOk(gt.url, s, { prompt: "[fail CONTEXT_TOO_LARGE]" })).id,
    );
    expect(tooLarge.status).toBe("failed");
    expect(tooLarge.error.code).toBe("CONTEXT_TOO_LARGE");

    const crashed = await waitTask(gt.url, (await submitOk(gt.url, s, { prompt: "[deltas 1] [crash]" })).id);
    expect(crashed.status).toBe("failed");
    expect(crashed.error.code).toBe("AGENT_CRASHED");
    expect(crashed.error.message).toMatch(/\w+ \w+/);
    expect(crashed.error.message).not.toMatch(/at .*\.ts:\d+/); // no stack trace
    expect(await taskEventTypes(gt.sql, crashed.id)).toContain("task.failed");

    const after = await waitTask(gt.url, (await submitOk(gt.url, s, { prompt: "still there?" })).id);
    expect(after.status).toBe("completed");
    expect(after.turnIndex).toBe(3);
  });
});

describe("ifBusy", () => {
  it("reject answers 409 SESSION_BUSY and writes nothing; on an idle session it is accepted", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const idle = await submit(gt.url, s, { prompt: "[sleep 10]", ifBusy: "reject" });
    expect(idle.status).toBe(202);
    await waitTask(gt.url, idle.body.id);

    const hang = await submitOk(gt.url, s, { prompt: "[hang]" });
    expect(hang.status).toBe("running");
    const before = await counts(gt.sql);
    const refused = await submit(gt.url, s, { prompt: "second", ifBusy: "reject" });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("SESSION_BUSY");
    expect(await counts(gt.sql)).toEqual(before);

    await call(gt.url, "POST", `/v1/tasks/${hang.id}/cancel`);
    expect((await waitTask(gt.url, hang.id)).status).toBe("cancelled");
  });

  it("interrupt cancels the running turn and runs the new one next, ahead of queued turns", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const t1 = await submitOk(gt.url, s, { prompt: "[hang]" });
    const t2 = await submitOk(gt.url, s, { prompt: "[sleep 10] two" });
    const t3 = await submitOk(gt.url, s, { prompt: "[sleep 10] three" });
    expect([t1.status, t2.status, t3.status]).toEqual(["running", "queued", "queued"]);

    const t4 = await submit(gt.url, s, { prompt: "[sleep 10] four", ifBusy: "interrupt" });
    expect(t4.status).toBe(202);
    const [f1, f2, f3, f4] = await Promise.all([t1, t2, t3, t4.body].map((t) => waitTask(gt.url, t.id)));
    expect(f1.status).toBe("cancelled");
    expect(f1.error.code).toBe("CANCELLED");
    for (const t of [f2, f3, f4]) expect(t.status).toBe("completed");

    const started = await gt.sql<{ taskId: string }[]>`
      select task_id from events where session_id = ${s} and type = 'task.started' order by seq`;
    expect(started.map((e) => e.taskId)).toEqual([t1.id, t4.body.id, t2.id, t3.id]);
    const [firstEnd] = await gt.sql<{ seq: number }[]>`
      select seq from events where task_id = ${t1.id} and type = 'task.cancelled'`;
    const [secondStart] = await gt.sql<{ seq: number }[]>`
      select seq from events where task_id = ${t4.body.id} and type = 'task.started'`;
    expect(secondStart.seq).toBeGreaterThan(firstEnd.seq);
  });
});

describe("idempotencyKey", () => {
  it("10 concurrent submits with one key make one task; every answer names it (one 202, the rest 200)", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const key = `retry-${randomUUID()}`;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        submit(gt.url, s, { prompt: "[sleep 300] once", idempotencyKey: key }),
      ),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 202]);
    const ids = new Set(answers.map((a) => a.body.id));
    expect(ids.size).toBe(1);
    const [id] = ids;
    for (const a of answers) expect(a.headers.get("location")).toBe(`/v1/tasks/${id}`);
    const rows = await gt.sql`select id from tasks where session_id = ${s}`;
    expect(rows.map((r) => r.id)).toEqual([id]);
    const queuedEvents =
      await gt.sql`select seq from events where session_id = ${s} and type = 'task.queued'`;
    expect(queuedEvents).toHaveLength(1);

    // A retry after the task finished still gets that task back, not a second turn.
    await waitTask(gt.url, id);
    const late = await submit(gt.url, s, { prompt: "[sleep 300] once", idempotencyKey: key });
    expect(late.status).toBe(200);
    expect(late.body.id).toBe(id);
    expect(late.body.status).toBe("completed");
    // The key belongs to its session: another session gets its own task.
    const other = await submit(gt.url, await createSession(gt.url, gt.workspace), {
      prompt: "x",
      idempotencyKey: key,
    });
    expect(other.status).toBe(202);
    expect(other.body.id).not.toBe(id);
  });

  it("a repeated key on a session archived since answers its task with every ifBusy; a new key is refused", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const key = `archived-${randomUUID()}`;
    const first = await submit(gt.url, s, { prompt: "[hang]", idempotencyKey: key });
    expect(first.status).toBe(202);
    expect((await call(gt.url, "DELETE", `/v1/sessions/${s}`)).status).toBe(200);
    for (const ifBusy of ["enqueue", "reject", "interrupt"]) {
      const again = await submit(gt.url, s, { prompt: "[hang]", idempotencyKey: key, ifBusy });
      expect([ifBusy, again.status, again.body.id]).toEqual([ifBusy, 200, first.body.id]);
    }
    const fresh = await submit(gt.url, s, { prompt: "x", idempotencyKey: `${key}-new` });
    expect([fresh.status, fresh.body.error?.code]).toEqual([409, "SESSION_ARCHIVED"]);
    const rows = await gt.sql`select id from tasks where session_id = ${s}`;
    expect(rows.map((r) => r.id)).toEqual([first.body.id]);
  });
});

describe("long-poll", () => {
  it("returns as soon as the task changes state, well before the wait ends", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const first = await submitOk(gt.url, s, { prompt: "[hang]" });
    const second = await submitOk(gt.url, s, { prompt: "[sleep 10]" });
    expect(second.status).toBe("queued");
    let answered = false;
    const poll = call(gt.url, "GET", `/v1/tasks/${second.id}?waitMs=60000`).finally(() => {
      answered = true;
    });
    // It holds while the first turn runs.
    await eventually(async () => gt.gw.holding().longPolls === 1);
    expect(answered).toBe(false);
    // The first turn ends; the second starts: the poll answers on that change, the clock unmoved.
    await call(gt.url, "POST", `/v1/tasks/${first.id}/cancel`);
    const r = await poll;
    expect(r.status).toBe(200);
    expect(r.body.status).not.toBe("queued");
    expect((await waitTask(gt.url, first.id)).status).toBe("cancelled");
    await waitTask(gt.url, second.id);
  });

  it("returns at the end of the wait with the same status when nothing changes", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const hang = await submitOk(gt.url, s, { prompt: "[hang]" });
    let answered = false;
    const held = call(gt.url, "GET", `/v1/tasks/${hang.id}?waitMs=60000`).finally(() => {
      answered = true;
    });
    await eventually(async () => gt.gw.holding().longPolls === 1);
    expect(answered).toBe(false);
    // The wait's end, on the gateway's clock: the answer is the unchanged status.
    await gt.clock.advance(60_000);
    const r = await held;
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("running");

    // A state change made by another request wakes a waiting poll (held to its end, the wait of
    // a minute would outlast the test).
    const waiting = call(gt.url, "GET", `/v1/tasks/${hang.id}?waitMs=60000`);
    await eventually(async () => gt.gw.holding().longPolls === 1);
    await call(gt.url, "POST", `/v1/tasks/${hang.id}/cancel`);
    const woke = await waiting;
    expect(["cancelling", "cancelled"]).toContain(woke.body.status);
    const done = await waitTask(gt.url, hang.id);
    expect(done.status).toBe("cancelled");

    // On a terminal task the wait is skipped (a minute's wait would outlast the test), and
    // nothing is held for it.
    const again = await call(gt.url, "GET", `/v1/tasks/${hang.id}?waitMs=60000`);
    expect(again.body.status).toBe("cancelled");
    expect(gt.gw.holding().longPolls).toBe(0);
  });
});

describe("listing and the gate", () => {
  it("lists tasks newest first with sessionId and status filters and cursor pagination", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const ids: string[] = [];
    for (const prompt of ["one", "[fail AGENT_ERROR]", "three", "[fail AGENT_ERROR]", "five"]) {
      const t = await submitOk(gt.url, s, { prompt });
      ids.push(t.id);
      await waitTask(gt.url, t.id);
    }
    const seen: any[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = `/v1/tasks?sessionId=${s}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const page = await call(gt.url, "GET", q);
      expect(page.status).toBe(200);
      expect(page.body.items.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.items);
      cursor = page.body.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(pages).toBe(3);
    expect(seen.map((t) => t.id)).toEqual([...ids].reverse());
    for (const t of seen) expect(t.sessionId).toBe(s);

    const failed = await call(gt.url, "GET", `/v1/tasks?sessionId=${s}&status=failed`);
    expect(failed.body.items.map((t: any) => t.id)).toEqual([ids[3], ids[1]]);
    expect(failed.body.nextCursor).toBeNull();
    const completed = await call(gt.url, "GET", `/v1/tasks?sessionId=${s}&status=completed`);
    expect(completed.body.items).toHaveLength(3);
    const none = await call(gt.url, "GET", `/v1/tasks?sessionId=${randomUUID()}`);
    expect(none.body).toEqual({ items: [], nextCursor: null });
    // Across sessions the filter by status alone works too.
    const allFailed = await call(gt.url, "GET", "/v1/tasks?status=failed&limit=200");
    expect(allFailed.body.items.length).toBeGreaterThanOrEqual(2);
    for (const t of allFailed.body.items) expect(t.status).toBe("failed");

    for (const bad of ["status=done", "limit=0", "limit=201", "cursor=garbage", "sessionId="]) {
      const r = await call(gt.url, "GET", `/v1/tasks?${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.body.error.code, bad).toBe("INVALID_REQUEST");
    }
    // An unknown query parameter is ignored, as on every route (docs/api.md, Routes).
    expect((await call(gt.url, "GET", "/v1/tasks?extra=1")).status).toBe(200);
  });

  it("GET /v1/gate reports limits and live counts", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const hang = await submitOk(gt.url, s, { prompt: "[hang]" });
    const gate = await call(gt.url, "GET", "/v1/gate");
    expect(gate.status).toBe(200);
    expect(gate.body).toMatchObject({
      maxActive: 5,
      maxQueued: 20,
      active: 1,
      queued: 0,
      waitingForInput: 0,
      queueTimeoutMs: 600000,
    });
    expect(gate.body.tenant).toEqual({ name: "default", active: 1, queued: 0, maxActive: 5, maxQueued: 20 });
    await call(gt.url, "POST", `/v1/tasks/${hang.id}/cancel`);
    await waitTask(gt.url, hang.id);
    expect((await call(gt.url, "GET", "/v1/gate")).body.active).toBe(0);
  });
});

describe("bad input writes nothing", () => {
  it("answers the spec's codes", async () => {
    const s = await createSession(gt.url, gt.workspace);
    const archived = await createSession(gt.url, gt.workspace);
    expect((await call(gt.url, "DELETE", `/v1/sessions/${archived}`)).status).toBe(200);
    const done = await submitOk(gt.url, s, { prompt: "ok" });
    await waitTask(gt.url, done.id);

    const before = await counts(gt.sql);
    const cases: [string, () => Promise<any>, number, string][] = [
      ["unknown session", () => submit(gt.url, randomUUID(), { prompt: "x" }), 404, "SESSION_NOT_FOUND"],
      ["not a session id", () => submit(gt.url, "nope", { prompt: "x" }), 404, "SESSION_NOT_FOUND"],
      ["archived session", () => submit(gt.url, archived, { prompt: "x" }), 409, "SESSION_ARCHIVED"],
      ["empty prompt", () => submit(gt.url, s, { prompt: "" }), 400, "INVALID_REQUEST"],
      ["blank prompt", () => submit(gt.url, s, { prompt: "  \n " }), 400, "INVALID_REQUEST"],
      ["missing prompt", () => submit(gt.url, s, {}), 400, "INVALID_REQUEST"],
      [
        "oversized prompt",
        () => submit(gt.url, s, { prompt: "x".repeat(MAX_PROMPT + 1) }),
        400,
        "INVALID_REQUEST",
      ],
      ["bad loadClass", () => submit(gt.url, s, { prompt: "x", loadClass: "huge" }), 400, "INVALID_REQUEST"],
      ["bad ifBusy", () => submit(gt.url, s, { prompt: "x", ifBusy: "wait" }), 400, "INVALID_REQUEST"],
      ["timeoutMs 0", () => submit(gt.url, s, { prompt: "x", timeoutMs: 0 }), 400, "INVALID_REQUEST"],
      [
        "timeoutMs > 60 min",
        () => submit(gt.url, s, { prompt: "x", timeoutMs: 3_600_001 }),
        400,
        "INVALID_REQUEST",
      ],
      [
        "timeoutMs fraction",
        () => submit(gt.url, s, { prompt: "x", timeoutMs: 1.5 }),
        400,
        "INVALID_REQUEST",
      ],
      ["unknown field", () => submit(gt.url, s, { prompt: "x", priority: 1 }), 400, "INVALID_REQUEST"],
      [
        "not JSON",
        () =>
          call(gt.url, "POST", `/v1/sessions/${s}/turns`, "{nope", { "content-type": "application/json" }),
        400,
        "INVALID_REQUEST",
      ],
      [
        "waitMs too long",
        () => call(gt.url, "GET", `/v1/tasks/${done.id}?waitMs=60001`),
        400,
        "INVALID_REQUEST",
      ],
      [
        "waitMs negative",
        () => call(gt.url, "GET", `/v1/tasks/${done.id}?waitMs=-1`),
        400,
        "INVALID_REQUEST",
      ],
      ["unknown task", () => call(gt.url, "GET", `/v1/tasks/${randomUUID()}`), 404, "TASK_NOT_FOUND"],
      ["not a task id", () => call(gt.url, "GET", "/v1/tasks/nope"), 404, "TASK_NOT_FOUND"],
      [
        "cancel unknown task",
        () => call(gt.url, "POST", `/v1/tasks/${randomUUID()}/cancel`),
        404,
        "TASK_NOT_FOUND",
      ],
    ];
    for (const [name, run, status, code] of cases) {
      const r = await run();
      expect(r.status, name).toBe(status);
      expect(r.body.error.code, name).toBe(code);
      expect(typeof r.body.error.message, name).toBe("string");
    }
    // The oversized prompt names its field and the limit.
    const big = await submit(gt.url, s, { prompt: "x".repeat(MAX_PROMPT + 1) });
    expect(big.body.error.message).toContain(String(MAX_PROMPT));
    expect(await counts(gt.sql)).toEqual(before);
    // A prompt of exactly the limit is fine.
    const edge = await submit(gt.url, s, { prompt: "x".repeat(MAX_PROMPT) });
    expect(edge.status).toBe(202);
    await waitStatus(gt.url, edge.body.id, "completed");
  });
});
