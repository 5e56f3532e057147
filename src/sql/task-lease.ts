import type { Queryable } from "../db/client.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

export interface RenewedLease {
  id: string;
  attempt: number;
  status: "running" | "cancelling";
  /** False when the row was locked at that moment and skipped (see `taskRenewLease`). */
  renewed: boolean;
}

/**
 * One statement renews every lease this boot holds and reports each task's status, so the
 * heartbeat also tells the owner which of its tasks were asked to cancel (a backstop for a lost
 * notification) and which it no longer owns (absent from the answer: taken over, so stop it).
 *
 * The renewal skips rows another transaction holds locked right now (an event flush or the
 * settlement of that very task): it never waits on them, so it can never deadlock against them
 * (a plain UPDATE of hundreds of leases took row locks in scan order and deadlocked with event
 * flushes under load; bench/results/history.md). A skipped lease is renewed by the next beat, well
 * within the lease. The status report reads the statement's snapshot, so a task skipped because it
 * is locked is still reported as owned.
 */
export async function taskRenewLeases(
  q: Queryable,
  bootId: string,
  leaseMs: number,
): Promise<RenewedLease[]> {
  return taskWithStatusSets(q)<RenewedLease[]>`
    with renewed as (
      update tasks t set lease_expires_at = now() + make_interval(secs => ${leaseMs} / 1000.0)
      from (select id from tasks where owner_boot = ${bootId} and status in ${ACTIVE}
            for update skip locked) free
      where t.id = free.id
      returning t.id
    )
    select t.id, t.attempt, t.status, exists (select 1 from renewed r where r.id = t.id) as renewed
    from tasks t where t.owner_boot = ${bootId} and t.status in ${ACTIVE}`;
}

/**
 * One lease the batch renewal skipped because its row was locked. A turn that streams without
 * pause (a delta flood) has its task row locked by one flush after another, so a skip on every
 * beat could let its lease run out under a live turn. This statement waits for the row, which is
 * safe because it locks that one row and nothing else: no cycle with a flush can form.
 */
export async function taskRenewLease(
  q: Queryable,
  taskId: string,
  bootId: string,
  leaseMs: number,
): Promise<boolean> {
  const rows = await taskWithStatusSets(q)`
    update tasks set lease_expires_at = now() + make_interval(secs => ${leaseMs} / 1000.0)
    where id = ${taskId} and owner_boot = ${bootId} and status in ${ACTIVE}
    returning id`;
  return rows.length > 0;
}
