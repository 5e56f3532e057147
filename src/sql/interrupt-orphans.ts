import type { Queryable } from "../db/client.js";
import type { TaskRow } from "./task-row.js";

const restartError = JSON.stringify({
  code: "GATEWAY_RESTART",
  message: "The gateway running this turn stopped before the turn finished; its result is unknown.",
});

/**
 * Settles running tasks whose owner stopped renewing its lease. Safe when every instance runs it at
 * once: `SKIP LOCKED` lets one sweeper take each row and the status guard makes a repeat a no-op.
 */
export async function interruptExpiredLeases(q: Queryable): Promise<TaskRow[]> {
  return q<TaskRow[]>`
    with orphans as (
      select id from tasks
      where status in ('running', 'cancelling') and lease_expires_at < now()
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
export async function interruptPreviousBootTasks(q: Queryable, instanceId: string, bootId: string): Promise<TaskRow[]> {
  return q<TaskRow[]>`
    with orphans as (
      select t.id from tasks t
      join instances i on i.boot_id = t.owner_boot
      where t.status in ('running', 'cancelling') and i.instance_id = ${instanceId} and i.boot_id <> ${bootId}
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
  return q<TaskRow[]>`
    update tasks set status = 'interrupted', finished_at = now(), lease_expires_at = null,
      version = version + 1, error = ${restartError}::text::jsonb
    where owner_boot = ${bootId} and status in ('running', 'cancelling')
    returning *`;
}
