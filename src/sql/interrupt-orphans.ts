import type { Queryable } from "../db/client.js";
import type { TaskRow } from "./task-row.js";
import { ACTIVE, withSets } from "./task-status-sets.js";

const restartError = JSON.stringify({
  code: "GATEWAY_RESTART",
  message: "The gateway running this turn stopped before the turn finished; its result is unknown.",
});

/*
 * Lock order. Interrupting a task appends its terminal event, which locks its session row (the seq
 * allocator), so these statements take the session rows first, in id order, and only then the
 * task rows, like every other writer (docs/architecture.md). Locking the task first deadlocked
 * with the event log's flush of that very turn, which holds the session row and then updates the
 * task's seq range: seen under a delta flood, where a late heartbeat let the lease expire while
 * the turn was still flushing. Each function therefore runs two statements and must be
 * called inside a transaction; the second only touches tasks whose session row the first locked.
 */

/**
 * Settles running tasks whose owner stopped renewing its lease. Safe when every instance runs it at
 * once: `SKIP LOCKED` lets one sweeper take each row and the status guard makes a repeat a no-op.
 * Never the sweeping boot's own tasks (`ownBoot`): this process renews or settles those itself,
 * and a lease of its own that ran out only means its heartbeat was late, not that it stopped.
 * Only tasks of the sweeper's own instance group (`group`): taking a task over means settling it
 * and, under MOORING_RECOVERY=continue, continuing it, and both belong to the hosts that hold its
 * workspace; a group whose instances are all gone keeps its orphans until one of them starts.
 */
export async function interruptExpiredLeases(
  q: Queryable,
  ownBoot: string,
  group = "default",
): Promise<TaskRow[]> {
  const sessions = await withSets(q)<{ id: string }[]>`
    select id from sessions where id in (
      select session_id from tasks
      where status in ${ACTIVE} and lease_expires_at < now() and owner_boot <> ${ownBoot}
        and instance_group = ${group})
    order by id for update`;
  if (sessions.length === 0) return [];
  return withSets(q)<TaskRow[]>`
    with orphans as (
      select id from tasks
      where status in ${ACTIVE} and lease_expires_at < now() and owner_boot <> ${ownBoot}
        and instance_group = ${group}
        and session_id = any(${sessions.map((s) => s.id)}::uuid[])
      for update skip locked
    )
    update tasks t set status = 'interrupted', finished_at = now(), lease_expires_at = null,
      version = t.version + 1, error = ${restartError}::text::jsonb
    from orphans o where t.id = o.id
    returning t.*`;
}

/**
 * At startup, tasks an earlier boot of this same instance left running are orphans for certain:
 * settle them now instead of waiting for their leases to expire.
 */
export async function interruptPreviousBootTasks(
  q: Queryable,
  instanceId: string,
  bootId: string,
): Promise<TaskRow[]> {
  const sessions = await withSets(q)<{ id: string }[]>`
    select id from sessions where id in (
      select t.session_id from tasks t join instances i on i.boot_id = t.owner_boot
      where t.status in ${ACTIVE} and i.instance_id = ${instanceId} and i.boot_id <> ${bootId})
    order by id for update`;
  if (sessions.length === 0) return [];
  return withSets(q)<TaskRow[]>`
    with orphans as (
      select t.id from tasks t
      join instances i on i.boot_id = t.owner_boot
      where t.status in ${ACTIVE} and i.instance_id = ${instanceId} and i.boot_id <> ${bootId}
        and t.session_id = any(${sessions.map((s) => s.id)}::uuid[])
      for update of t skip locked
    )
    update tasks t set status = 'interrupted', finished_at = now(), lease_expires_at = null,
      version = t.version + 1, error = ${restartError}::text::jsonb
    from orphans o where t.id = o.id
    returning t.*`;
}

/**
 * Graceful shutdown: this boot gives its tasks up at once (no lease wait), so another instance can
 * start queued work immediately.
 */
export async function interruptOwnTasks(q: Queryable, bootId: string): Promise<TaskRow[]> {
  const sessions = await withSets(q)<{ id: string }[]>`
    select id from sessions where id in (
      select session_id from tasks where owner_boot = ${bootId} and status in ${ACTIVE})
    order by id for update`;
  if (sessions.length === 0) return [];
  return withSets(q)<TaskRow[]>`
    update tasks set status = 'interrupted', finished_at = now(), lease_expires_at = null,
      version = version + 1, error = ${restartError}::text::jsonb
    where owner_boot = ${bootId} and status in ${ACTIVE}
      and session_id = any(${sessions.map((s) => s.id)}::uuid[])
    returning *`;
}
