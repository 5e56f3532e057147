/**
 * Direct tests of src/sql/task-orphans.ts on a real database: the lease sweep, the startup sweep of
 * an earlier boot's turns and the shutdown's own, each locking the orphans (session rows first)
 * for the settlement that interrupts them. Each asserts its fences (the sweeping boot's own tasks,
 * an earlier boot of the same instance, the instance group) and SKIP LOCKED, so a wrong statement
 * fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Tx } from "../../src/db/client.js";
import { instanceRegister } from "../../src/sql/instance.js";
import { sessionLock } from "../../src/sql/session-lock.js";
import { taskLockExpiredLeases, taskLockOwn, taskLockPreviousBoot } from "../../src/sql/task-orphans.js";
import type { TaskRow } from "../../src/sql/task-row.js";
import {
  addSession,
  addTask,
  interruptLocked,
  rowIsFree,
  someoneWaitsForALock,
  instanceInfo,
  taskById,
  useSqlTestDatabase,
  whileTaskHeld,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

const instance = instanceInfo;

const inTx = <T>(fn: (tx: Tx) => Promise<T>) => t.sql.begin((tx) => fn(tx)) as Promise<T>;
const ids = (rows: TaskRow[]) => rows.map((r) => r.id).sort();

function expectInterrupted(row: TaskRow, before: TaskRow) {
  expect(row).toMatchObject({ status: "interrupted", leaseExpiresAt: null, version: before.version + 1 });
  expect(row.error?.code).toBe("GATEWAY_RESTART");
  expect(row.finishedAt).toBeInstanceOf(Date);
}

describe("taskLockExpiredLeases", () => {
  it("interrupts other boots' tasks whose lease ran out, never the sweeper's own", async () => {
    const own = randomUUID();
    const [s1, s2] = [await addSession(t.sql), await addSession(t.sql)];
    const expired = await addTask(t.sql, s1, { status: "running", leaseInMs: -1_000 });
    const expiredCancelling = await addTask(t.sql, s2, { status: "cancelling", leaseInMs: -1_000 });
    const live = await addTask(t.sql, s1, { status: "running", leaseInMs: 60_000 });
    const ownExpired = await addTask(t.sql, s2, { status: "running", ownerBoot: own, leaseInMs: -1_000 });
    const queued = await addTask(t.sql, s1, { status: "queued" });

    const interrupted = await inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, own)));
    expect(ids(interrupted)).toEqual([expired.id, expiredCancelling.id].sort());
    expectInterrupted(interrupted.find((r) => r.id === expired.id)!, expired);
    for (const [row, status] of [
      [live, "running"],
      [ownExpired, "running"],
      [queued, "queued"],
    ] as const)
      expect((await taskById(t.sql, row.id)).status).toBe(status);
    expect(await inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, own)))).toEqual([]);
  });

  it("leaves an expired task whose row another transaction holds to that transaction", async () => {
    const s = await addSession(t.sql);
    const held = await addTask(t.sql, s, { status: "running", leaseInMs: -1_000 });
    const free = await addTask(t.sql, s, { status: "running", leaseInMs: -1_000 });
    const interrupted = await whileTaskHeld(t.sql, held.id, () =>
      inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, randomUUID()))),
    );
    expect(ids(interrupted)).toEqual([free.id]);
    expect((await taskById(t.sql, held.id)).status).toBe("running");
  });

  it("is safe when every instance sweeps at once: each task is interrupted once", async () => {
    const sessions = [await addSession(t.sql), await addSession(t.sql), await addSession(t.sql)];
    const expired = [];
    for (const s of [...sessions, ...sessions])
      expired.push(await addTask(t.sql, s, { status: "running", leaseInMs: -1_000 }));
    const sweeps = await Promise.all(
      [1, 2, 3].map(() => inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, randomUUID())))),
    );
    const all = sweeps.flat();
    expect(ids(all)).toEqual(ids(expired));
    for (const row of all) expect(row.version).toBe(1);
  });

  it("takes the session row before the task row, so a flush holding the session row is not deadlocked", async () => {
    // The event log's flush holds the session row, then updates the task's seq range (the order a lease sweep once inverted into a deadlock).
    const s = await addSession(t.sql);
    const task = await addTask(t.sql, s, { status: "running", leaseInMs: -1_000 });
    let sweep: Promise<TaskRow[]> | undefined;
    await t.sql.begin(async (flush) => {
      await flush`set local lock_timeout = '5s'`;
      await sessionLock(flush, s);
      sweep = inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, randomUUID())));
      await someoneWaitsForALock(t.sql);
      // The sweep waits for the session row and holds no task row: the flush's task write goes through.
      await flush`update tasks set first_seq = 1, last_seq = 1 where id = ${task.id}`;
    });
    expect(ids((await sweep) ?? [])).toEqual([task.id]);
    expect(await taskById(t.sql, task.id)).toMatchObject({ status: "interrupted", lastSeq: 1 });
  });

  it("takes over only the sweeper's own instance group's expired leases", async () => {
    const taskOf = async (group: string) => {
      const row = await addTask(t.sql, await addSession(t.sql), { status: "running", leaseInMs: -1_000 });
      await t.sql`update tasks set instance_group = ${group} where id = ${row.id}`;
      return row;
    };
    const a = await taskOf("a");
    const b = await taskOf("b");
    const swept = await inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, randomUUID(), "a")));
    expect(swept.map((r) => r.id)).toEqual([a.id]);
    expect((await taskById(t.sql, b.id)).status).toBe("running");
    expect(
      ids(await inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, randomUUID(), "b")))),
    ).toEqual([b.id]);
  });
});

describe("taskLockPreviousBoot", () => {
  it("at startup interrupts what earlier boots of this instance left running, nothing else", async () => {
    const earlier = instance("gw-1");
    const current = instance("gw-1");
    const other = instance("gw-2");
    for (const i of [earlier, current, other]) await instanceRegister(t.sql, i);
    const s = await addSession(t.sql);
    const left = await addTask(t.sql, s, { status: "running", ownerBoot: earlier.bootId, leaseInMs: 60_000 });
    const leftCancelling = await addTask(t.sql, s, { status: "cancelling", ownerBoot: earlier.bootId });
    const settled = await addTask(t.sql, s, { status: "completed", ownerBoot: earlier.bootId });
    const mine = await addTask(t.sql, s, { status: "running", ownerBoot: current.bootId });
    const others = await addTask(t.sql, s, { status: "running", ownerBoot: other.bootId, leaseInMs: -1_000 });

    const interrupted = await inTx((tx) =>
      interruptLocked(tx, taskLockPreviousBoot(tx, "gw-1", current.bootId)),
    );
    expect(ids(interrupted)).toEqual([left.id, leftCancelling.id].sort());
    expectInterrupted(interrupted.find((r) => r.id === left.id)!, left);
    expect((await taskById(t.sql, settled.id)).status).toBe("completed");
    expect((await taskById(t.sql, mine.id)).status).toBe("running");
    expect((await taskById(t.sql, others.id)).status).toBe("running");
    expect(await inTx((tx) => interruptLocked(tx, taskLockPreviousBoot(tx, "gw-1", current.bootId)))).toEqual(
      [],
    );
  });

  it("leaves a task of an earlier boot whose row another transaction holds to that transaction", async () => {
    const earlier = instance("gw-1");
    const current = instance("gw-1");
    for (const i of [earlier, current]) await instanceRegister(t.sql, i);
    const [s1, s2] = [await addSession(t.sql), await addSession(t.sql)];
    const held = await addTask(t.sql, s1, { status: "running", ownerBoot: earlier.bootId });
    const free = await addTask(t.sql, s2, { status: "running", ownerBoot: earlier.bootId });
    const interrupted = await whileTaskHeld(t.sql, held.id, () =>
      inTx((tx) => interruptLocked(tx, taskLockPreviousBoot(tx, "gw-1", current.bootId))),
    );
    expect(ids(interrupted)).toEqual([free.id]);
    expect((await taskById(t.sql, held.id)).status).toBe("running");
  });
});

describe("taskLockOwn", () => {
  it("at shutdown interrupts this boot's active tasks at once, lease or not", async () => {
    const boot = randomUUID();
    const [s1, s2] = [await addSession(t.sql), await addSession(t.sql)];
    const a = await addTask(t.sql, s1, { status: "running", ownerBoot: boot, leaseInMs: 60_000 });
    const b = await addTask(t.sql, s2, { status: "cancelling", ownerBoot: boot, leaseInMs: 60_000 });
    const settled = await addTask(t.sql, s1, { status: "cancelled", ownerBoot: boot });
    const foreign = await addTask(t.sql, s2, { status: "running" });
    const interrupted = await inTx((tx) => interruptLocked(tx, taskLockOwn(tx, boot)));
    expect(ids(interrupted)).toEqual([a.id, b.id].sort());
    expectInterrupted(interrupted.find((r) => r.id === b.id)!, b);
    expect((await taskById(t.sql, settled.id)).status).toBe("cancelled");
    expect((await taskById(t.sql, foreign.id)).status).toBe("running");
    expect(await inTx((tx) => interruptLocked(tx, taskLockOwn(tx, randomUUID())))).toEqual([]);
  });

  it("locks the boot's active tasks and their session rows until the transaction ends", async () => {
    const boot = randomUUID();
    const s = await addSession(t.sql);
    const a = await addTask(t.sql, s, { status: "running", ownerBoot: boot });
    await inTx(async (tx) => {
      expect(ids(await taskLockOwn(tx, boot))).toEqual([a.id]);
      expect(await rowIsFree(t.sql, "tasks", a.id)).toBe(false);
      expect(await rowIsFree(t.sql, "sessions", s)).toBe(false);
    });
    expect(await rowIsFree(t.sql, "tasks", a.id)).toBe(true);
  });
});
