/**
 * Cancel: queued (at once), running (cancelling → cancelled), an agent that ignores the stop (killed
 * after the escalation delay), repeated and concurrent cancels, terminal tasks, archive cascade.
 * One slot (MOORING_MAX_ACTIVE=1) so queues form on demand.
 */
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { call, eventually, startTestGateway, type TestGateway } from "../support/gateway.js";
import {
  counts,
  createSession,
  submitOk,
  taskEventTypes,
  tempWorkspace,
  waitStatus,
  waitTask,
  cancelOpenTasks,
} from "../support/turns.js";

let db: TestDatabase;
let gw: TestGateway;
let workspace: string;

beforeAll(async () => {
  db = await createTestDatabase();
  gw = await startTestGateway(db.url, { MOORING_POLL_MS: "100", MOORING_MAX_ACTIVE: "1" });
  workspace = await tempWorkspace();
});
afterAll(async () => {
  await gw?.stop();
  await db?.drop();
});

// A failed test must not leave the single slot taken for the next one.
afterEach(() => cancelOpenTasks(gw.url, db.sql));

const cancel = (id: string) => call(gw.url, "POST", `/v1/tasks/${id}/cancel`);
const get = async (id: string) => (await call(gw.url, "GET", `/v1/tasks/${id}`)).body;

it("cancels a queued task at once and the queue moves up; a running one goes cancelling → cancelled", async () => {
  const [s1, s2, s3, s4] = await Promise.all([1, 2, 3, 4].map(() => createSession(gw.url, workspace)));
  const hang = await submitOk(gw.url, s1, { prompt: "[hang]" });
  const q1 = await submitOk(gw.url, s2, { prompt: "[sleep 10] q1" });
  const q2 = await submitOk(gw.url, s3, { prompt: "[sleep 10] q2" });
  const q3 = await submitOk(gw.url, s4, { prompt: "[sleep 10] q3" });
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
  expect(await taskEventTypes(db.sql, q1.id)).toEqual(["task.queued", "task.cancelled"]);
  expect((await get(q2.id)).position).toBe(1);
  expect((await get(q3.id)).position).toBe(2);
  expect((await call(gw.url, "GET", "/v1/gate")).body).toMatchObject({ active: 1, queued: 2 });
  // Both tasks behind it are told their new place (announced asynchronously).
  const lastAnnounced = async (id: string) => {
    const [e] = await db.sql<{ data: any }[]>`
      select data from events where task_id = ${id} and type = 'task.position' order by seq desc limit 1`;
    return e?.data.position;
  };
  await eventually(async () => (await lastAnnounced(q2.id)) === 1 && (await lastAnnounced(q3.id)) === 2);

  // Twice: the same answer, nothing more written.
  const before = await counts(db.sql);
  const again = await cancel(q1.id);
  expect(again.status).toBe(200);
  expect(again.body).toEqual(c.body);
  expect(await counts(db.sql)).toEqual(before);

  // Concurrent cancels of one queued task: all answer cancelled, one event.
  const many = await Promise.all([1, 2, 3, 4, 5].map(() => cancel(q2.id)));
  for (const m of many) {
    expect(m.status).toBe(200);
    expect(m.body.status).toBe("cancelled");
  }
  const q2Types = await taskEventTypes(db.sql, q2.id);
  expect(q2Types.filter((t) => t !== "task.position")).toEqual(["task.queued", "task.cancelled"]);

  // Running: cancelling first, then cancelled by its owner; the slot goes to the next in line.
  const r = await cancel(hang.id);
  expect(r.status).toBe(200);
  expect(["cancelling", "cancelled"]).toContain(r.body.status);
  const ended = await waitTask(gw.url, hang.id);
  expect(ended.status).toBe("cancelled");
  expect(ended.error.code).toBe("CANCELLED");
  const types = await taskEventTypes(db.sql, hang.id);
  expect(types[0]).toBe("task.queued");
  expect(types).toContain("task.started");
  expect(types[types.length - 1]).toBe("task.cancelled");
  expect(types.filter((t) => t === "task.cancelled")).toHaveLength(1);
  const next = await waitTask(gw.url, q3.id);
  expect(next.status).toBe("completed");

  // The cancelled session takes its next turn normally.
  expect((await waitTask(gw.url, (await submitOk(gw.url, s1, { prompt: "hello again" })).id)).status).toBe(
    "completed",
  );
});

