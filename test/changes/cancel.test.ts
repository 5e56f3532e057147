/**
 * Cancel: queued (at once), running (cancelling → cancelled), an agent that ignores the stop (killed
 * after the escalation delay), repeated and concurrent cancels, terminal tasks, archive cascade.
 * One slot (MOORING_MAX_ACTIVE=1) so queues form on demand.
 */
import { expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, eventually } from "../support/gateway.js";
import { counts, createSession, submitOk, taskEventTypes, waitStatus, waitTask } from "../support/turns.js";

const gt = useGateway({
  env: { MOORING_POLL_MS: "100", MOORING_MAX_ACTIVE: "1" },
  workspace: true,
  cancelOpenTasks: true,
});

const cancel = (id: string) => call(gt.url, "POST", `/v1/tasks/${id}/cancel`);
const get = async (id: string) => (await call(gt.url, "GET", `/v1/tasks/${id}`)).body;

it("cancels a queued task at once and the queue moves up; a running one goes cancelling → cancelled", async () => {
  const [s1, s2, s3, s4] = await Promise.all([1, 2, 3, 4].map(() => createSession(gt.url, gt.workspace)));
  const hang = await submitOk(gt.url, s1, { prompt: "[hang]" });
  const q1 = await submitOk(gt.url, s2, { prompt: "[sleep 10] q1" });
  const q2 = await submitOk(gt.url, s3, { prompt: "[sleep 10] q2" });
  const q3 = await submitOk(gt.url, s4, { prompt: "[sleep 10] q3" });
  expect(hang.status).toBe("running");
  expect([q1.position, q2.position, q3.position]).toEqual([1, 2, 3]);

  // Queued: cancelled at once, with its event; the tasks behind it move up.
  const c = await cancel(q1.id);
  expect(c.status).toBe(200);
  expect(c.body.status).toBe("cancelled");
  expect(c.body.error.code).toBe("CANCELLED");
  expect(c.body.position).toBeNull();
  expect(c.body.finishedAt).not.toBeNull();
  expect(c.body.startedAt).toBeNull();
  expect(await taskEventTypes(gt.sql, q1.id)).toEqual(["task.queued", "task.cancelled"]);
  expect((await get(q2.id)).position).toBe(1);
  expect((await get(q3.id)).position).toBe(2);
  expect((await call(gt.url, "GET", "/v1/gate")).body).toMatchObject({ active: 1, queued: 2 });
  // Both tasks behind it are told their new place (announced asynchronously).
  const lastAnnounced = async (id: string) => {
    const [e] = await gt.sql<{ data: any }[]>`
      select data from events where task_id = ${id} and type = 'task.position' order by seq desc limit 1`;
    return e?.data.position;
  };
  await eventually(async () => (await lastAnnounced(q2.id)) === 1 && (await lastAnnounced(q3.id)) === 2);

  // Twice: the same answer, nothing more written.
  const before = await counts(gt.sql);
  const again = await cancel(q1.id);
  expect(again.status).toBe(200);
  expect(again.body).toEqual(c.body);
  expect(await counts(gt.sql)).toEqual(before);

  // Concurrent cancels of one queued task: all answer cancelled, one event.
  const many = await Promise.all([1, 2, 3, 4, 5].map(() => cancel(q2.id)));
  for (const m of many) {
    expect(m.status).toBe(200);
    expect(m.body.status).toBe("cancelled");
  }
  const q2Types = await taskEventTypes(gt.sql, q2.id);
  expect(q2Types.filter((t) => t !== "task.position")).toEqual(["task.queued", "task.cancelled"]);

  // Running: cancelling first, then cancelled by its owner; the slot goes to the next in line.
  const r = await cancel(hang.id);
  expect(r.status).toBe(200);
  expect(["cancelling", "cancelled"]).toContain(r.body.status);
  const ended = await waitTask(gt.url, hang.id);
  expect(ended.status).toBe("cancelled");
  expect(ended.error.code).toBe("CANCELLED");
  const types = await taskEventTypes(gt.sql, hang.id);
  expect(types[0]).toBe("task.queued");
  expect(types).toContain("task.started");
  expect(types[types.length - 1]).toBe("task.cancelled");
  expect(types.filter((t) => t === "task.cancelled")).toHaveLength(1);
  const next = await waitTask(gt.url, q3.id);
  expect(next.status).toBe("completed");

  // The cancelled session takes its next turn normally.
  expect((await waitTask(gt.url, (await submitOk(gt.url, s1, { prompt: "hello again" })).id)).status).toBe(
    "completed",
  );
});

