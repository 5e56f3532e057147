import type { Tx } from "../db/client.js";
import type { TaskRow } from "./task-row.js";

export interface Claimant {
  instanceId: string;
  bootId: string;
  leaseMs: number;
}

/**
 * Moves up to `limit` queued tasks to running for this instance. Called with the gate lock held,
 * so `maxActive - running` is exact. A task is runnable when its session has nothing running and
 * it is the head of its session's waiting turns (interrupting turns first, then admission order);
 * among runnable tasks the oldest admission wins (global FIFO), so a busy session's backlog never
 * holds up other sessions. `FOR UPDATE SKIP LOCKED` passes over rows another transaction is
 * cancelling right now instead of waiting on them.
 */
export async function claimTasks(tx: Tx, claimant: Claimant, maxActive: number, limit: number): Promise<TaskRow[]> {
  if (limit <= 0) return [];
  return tx<TaskRow[]>`
    with free as (
      select greatest(${maxActive} - count(*), 0) as n from tasks where status in ('running', 'cancelling')
    ), candidates as (
      select t.id from tasks t
      where t.status = 'queued'
        and not exists (select 1 from tasks r where r.session_id = t.session_id and r.status in ('running', 'cancelling'))
        and not exists (
          select 1 from tasks h where h.session_id = t.session_id and h.status = 'queued' and h.id <> t.id
            and (h.jumps_queue, -h.queue_order) > (t.jumps_queue, -t.queue_order))
      order by t.queue_order
      limit least(${limit}, (select n from free))
      for update skip locked
    ), clock as (
      -- The moment of the claim, not now() (the start of a transaction that may have waited on the
      -- gate lock): startedAt then follows claim order, and the run deadline counts from the start.
      select clock_timestamp() as at
    )
    update tasks t set
      status = 'running', attempt = t.attempt + 1, started_at = k.at,
      deadline_at = k.at + make_interval(secs => t.timeout_ms / 1000.0),
      owner_instance = ${claimant.instanceId}, owner_boot = ${claimant.bootId},
      lease_expires_at = k.at + make_interval(secs => ${claimant.leaseMs} / 1000.0),
      version = t.version + 1
    from candidates c, clock k where t.id = c.id
    returning t.*`;
}