it("kills an agent that ignores the cancel after the escalation delay; the task still ends cancelled", async () => {
  const s = await createSession(gw.url, workspace);
  const stubborn = await submitOk(gw.url, s, { prompt: "[stubborn]" });
  expect(stubborn.status).toBe("running");
  const first = await cancel(stubborn.id);
  expect(first.body.status).toBe("cancelling");

  // Cancelling during the escalation: the same answer, nothing written.
  const [{ version }] = await db.sql<
    { version: number }[]
  >`select version from tasks where id = ${stubborn.id}`;
  const second = await cancel(stubborn.id);
  expect(second.status).toBe(200);
  expect(second.body.status).toBe("cancelling");
  expect(second.body.id).toBe(first.body.id);
  const [{ version: after }] = await db.sql<
    { version: number }[]
  >`select version from tasks where id = ${stubborn.id}`;
  expect(after).toBe(version);

  // It waits for the agent first: most of the escalation delay (3 s) on the gateway's clock and
  // the task is still cancelling; the rest of it, and the agent is killed.
  await gw.clock.advance(2500);
  const [waiting] = await db.sql`select status from tasks where id = ${stubborn.id}`;
  expect(waiting.status).toBe("cancelling");
  await gw.clock.advance(500);
  const ended = await waitTask(gw.url, stubborn.id);
  expect(ended.status).toBe("cancelled");
  expect(ended.error.code).toBe("CANCELLED");
  expect((await taskEventTypes(db.sql, stubborn.id)).filter((t) => t === "task.cancelled")).toHaveLength(1);

  // The killed agent is replaced on the next turn.
  const next = await waitTask(gw.url, (await submitOk(gw.url, s, { prompt: "[deltas 1]" })).id);
  expect(next.status).toBe("completed");
  expect(next.result.text).toBe("chunk 1 ");
});

it("returns a terminal task unchanged and writes nothing", async () => {
  const s = await createSession(gw.url, workspace);
  const done = await waitTask(gw.url, (await submitOk(gw.url, s, { prompt: "done" })).id);
  expect(done.status).toBe("completed");
  const [row] = await db.sql<{ version: number; finishedAt: Date }[]>`
    select version, finished_at from tasks where id = ${done.id}`;
  const before = await counts(db.sql);
  const r = await cancel(done.id);
  expect(r.status).toBe(200);
  expect(r.body).toEqual(done);
  const [rowAfter] = await db.sql<{ version: number; finishedAt: Date }[]>`
    select version, finished_at from tasks where id = ${done.id}`;
  expect(rowAfter).toEqual(row);
  expect(await counts(db.sql)).toEqual(before);
});

it("archiving a session cancels its running and queued turns", async () => {
  const s = await createSession(gw.url, workspace);
  const running = await submitOk(gw.url, s, { prompt: "[hang]" });
  const queued = await submitOk(gw.url, s, { prompt: "[sleep 10]" });
  await waitStatus(gw.url, running.id, "running");
  const del = await call(gw.url, "DELETE", `/v1/sessions/${s}`);
  expect(del.status).toBe(200);
  expect(del.body.status).toBe("archived");
  const [a, b] = await Promise.all([waitTask(gw.url, running.id), waitTask(gw.url, queued.id)]);
  expect(a.status).toBe("cancelled");
  expect(b.status).toBe("cancelled");
  expect(b.startedAt).toBeNull();
});
