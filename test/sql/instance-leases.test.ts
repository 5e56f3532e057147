/**
 * Direct tests of the instance, lease and permission operations in src/sql on a real database:
 * instances, renew-leases, interrupt-orphans and permissions. Each asserts what the operation
 * promises, including its fences (owner boot and attempt, the sweeping boot's own tasks, an earlier
 * boot of the same instance) and SKIP LOCKED, so a wrong statement fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Sql, Tx } from "../../src/db/client.js";
import {
  instanceHeartbeat,
  type InstanceInfo,
  instanceList,
  instanceMarkStopped,
  instanceRegister,
} from "../../src/sql/instance.js";
import { taskLockExpiredLeases, taskLockOwn, taskLockPreviousBoot } from "../../src/sql/task-orphans.js";
import {
  permissionCountWaiting,
  permissionInsert,
  type PermissionRow,
  permissionPendingOf,
  permissionRead,
  permissionReadResolved,
  permissionResolvePendingOfTasks,
  permissionResolve,
} from "../../src/sql/permission.js";
import { sessionLock } from "../../src/sql/session-lock.js";
import { taskRenewLease, taskRenewLeases } from "../../src/sql/task-lease.js";
import type { TaskRow } from "../../src/sql/task-row.js";
import {
  addOwnedTask,
  addSession,
  addTask,
  interruptLocked,
  someoneWaitsForALock,
  taskById,
  useSqlTestDatabase,
  whileTaskHeld,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

const instance = (instanceId: string, bootId = randomUUID()): InstanceInfo => ({
  bootId,
  instanceId,
  host: "host",
  pid: 42,
  version: "1.0.0",
});

/** Seconds from the database's now() to the task's lease end. */
async function leaseLeftSeconds(sql: Sql, taskId: string): Promise<number> {
  const [row] =
    await sql`select extract(epoch from (lease_expires_at - now())) as s from tasks where id = ${taskId}`;
  return Number(row.s);
}

describe("instances", () => {
  it("keeps one row per boot, heartbeats and stops one boot only", async () => {
    const first = instance("gw-1");
    const second = instance("gw-1");
    await instanceRegister(t.sql, first);
    await instanceRegister(t.sql, second);
    const backdated = new Date("2026-01-01T00:00:00Z");
    await t.sql`update instances set heartbeat_at = ${backdated}`;
    await instanceHeartbeat(t.sql, second.bootId);
    await instanceMarkStopped(t.sql, first.bootId);
    const rows =
      await t.sql`select boot_id, instance_id, host, pid, version, heartbeat_at, stopped_at from instances`;
    const byBoot = new Map(rows.map((r) => [r.bootId, r]));
    expect(rows).toHaveLength(2);
    expect(byBoot.get(first.bootId)).toMatchObject({
      instanceId: "gw-1",
      host: "host",
      pid: 42,
      heartbeatAt: backdated,
    });
    expect(byBoot.get(first.bootId)?.stoppedAt).toBeInstanceOf(Date);
    expect(byBoot.get(second.bootId)).toMatchObject({ instanceId: "gw-1", stoppedAt: null });
    expect(byBoot.get(second.bootId)?.heartbeatAt.getTime()).toBeGreaterThan(backdated.getTime());
  });

  it("registers a boot again without an error (a retried registration, the row's service started again): its row is live again", async () => {
    const boot = instance("gw-again");
    await instanceRegister(t.sql, boot);
    await instanceMarkStopped(t.sql, boot.bootId);
    await instanceRegister(t.sql, boot);
    const rows = await t.sql`select stopped_at from instances where boot_id = ${boot.bootId}`;
    expect(rows).toEqual([{ stoppedAt: null }]);
  });

  it("lists instances heard from within the window, live first, then newest heartbeat, with their leases", async () => {
    const stopped = instance("gw-stopped");
    const older = instance("gw-older");
    const newer = instance("gw-newer");
    const gone = instance("gw-gone");
    for (const i of [stopped, older, newer, gone]) await instanceRegister(t.sql, i);
    await t.sql`update instances set heartbeat_at = now() - interval '30 seconds' where boot_id = ${older.bootId}`;
    await t.sql`update instances set heartbeat_at = now() - interval '2 hours' where boot_id = ${gone.bootId}`;
    await instanceMarkStopped(t.sql, stopped.bootId);
    const s = await addSession(t.sql);
    await addTask(t.sql, s, { status: "running", ownerBoot: newer.bootId });
    await addTask(t.sql, s, { status: "cancelling", ownerBoot: newer.bootId });
    await addTask(t.sql, s, { status: "completed", ownerBoot: newer.bootId });

    const listed = await instanceList(t.sql, 60 * 60_000, 10);
    expect(listed.map((i) => i.instanceId)).toEqual(["gw-newer", "gw-older", "gw-stopped"]);
    expect(listed.map((i) => i.runningTasks)).toEqual([2, 0, 0]);
    expect(listed[1].heartbeatAgeMs).toBeGreaterThanOrEqual(30_000);
    expect(listed[1].heartbeatAgeMs).toBeLessThan(60 * 60_000);
    expect(listed[0]).toMatchObject({ bootId: newer.bootId, host: "host", pid: 42, version: "1.0.0" });
    expect((await instanceList(t.sql, 60 * 60_000, 1)).map((i) => i.instanceId)).toEqual(["gw-newer"]);
    expect((await instanceList(t.sql, 10_000, 10)).map((i) => i.instanceId)).toEqual([
      "gw-newer",
      "gw-stopped",
    ]);
  });
});

