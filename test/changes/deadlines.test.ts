/**
 * Deadlines: queue timeout (expired, GATEWAY_BUSY / queue_timeout), run deadline (TURN_TIMEOUT),
 * load classes, and the deadline fields and pollAfterMs on every snapshot. One slot
 * (MOORING_MAX_ACTIVE=1) so a hanging turn blocks the queue; a short queue timeout.
 */
import { expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { pollAfterMs } from "../../src/domain/views.js";
import type { TaskRow } from "../../src/sql/task-row.js";
import { call } from "../support/gateway.js";
import {
  cancelTask,
  createSession,
  submit,
  submitOk,
  taskEventTypes,
  waitStatus,
  waitTask,
} from "../support/turns.js";

const QUEUE_TIMEOUT_MS = 1500;
const TURN_TIMEOUT_MS = 120_000;
const gt = useGateway({
  env: {
    MOORING_POLL_MS: "100",
    MOORING_MAX_ACTIVE: "1",
    MOORING_QUEUE_TIMEOUT_MS: String(QUEUE_TIMEOUT_MS),
    MOORING_TURN_TIMEOUT_MS: String(TURN_TIMEOUT_MS),
  },
  workspace: true,
  cancelOpenTasks: true,
});

const ms = (iso: string) => new Date(iso).getTime();

/** The deadline fields are on the snapshot, and pollAfterMs does not point past a pending deadline. */
function checkSnapshot(task: any, askedAt: number) {
  for (const key of ["deadlineAt", "queueDeadlineAt", "pollAfterMs"])
    expect(Object.keys(task)).toContain(key);
  expect(typeof task.queueDeadlineAt).toBe("string");
  if (["completed", "failed", "cancelled", "expired", "interrupted"].includes(task.status)) {
    expect(task.pollAfterMs).toBeNull();
    return;
  }
  expect(task.pollAfterMs).toBeGreaterThan(0);
  const deadline = task.status === "queued" ? ms(task.queueDeadlineAt) : ms(task.deadlineAt);
  // The server computed it after `askedAt`, so it had at most `deadline - askedAt` left; if the
  // deadline may have passed before it answered, "ask again in 100 ms" is the due answer.
  const left = deadline - askedAt;
  expect(task.pollAfterMs).toBeLessThanOrEqual(deadline > Date.now() ? left : Math.max(left, 100));
}

it("a task still queued after the queue timeout ends expired with GATEWAY_BUSY / queue_timeout", async () => {
  const blocker = await submitOk(gt.url, await createSession(gt.url, gt.workspace), { prompt: "[hang]" });
  expect(blocker.status).toBe("running");
  const s = await createSession(gt.url, gt.workspace);
  const queued = await submitOk(gt.url, s, { prompt: "[sleep 10]" });
  expect(queued.status).toBe("queued");
  expect(ms(queued.queueDeadlineAt) - ms(queued.createdAt)).toBe(QUEUE_TIMEOUT_MS);

  const expired = await waitTask(gt.url, queued.id);
  expect(expired.status).toBe("expired");
  expect(expired.error).toMatchObject({ code: "GATEWAY_BUSY", reason: "queue_timeout" });
  expect(expired.error.message).toMatch(/\w+ \w+/);
  expect(expired.startedAt).toBeNull();
  expect(expired.position).toBeNull();
  const waited = ms(expired.finishedAt) - ms(expired.createdAt);
  // Never before its deadline; that it ends at all (the blocker never does) shows the expiry ran.
  expect(waited).toBeGreaterThanOrEqual(QUEUE_TIMEOUT_MS);
  const types = await taskEventTypes(gt.sql, queued.id);
  expect(types[0]).toBe("task.queued");
  expect(types[types.length - 1]).toBe("task.expired");
  const [event] = await gt.sql<
    { data: any }[]
  >`select data from events where task_id = ${queued.id} and type = 'task.expired'`;
  expect(event.data.error).toMatchObject({ code: "GATEWAY_BUSY", reason: "queue_timeout" });
  expect((await call(gt.url, "GET", "/v1/gate")).body).toMatchObject({ active: 1, queued: 0 });

  // The running turn is not subject to the queue timeout.
  expect((await call(gt.url, "GET", `/v1/tasks/${blocker.id}`)).body.status).toBe("running");
  expect((await cancelTask(gt.url, blocker.id)).status).toBe("cancelled");
});

it("a turn past its run deadline is stopped and fails TURN_TIMEOUT", async () => {
  const s = await createSession(gt.url, gt.workspace);
  const t = await submitOk(gt.url, s, { prompt: "[deltas 1] [hang]", timeoutMs: 400 });
  const done = await waitTask(gt.url, t.id);
  expect(done.status).toBe("failed");
  expect(done.error.code).toBe("TURN_TIMEOUT");
  expect(done.error.message).toMatch(/\w+ \w+/);
  expect(ms(done.deadlineAt) - ms(done.startedAt)).toBe(400);
  const ran = ms(done.finishedAt) - ms(done.startedAt);
  // Never before its deadline; that a [hang] turn ended at all shows the deadline stopped it.
  expect(ran).toBeGreaterThanOrEqual(400);
  expect((await taskEventTypes(gt.sql, t.id)).at(-1)).toBe("task.failed");

  // An agent that ignores the stop is killed after the escalation delay; still TURN_TIMEOUT.
  const stubborn = await waitTask(
    gt.url,
    (await submitOk(gt.url, s, { prompt: "[stubborn]", timeoutMs: 300 })).id,
  );
  expect(stubborn.status).toBe("failed");
  expect(stubborn.error.code).toBe("TURN_TIMEOUT");
  expect(ms(stubborn.finishedAt) - ms(stubborn.startedAt)).toBeGreaterThanOrEqual(300 + 2500);

  // The session goes on.
  expect((await waitTask(gt.url, (await submitOk(gt.url, s, { prompt: "next" })).id)).status).toBe(
    "completed",
  );
});

it("loadClass sets the run deadline to 10/30/60 minutes after the start; timeoutMs and the default too", async () => {
  const s = await createSession(gt.url, gt.workspace);
  const cases: [Record<string, unknown>, number][] = [
    [{ loadClass: "short" }, 10 * 60_000],
    [{ loadClass: "long" }, 30 * 60_000],
    [{ loadClass: "complex" }, 60 * 60_000],
    [{}, TURN_TIMEOUT_MS],
    [{ timeoutMs: 3_600_000 }, 3_600_000],
    [{ timeoutMs: 90_000, loadClass: "complex" }, 90_000],
  ];
  for (const [options, expected] of cases) {
    const t = await submitOk(gt.url, s, { prompt: "[sleep 10]", ...options });
    const done = await waitTask(gt.url, t.id);
    expect(done.status).toBe("completed");
    expect(ms(done.deadlineAt) - ms(done.startedAt), JSON.stringify(options)).toBe(expected);
  }
  const [row] = await gt.sql<{ loadClass: string }[]>`
    select load_class from tasks where session_id = ${s} and load_class is not null order by turn_index limit 1`;
  expect(row.loadClass).toBe("short");
});

it("every snapshot carries deadlineAt, queueDeadlineAt and pollAfterMs, never pointing past a deadline", async () => {
  const s = await createSession(gt.url, gt.workspace);
  let asked = Date.now();
  const running = await submitOk(gt.url, s, { prompt: "[hang]", timeoutMs: 900 });
  checkSnapshot(running, asked);
  expect(running.status).toBe("running");
  expect(running.pollAfterMs).toBeLessThanOrEqual(900);

  // Queued at positions 1 and 2: a client far back would be told to wait 2 s, but the queue
  // deadline comes first.
  asked = Date.now();
  const q1 = await submitOk(gt.url, await createSession(gt.url, gt.workspace), { prompt: "[sleep 10]" });
  const q2 = await submitOk(gt.url, await createSession(gt.url, gt.workspace), { prompt: "[sleep 10]" });
  expect([q1.status, q2.status, q1.deadlineAt, q2.deadlineAt]).toEqual(["queued", "queued", null, null]);
  expect(q2.position).toBe(2);
  checkSnapshot(q1, asked);
  checkSnapshot(q2, asked);
  expect(q2.pollAfterMs).toBeLessThanOrEqual(QUEUE_TIMEOUT_MS);

  // Snapshots from every read path: GET, list, the session's turns.
  const seen: any[] = [];
  for (let i = 0; i < 5; i++) {
    asked = Date.now();
    const one = (await call(gt.url, "GET", `/v1/tasks/${q2.id}`)).body;
    checkSnapshot(one, asked);
    const list = (await call(gt.url, "GET", "/v1/tasks?limit=200")).body.items;
    for (const t of list) checkSnapshot(t, asked);
    const turns = (await call(gt.url, "GET", `/v1/sessions/${s}`)).body.turns;
    for (const t of turns) checkSnapshot(t, asked);
    seen.push(one, ...list, ...turns);
    // A sampling loop's pacing: five looks over half a second, while the queue moves on.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const statuses = new Set(seen.map((t) => t.status));
  expect(statuses.has("running") && statuses.has("queued") && statuses.has("completed")).toBe(true);

  const timedOut = await waitTask(gt.url, running.id);
  expect(timedOut.error.code).toBe("TURN_TIMEOUT");
  checkSnapshot(timedOut, Date.now());
  for (const t of [q1, q2]) {
    const end = await waitStatus(gt.url, t.id, "completed");
    expect(["completed", "expired"]).toContain(end.status);
    checkSnapshot(end, Date.now());
  }
  expect((await submit(gt.url, s, { prompt: "x", timeoutMs: 3_600_001 })).status).toBe(400);
});

it("pollAfterMs: about 1 s per queue position, at least 100 ms, but never past a closer deadline", () => {
  const now = 1_000_000;
  const row = (status: TaskRow["status"], queueLeft: number, runLeft: number | null) =>
    ({
      status,
      queueDeadlineAt: new Date(now + queueLeft),
      deadlineAt: runLeft === null ? null : new Date(now + runLeft),
    }) as TaskRow;
  expect(pollAfterMs(row("queued", 60_000, null), 3, now)).toBe(3000);
  expect(pollAfterMs(row("queued", 60_000, null), 50, now)).toBe(10_000);
  expect(pollAfterMs(row("queued", 1500, null), 2, now)).toBe(1500);
  expect(pollAfterMs(row("queued", 40, null), 1, now)).toBe(40);
  expect(pollAfterMs(row("queued", -5, null), 1, now)).toBe(100);
  expect(pollAfterMs(row("running", 0, 60_000), null, now)).toBe(1000);
  expect(pollAfterMs(row("running", 0, 30), null, now)).toBe(30);
  expect(pollAfterMs(row("cancelling", 0, 60_000), null, now)).toBe(1000);
  expect(pollAfterMs(row("completed", 0, 60_000), null, now)).toBeNull();
});
