/**
 * The running tasks whose owner is gone (or, at shutdown, is this boot), found and locked for the
 * sweeper to settle `interrupted` (`taskRestartSettlement`) with the one settlement statement
 * (sql/task-settle.ts), fenced by the owner each row names, in the same transaction.
 */
import type { Queryable } from "../db/client.js";
import type { OwnerFence } from "./event-append.js";
import type { Settlement } from "./task-settle.js";
import type { TaskRow } from "./task-row.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

/** How a turn whose owner stopped ends. */
export const taskRestartSettlement: Settlement = {
  status: "interrupted",
  error: {
    code: "GATEWAY_RESTART",
    message: "The gateway running this turn stopped before the turn finished; its result is unknown.",
  },
};

/** The fence a locked orphan is settled under: the owner and attempt its row names. */
export const taskOwnerOf = (row: TaskRow): OwnerFence => ({
  taskId: row.id,
  bootId: row.ownerBoot!,
  attempt: row.attempt,
});

/*
 * Lock order. Settling a task appends its terminal event, which locks its session row (the seq
 * allocator), so these statements take the session rows first, in id order, and only then the
 * task rows, like every other writer (docs/architecture.md). Locking the task first deadlocked
 * with the event log's flush of that very turn, which holds the session row and then updates the
 * task's seq range: seen under a delta flood, where a late heartbeat let the lease expire while
 * the turn was still flushing. Each function therefore runs two statements and must be
 * called inside a transaction; the second only locks tasks whose session row the first locked.
 * Both locks hold until the transaction ends, so the settlement that follows finds the rows as
 * these statements returned them.
 */

/**
 * Running tasks whose owner stopped renewing its lease. Safe when every instance runs it at
 * once: `SKIP LOCKED` lets one sweeper take each row and the status guard makes a repeat a no-op.
 * Never the sweeping boot's own tasks (`ownBoot`): this process renews or settles those itself,
 * and a lease of its own that ran out only means its heartbeat was late, not that it stopped.
 * Only tasks of the sweeper's own instance group (`group`): taking a task over means settling it
 * and, under MOORING_RECOVERY=continue, continuing it, and both belong to the hosts that hold its
 * workspace; a group whose instances are all gone keeps its orphans until one of them starts.
 */
export async function taskLockExpiredLeases(
  q: Queryable,
  ownBoot: string,
  group = "default",
): Promise<TaskRow[]> {
  const sessions = await taskWithStatusSets(q)<{ id: string }[]>`
    select id from sessions where id in (
      select session_id from tasks
      where status in ${ACTIVE} and lease_expires_at < now() and owner_boot <> ${ownBoot}
        and instance_group = ${group})
    order by id for update`;
  if (sessions.length === 0) return [];
  return taskWithStatusSets(q)<TaskRow[]>`
    select * from tasks
    where status in ${ACTIVE} and lease_expires_at < now() and owner_boot <> ${ownBoot}
      and instance_group = ${group}
      and session_id = any(${sessions.map((s) => s.id)}::uuid[])
    order by id
    for update skip locked`;
}

/**
 * At startup, tasks an earlier boot of this same instance left running are orphans for certain:
 * they are settled now instead of waiting for their leases to expire.
 */
export async function taskLockPreviousBoot(
  q: Queryable,
  instanceId: string,
  bootId: string,
): Promise<TaskRow[]> {
  const sessions = await taskWithStatusSets(q)<{ id: string }[]>`
    select id from sessions where id in (
      select t.session_id from tasks t join instances i on i.boot_id = t.owner_boot
      where t.status in ${ACTIVE} and i.instance_id = ${instanceId} and i.boot_id <> ${bootId})
    order by id for update`;
  if (sessions.length === 0) return [];
  return taskWithStatusSets(q)<TaskRow[]>`
    select t.* from tasks t
    join instances i on i.boot_id = t.owner_boot
    where t.status in ${ACTIVE} and i.instance_id = ${instanceId} and i.boot_id <> ${bootId}
      and t.session_id = any(${sessions.map((s) => s.id)}::uuid[])
    order by t.id
    for update of t skip locked`;
}

/**
 * Graceful shutdown: this boot gives its tasks up at once (no lease wait), so another instance can
 * start queued work immediately.
 */
export async function taskLockOwn(q: Queryable, bootId: string): Promise<TaskRow[]> {
  const sessions = await taskWithStatusSets(q)<{ id: string }[]>`
    select id from sessions where id in (
      select session_id from tasks where owner_boot = ${bootId} and status in ${ACTIVE})
    order by id for update`;
  if (sessions.length === 0) return [];
  return taskWithStatusSets(q)<TaskRow[]>`
    select * from tasks
    where owner_boot = ${bootId} and status in ${ACTIVE}
      and session_id = any(${sessions.map((s) => s.id)}::uuid[])
    order by id
    for update`;
}