describe("taskRenewLeases / taskRenewLease", () => {
  const HOUR = 60 * 60_000;

  it("renews every active lease of the boot and reports status and attempt, nothing of others", async () => {
    const boot = randomUUID();
    const s = await addSession(t.sql);
    const running = await addTask(t.sql, s, {
      status: "running",
      ownerBoot: boot,
      attempt: 3,
      leaseInMs: -1_000,
    });
    const cancelling = await addTask(t.sql, s, { status: "cancelling", ownerBoot: boot, leaseInMs: 1_000 });
    const settled = await addTask(t.sql, s, { status: "completed", ownerBoot: boot, leaseInMs: 1_000 });
    const foreign = await addTask(t.sql, s, { status: "running", leaseInMs: 1_000 });

    const renewed = await taskRenewLeases(t.sql, boot, HOUR);
    expect(renewed.sort((a, b) => a.status.localeCompare(b.status))).toEqual([
      { id: cancelling.id, attempt: 1, status: "cancelling", renewed: true },
      { id: running.id, attempt: 3, status: "running", renewed: true },
    ]);
    for (const id of [running.id, cancelling.id])
      expect(await leaseLeftSeconds(t.sql, id)).toBeGreaterThan(3500);
    for (const id of [settled.id, foreign.id]) expect(await leaseLeftSeconds(t.sql, id)).toBeLessThan(2);
  });

  it("skips a locked lease without waiting and still reports it owned", async () => {
    const boot = randomUUID();
    const s = await addSession(t.sql);
    const held = await addTask(t.sql, s, { status: "running", ownerBoot: boot, leaseInMs: 1_000 });
    const free = await addTask(t.sql, s, { status: "running", ownerBoot: boot, leaseInMs: 1_000 });
    const renewed = await whileTaskHeld(t.sql, held.id, () => taskRenewLeases(t.sql, boot, HOUR));
    expect(new Map(renewed.map((r) => [r.id, r.renewed]))).toEqual(
      new Map([
        [held.id, false],
        [free.id, true],
      ]),
    );
    expect(await leaseLeftSeconds(t.sql, held.id)).toBeLessThan(2);
    expect(await taskRenewLease(t.sql, held.id, boot, HOUR)).toBe(true);
    expect(await leaseLeftSeconds(t.sql, held.id)).toBeGreaterThan(3500);
  });

  it("renews one lease only for its owner while the task is active", async () => {
    const boot = randomUUID();
    const s = await addSession(t.sql);
    const running = await addTask(t.sql, s, { status: "running", ownerBoot: boot, leaseInMs: 1_000 });
    const settled = await addTask(t.sql, s, { status: "failed", ownerBoot: boot, leaseInMs: 1_000 });
    expect(await taskRenewLease(t.sql, running.id, randomUUID(), HOUR)).toBe(false);
    expect(await taskRenewLease(t.sql, settled.id, boot, HOUR)).toBe(false);
    expect(await leaseLeftSeconds(t.sql, running.id)).toBeLessThan(2);
    expect(await leaseLeftSeconds(t.sql, settled.id)).toBeLessThan(2);
  });
});

describe("interrupt-orphans", () => {
  const inTx = <T>(fn: (tx: Tx) => Promise<T>) => t.sql.begin((tx) => fn(tx)) as Promise<T>;
  const ids = (rows: TaskRow[]) => rows.map((r) => r.id).sort();

  function expectInterrupted(row: TaskRow, before: TaskRow) {
    expect(row).toMatchObject({ status: "interrupted", leaseExpiresAt: null, version: before.version + 1 });
    expect(row.error?.code).toBe("GATEWAY_RESTART");
    expect(row.finishedAt).toBeInstanceOf(Date);
  }

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
});

