/**
 * Direct tests of src/sql/task-cancel.ts on a real database: a queued task cancelled at once, a
 * running one marked cancelling, the session's active task found, its running turn interrupted
 * (with the owner told at commit), and an archive's open tasks locked. Each asserts the status,
 * tenant and idempotency-key guards, so a wrong statement fails here.
 */
import { describe, expect, it } from "vitest";
import { notifyChannels } from "../../src/sql/notify.js";
import {
  taskCancelQueued,
  taskInterruptRunningOfSession,
  taskLockOpenOfSession,
  taskMarkCancelling,
} from "../../src/sql/task-cancel.js";
import {
  addSession,
  addTask,
  NOTIFIED,
  rowIsFree,
  taskById,
  useSqlTestDatabase,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

describe("taskCancelQueued", () => {
  it("cancels a queued task at once, and nothing else", async () => {
    const id = await addSession(t.sql);
    const queued = await addTask(t.sql, id, { status: "queued" });
    const running = await addTask(t.sql, id, { status: "running" });
    const cancelled = await taskCancelQueued(t.sql, queued.id);
    expect(cancelled).toMatchObject({ status: "cancelled", version: queued.version + 1 });
    expect(cancelled?.error?.code).toBe("CANCELLED");
    expect(cancelled?.finishedAt).toBeInstanceOf(Date);
    expect(cancelled?.cancelRequestedAt).toBeInstanceOf(Date);
    expect(await taskCancelQueued(t.sql, queued.id)).toBeNull();
    expect(await taskCancelQueued(t.sql, running.id)).toBeNull();
    expect((await taskById(t.sql, running.id)).status).toBe("running");
  });
});

describe("taskMarkCancelling", () => {
  it("marks a running task cancelling, and only a running one", async () => {
    const id = await addSession(t.sql);
    const running = await addTask(t.sql, id, { status: "running" });
    const queued = await addTask(t.sql, id, { status: "queued" });
    const marked = await taskMarkCancelling(t.sql, running.id);
    expect(marked).toMatchObject({ status: "cancelling", version: running.version + 1 });
    expect(marked?.cancelRequestedAt).toBeInstanceOf(Date);
    expect(await taskMarkCancelling(t.sql, running.id)).toBeNull();
    expect(await taskMarkCancelling(t.sql, queued.id)).toBeNull();
    expect((await taskById(t.sql, queued.id)).status).toBe("queued");
  });
});

describe("taskInterruptRunningOfSession", () => {
  it("interrupts the session's running turn, notifying nothing itself (the admission declares the cancel)", async () => {
    const id = await addSession(t.sql, { tenant: "a" });
    const running = await addTask(t.sql, id, { status: "running" });
    const heard: string[] = [];
    const listening = await t.sql.listen(notifyChannels.cancel, (payload) => heard.push(payload));
    try {
      const row = await t.sql.begin((tx) => taskInterruptRunningOfSession(tx, id, null, "a"));
      expect(row).toMatchObject({ id: running.id, status: "cancelling" });
      // A marker sent after it: once heard, anything the interrupt's commit sent was heard first.
      await t.sql`select pg_notify(${notifyChannels.cancel}, 'marker')`;
      await expect.poll(() => heard, NOTIFIED).toEqual(["marker"]);
    } finally {
      await listening.unlisten();
    }
    expect(await taskInterruptRunningOfSession(t.sql, id, null, null)).toBeNull();
  });

  it("interrupts nothing for another tenant, a taken key, or a session with nothing running", async () => {
    const id = await addSession(t.sql, { tenant: "a" });
    const running = await addTask(t.sql, id, { status: "running", idempotencyKey: "k" });
    expect(await taskInterruptRunningOfSession(t.sql, id, null, "b")).toBeNull();
    expect(await taskInterruptRunningOfSession(t.sql, id, "k", "a")).toBeNull();
    expect((await taskById(t.sql, running.id)).status).toBe("running");
    expect((await taskInterruptRunningOfSession(t.sql, id, "new", null))?.id).toBe(running.id);
    const queuedOnly = await addSession(t.sql);
    await addTask(t.sql, queuedOnly, { status: "queued" });
    expect(await taskInterruptRunningOfSession(t.sql, queuedOnly, null, null)).toBeNull();
  });
});

describe("taskLockOpenOfSession", () => {
  it("locks the session's queued and running tasks in queue order, not the others", async () => {
    const id = await addSession(t.sql);
    const running = await addTask(t.sql, id, { status: "running" });
    const q1 = await addTask(t.sql, id, { status: "queued" });
    const cancelling = await addTask(t.sql, id, { status: "cancelling" });
    const q2 = await addTask(t.sql, id, { status: "queued" });
    await addTask(t.sql, id, { status: "completed" });
    await addTask(t.sql, await addSession(t.sql), { status: "queued" });
    await t.sql.begin(async (tx) => {
      const rows = await taskLockOpenOfSession(tx, id);
      expect(rows.map((r) => r.id)).toEqual([running.id, q1.id, q2.id]);
      expect(await rowIsFree(t.sql, "tasks", q1.id)).toBe(false);
      expect(await rowIsFree(t.sql, "tasks", cancelling.id)).toBe(true);
    });
  });
});