it("kills an agent that ignores the cancel after the escalation delay; the task still ends cancelled", async () => {
  const s = await createSession(gt.url, gt.workspace);
  const stubborn = await submitOk(gt.url, s, { prompt: "[stubborn]" });
  expect(stubborn.status).toBe("running");
  const first = await cancel(stubborn.id);
  expect(first.body.status).toBe("cancelling");

  // Cancelling during the escalation: the same answer, nothing written.
  const [before] = await gt.sql<
    { requestedAt: Date; status: string }[]
  >`select cancel_requested_at as requested_at, status from tasks where id = ${stubborn.id}`;
  const second = await cancel(stubborn.id);
  expect(second.status).toBe(200);
  expect(second.body.status).toBe("cancelling");
  expect(second.body.id).toBe(first.body.id);
  // The cancel is not requested again: the first request's time stands.
  const [after] = await gt.sql<
    { requestedAt: Date; status: string }[]
  >`select cancel_requested_at as requested_at, status from tasks where id = ${stubborn.id}`;
  expect(after).toEqual(before);

  // It waits for the agent first: most of the escalation delay (3 s) on the gateway's clock and
  // the task is still cancelling; the rest of it, and the agent is killed.
  await gt.clock.advance(2500);
  const [waiting] = await gt.sql`select status from tasks where id = ${stubborn.id}`;
  expect(waiting.status).toBe("cancelling");
  await gt.clock.advance(500);
  const ended = await waitTask(gt.url, stubborn.id);
  expect(ended.status).toBe("cancelled");
  expect(ended.error.code).toBe("CANCELLED");
  expect((await taskEventTypes(gt.sql, stubborn.id)).filter((t) => t === "task.cancelled")).toHaveLength(1);

  // The killed agent is replaced on the next turn.
  const next = await waitTask(gt.url, (await submitOk(gt.url, s, { prompt: "[deltas 1]" })).id);
  expect(next.status).toBe("completed");
  expect(next.result.text).toBe("chunk 1 ");
});

it("returns a terminal task unchanged and writes nothing", async () => {
  const s = await createSession(gt.url, gt.workspace);
  const done = await waitTask(gt.url, (await submitOk(gt.url, s, { prompt: "done" })).id);
  expect(done.status).toBe("completed");
  const [row] = await gt.sql<{ version: number; finishedAt: Date }[]>`
    select version, finished_at from tasks where id = ${done.id}`;
  const before = await counts(gt.sql);
  const r = await cancel(done.id);
  expect(r.status).toBe(200);
  expect(r.body).toEqual(done);
  const [rowAfter] = await gt.sql<{ version: number; finishedAt: Date }[]>`
    select version, finished_at from tasks where id = ${done.id}`;
  expect(rowAfter).toEqual(row);
  expect(await counts(gt.sql)).toEqual(before);
});

it("archiving a session cancels its running and queued turns", async () => {
  const s = await createSession(gt.url, gt.workspace);
  const running = await submitOk(gt.url, s, { prompt: "[hang]" });
  const queued = await submitOk(gt.url, s, { prompt: "[sleep 10]" });
  await waitStatus(gt.url, running.id, "running");
  const del = await call(gt.url, "DELETE", `/v1/sessions/${s}`);
  expect(del.status).toBe(200);
  expect(del.body.status).toBe("archived");
  const [a, b] = await Promise.all([waitTask(gt.url, running.id), waitTask(gt.url, queued.id)]);
  expect(a.status).toBe("cancelled");
  expect(b.status).toBe("cancelled");
  expect(b.startedAt).toBeNull();
});
