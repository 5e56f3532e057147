/**
 * The admission gate on one instance: exactly MOORING_MAX_ACTIVE running and MOORING_MAX_QUEUED
 * queued, the rest refused with nothing written; FIFO starts; per-session ordering that never holds
 * up other sessions.
 */
import { expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, eventually } from "../support/gateway.js";
import { cancelTask, createSession, submit, submitOk, waitTask } from "../support/turns.js";

const gt = useGateway({ env: { MOORING_POLL_MS: "100" }, workspace: true });

it("admits 5 running and 20 queued, refuses 5 with 429 queue_full writing nothing, and starts them FIFO", async () => {
  const sessions = await Promise.all(Array.from({ length: 30 }, () => createSession(gt.url, gt.workspace)));
  // Every turn hangs until it is cancelled, so what the gate holds cannot change while the
  // submits arrive or while it is checked, however slow the machine is.
  const answers = await Promise.all(
    sessions.map((id, i) => submit(gt.url, id, { prompt: `[hang] turn ${i}` })),
  );

  const accepted = answers.filter((a) => a.status === 202);
  const refused = answers.filter((a) => a.status !== 202);
  expect(accepted).toHaveLength(25);
  expect(refused).toHaveLength(5);
  for (const r of refused) {
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe("GATEWAY_BUSY");
    expect(r.body.error.reason).toBe("queue_full");
    expect(typeof r.body.error.message).toBe("string");
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
  }

  const running = accepted.filter((a) => a.body.status === "running");
  const queued = accepted.filter((a) => a.body.status === "queued");
  expect(running).toHaveLength(5);
  expect(queued).toHaveLength(20);
  for (const r of running) expect(r.body.position).toBeNull();
  expect(queued.map((q) => q.body.position).sort((a, b) => a - b)).toEqual(
    Array.from({ length: 20 }, (_, i) => i + 1),
  );

  // The database agrees, and the gate reports the same.
  const byStatus = await gt.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from tasks group by status order by status`;
  expect(Object.fromEntries(byStatus.map((r) => [r.status, r.n]))).toEqual({ queued: 20, running: 5 });
  const gate = await call(gt.url, "GET", "/v1/gate");
  expect(gate.status).toBe(200);
  expect(gate.body).toMatchObject({
    maxActive: 5,
    maxQueued: 20,
    active: 5,
    queued: 20,
    waitingForInput: 0,
    queueTimeoutMs: 600000,
  });
  // One tenant (`default`, the open gateway's caller): its figures are the global ones.
  expect(gate.body.tenant).toEqual({ name: "default", active: 5, queued: 20, maxActive: 5, maxQueued: 20 });

  // Nothing was written for the refused submits: no task, no event, no turn index used.
  const acceptedSessions = new Set(accepted.map((a) => a.body.sessionId));
  const refusedSessions = sessions.filter((id) => !acceptedSessions.has(id));
  expect(refusedSessions).toHaveLength(5);
  const [{ tasks }] = await gt.sql<{ tasks: number }[]>`select count(*)::int as tasks from tasks`;
  expect(tasks).toBe(25);
  const untouched = await gt.sql<{ lastSeq: number; nextTurnIndex: number; n: number }[]>`
    select s.last_seq, s.next_turn_index, (select count(*)::int from events e where e.session_id = s.id) as n
    from sessions s where s.id = any(${refusedSessions}::uuid[])`;
  expect(untouched).toHaveLength(5);
  for (const s of untouched) expect(s).toEqual({ lastSeq: 0, nextTurnIndex: 0, n: 0 });

  // Drain the queue in rounds: cancel whatever runs; the gate then starts the next five.
  const startedInRound: string[][] = [];
  for (;;) {
    const running = await gt.sql<{ id: string }[]>`select id from tasks where status = 'running'`;
    if (running.length === 0) break;
    expect(running.length).toBeLessThanOrEqual(5);
    startedInRound.push(running.map((r) => r.id));
    await Promise.all(running.map((r) => cancelTask(gt.url, r.id)));
    await eventually(async () => {
      const [{ open }] = await gt.sql<{ open: number }[]>`
        select count(*)::int as open from tasks where status in ('queued', 'running', 'cancelling')`;
      const [{ active }] = await gt.sql<{ active: number }[]>`
        select count(*)::int as active from tasks where status = 'running'`;
      return open === 0 || active === Math.min(5, open);
    });
  }
  expect(startedInRound.map((r) => r.length)).toEqual([5, 5, 5, 5, 5]);
  const finals = await Promise.all(accepted.map((a) => waitTask(gt.url, a.body.id)));
  for (const t of finals) {
    expect(t.status).toBe("cancelled");
    expect(t.attempt).toBe(1);
  }

  // FIFO: the order of admission (queue_order) is the order of starting; queued positions were
  // handed out in that same order; the 5 that ran at once were admitted first.
  const rows = await gt.sql<{ id: string; queueOrder: number; startedAt: Date }[]>`
    select id, queue_order, started_at from tasks order by queue_order`;
  expect(rows).toHaveLength(25);
  for (let i = 1; i < rows.length; i++) {
    expect(rows[i].startedAt.getTime(), `row ${i}`).toBeGreaterThanOrEqual(rows[i - 1].startedAt.getTime());
  }
  const runningIds = new Set(running.map((r) => r.body.id));
  expect(rows.slice(0, 5).every((r) => runningIds.has(r.id))).toBe(true);
  const byPosition = [...queued].sort((a, b) => a.body.position - b.body.position).map((q) => q.body.id);
  expect(rows.slice(5).map((r) => r.id)).toEqual(byPosition);
  // Positions were announced while waiting and never after the start; each task started once.
  const logs = await gt.sql<{ taskId: string; types: string[] }[]>`
    select task_id, array_agg(type order by seq) as types from events where task_id is not null group by task_id`;
  expect(logs).toHaveLength(25);
  for (const { types } of logs) {
    expect(types[0]).toBe("task.queued");
    expect(types.filter((t) => t === "task.started")).toHaveLength(1);
    expect(types.slice(types.indexOf("task.started")).includes("task.position")).toBe(false);
    expect(types[types.length - 1]).toBe("task.cancelled");
  }
  const announced = logs.filter((l) => l.types.includes("task.position"));
  expect(announced.length).toBeGreaterThan(0);
  // And the queue really waited: round k started exactly the tasks admitted k-th five.
  for (let k = 0; k < 5; k++) {
    expect(new Set(startedInRound[k])).toEqual(new Set(rows.slice(5 * k, 5 * k + 5).map((r) => r.id)));
  }
});

it("runs a session's turns one at a time in order without holding up other sessions", async () => {
  const a = await createSession(gt.url, gt.workspace);
  const b = await createSession(gt.url, gt.workspace);
  // A's first turn hangs until B's turn is done, so "B does not wait for A" needs no timing.
  const a1 = await submitOk(gt.url, a, { prompt: "[hang] first" });
  const a2 = await submitOk(gt.url, a, { prompt: "[sleep 200] second" });
  const a3 = await submitOk(gt.url, a, { prompt: "[sleep 200] third" });
  expect(a1.status).toBe("running");
  expect([a2.status, a3.status]).toEqual(["queued", "queued"]);
  expect([a1.turnIndex, a2.turnIndex, a3.turnIndex]).toEqual([0, 1, 2]);
  expect(a3.position).toBeGreaterThan(a2.position);

  // B's turn was admitted after A's waiting turns, yet starts at once: free slots are not held
  // for a session that cannot use them.
  const b1 = await submitOk(gt.url, b, { prompt: "[sleep 50] other session" });
  expect(b1.status).toBe("running");
  const a2Now = (await call(gt.url, "GET", `/v1/tasks/${a2.id}`)).body;
  expect(a2Now.status).toBe("queued");

  const fb = await waitTask(gt.url, b1.id);
  expect(fb.status).toBe("completed");
  expect((await call(gt.url, "GET", `/v1/tasks/${a2.id}`)).body.status).toBe("queued");
  await call(gt.url, "POST", `/v1/tasks/${a1.id}/cancel`);
  const [f1, f2, f3] = await Promise.all([a1, a2, a3].map((t) => waitTask(gt.url, t.id)));
  expect(f1.status).toBe("cancelled");
  for (const t of [f2, f3]) expect(t.status).toBe("completed");
  expect(new Date(fb.finishedAt).getTime()).toBeLessThan(new Date(f2.startedAt).getTime());

  // The session's log shows strictly one turn at a time, in turn order.
  const events = await gt.sql<{ taskId: string; type: string }[]>`
    select task_id, type from events
    where session_id = ${a} and type in ('task.started', 'task.completed', 'task.cancelled') order by seq`;
  expect(events.map((e) => [e.taskId, e.type])).toEqual([
    [a1.id, "task.started"],
    [a1.id, "task.cancelled"],
    [a2.id, "task.started"],
    [a2.id, "task.completed"],
    [a3.id, "task.started"],
    [a3.id, "task.completed"],
  ]);
});