describe("permissions", () => {
  const options = [
    { optionId: "allow", name: "Allow", kind: "allow_once" },
    { optionId: "deny", name: "Deny", kind: "reject_once" },
  ];
  const toolCall = { id: "call-1", name: "Bash", title: "run", kind: "execute", input: { file_path: "/x" } };

  const runningTurn = () => addOwnedTask(t.sql, "running");

  async function request(turn: Awaited<ReturnType<typeof runningTurn>>, opts = options): Promise<string> {
    const id = randomUUID();
    const expiresAt = new Date(Date.now() + 60_000);
    const ok = await permissionInsert(
      t.sql,
      { id, taskId: turn.row.id, sessionId: turn.row.sessionId, toolCall, options: opts, expiresAt },
      turn.fence,
    );
    expect(ok).toBe(true);
    return id;
  }

  it("records a request only for the turn that owns its running task", async () => {
    const turn = await runningTurn();
    const id = await request(turn);
    expect(await permissionRead(t.sql, id)).toMatchObject({
      id,
      taskId: turn.row.id,
      sessionId: turn.row.sessionId,
      toolCall,
      options,
      resolvedAt: null,
    });
    const row = (over: Partial<PermissionRow>) => ({
      id: randomUUID(),
      taskId: turn.row.id,
      sessionId: turn.row.sessionId,
      toolCall,
      options,
      expiresAt: new Date(),
      ...over,
    });
    expect(await permissionInsert(t.sql, row({}), { ...turn.fence, attempt: 1 })).toBe(false);
    expect(await permissionInsert(t.sql, row({}), { ...turn.fence, bootId: randomUUID() })).toBe(false);
    await t.sql`update tasks set status = 'completed' where id = ${turn.row.id}`;
    expect(await permissionInsert(t.sql, row({}), turn.fence)).toBe(false);
    const [{ n }] = await t.sql`select count(*)::int as n from permission_requests`;
    expect(n).toBe(1);
    expect(await permissionRead(t.sql, randomUUID())).toBeNull();
  });

  it("lets the first answer win and keeps what it said", async () => {
    const id = await request(await runningTurn());
    const answer = { optionId: "allow", message: "ok", answers: { which_file: "a" }, answeredBy: "alice" };
    const won = await permissionResolve(t.sql, id, { ...answer, by: "client" });
    expect(won).toMatchObject({ ...answer, resolvedBy: "client" });
    expect(won?.resolvedAt).toBeInstanceOf(Date);
    expect(await permissionResolve(t.sql, id, { optionId: "deny", by: "timeout" })).toBeNull();
    expect((await permissionRead(t.sql, id))?.optionId).toBe("allow");
    expect(await permissionResolve(t.sql, randomUUID(), { optionId: null, by: "cancel" })).toBeNull();
  });

  it("reads which of the asked requests were answered, and the pending ones of tasks in order", async () => {
    const turn = await runningTurn();
    const [a, b, c] = [await request(turn), await request(turn), await request(turn)];
    const elsewhere = await request(await runningTurn());
    await permissionResolve(t.sql, b, { optionId: "allow", by: "client" });
    await permissionResolve(t.sql, elsewhere, { optionId: "allow", by: "client" });
    expect((await permissionReadResolved(t.sql, [a, b, c])).map((r) => r.id)).toEqual([b]);
    expect(await permissionReadResolved(t.sql, [])).toEqual([]);
    await t.sql`update permission_requests set created_at = created_at - interval '1 minute' where id = ${c}`;
    expect((await permissionPendingOf(t.sql, [turn.row.id])).map((r) => r.id)).toEqual([c, a]);
    expect(await permissionPendingOf(t.sql, [])).toEqual([]);
  });

  it("resolves the pending requests of settled tasks with their reject option, leaves answered ones", async () => {
    const turn = await runningTurn();
    const pending = await request(turn);
    const noReject = await request(turn, [options[0]]);
    const answered = await request(turn);
    await permissionResolve(t.sql, answered, { optionId: "allow", by: "client" });
    const other = await request(await runningTurn());

    const resolved = await permissionResolvePendingOfTasks(t.sql, [turn.row.id], "restart");
    expect(new Map(resolved.map((r) => [r.id, [r.optionId, r.resolvedBy]]))).toEqual(
      new Map([
        [pending, ["deny", "restart"]],
        [noReject, [null, "restart"]],
      ]),
    );
    expect(await permissionRead(t.sql, answered)).toMatchObject({ optionId: "allow", resolvedBy: "client" });
    expect((await permissionRead(t.sql, other))?.resolvedAt).toBeNull();
    expect(await permissionResolvePendingOfTasks(t.sql, [], "restart")).toEqual([]);
  });

  it("counts active turns waiting for a person, each once", async () => {
    expect(await permissionCountWaiting(t.sql)).toBe(0);
    const waiting = await runningTurn();
    await request(waiting);
    await request(waiting);
    const answered = await runningTurn();
    await permissionResolve(t.sql, await request(answered), { optionId: "allow", by: "client" });
    const settled = await runningTurn();
    await request(settled);
    await t.sql`update tasks set status = 'failed' where id = ${settled.row.id}`;
    expect(await permissionCountWaiting(t.sql)).toBe(1);
  });
});
