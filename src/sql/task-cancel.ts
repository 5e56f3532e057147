import type { Queryable } from "../db/client.js";
import type { TaskRow } from "./task-row.js";
import { CANCELLABLE, taskWithStatusSets } from "./task-status-sets.js";

/**
 * A queued task is cancelled at once: nothing runs it yet, so no owner needs to agree. Guarded by
 * status so a task claimed in the meantime is left to the running path.
 */
export async function taskCancelQueued(q: Queryable, taskId: string): Promise<TaskRow | null> {
  const [row] = await q<TaskRow[]>`
    update tasks set status = 'cancelled', finished_at = now(), cancel_requested_at = now(),
      error = ${JSON.stringify({ code: "CANCELLED", message: "The turn was cancelled before it started." })}::text::jsonb,
      version = version + 1
    where id = ${taskId} and status = 'queued'
    returning *`;
  return row ?? null;
}

/**
 * A running task becomes `cancelling`; its owner (on whichever instance) sees it through a
 * notification or its next heartbeat, stops the agent and settles `cancelled` itself.
 */
export async function taskMarkCancelling(q: Queryable, taskId: string): Promise<TaskRow | null> {
  const [row] = await q<TaskRow[]>`
    update tasks set status = 'cancelling', cancel_requested_at = now(), version = version + 1
    where id = ${taskId} and status = 'running'
    returning *`;
  return row ?? null;
}

/**
 * ifBusy=interrupt: the session's running task becomes `cancelling`; its owner is told on channel
 * mooring_cancel after the commit (the admission declares it), or reads it at its next heartbeat.
 * Nothing happens when the idempotency key is already taken
 * (the repeat answers with its earlier task and interrupts nothing). One statement, so a pipelined
 * admission sends it with the rest; sent after the session row lock, before the insert.
 */
export async function taskInterruptRunningOfSession(
  q: Queryable,
  sessionId: string,
  idempotencyKey: string | null,
  /** The submitting tenant: another tenant's turn is never touched (null: any, an admin). */
  tenant: string | null,
): Promise<TaskRow | null> {
  const [row] = await q<TaskRow[]>`
    update tasks set status = 'cancelling', cancel_requested_at = now(), version = version + 1
    where session_id = ${sessionId} and status = 'running'
      and (${tenant}::text is null or tenant = ${tenant})
      and (${idempotencyKey}::text is null or not exists (
        select 1 from tasks where session_id = ${sessionId} and idempotency_key = ${idempotencyKey}))
    returning *`;
  return row ?? null;
}

/**
 * The queued and running tasks of a session being archived, locked in queue order (the archive's
 * transaction holds the session row first, so this takes task rows after it, as every writer does).
 */
export async function taskLockOpenOfSession(q: Queryable, sessionId: string): Promise<TaskRow[]> {
  return taskWithStatusSets(q)<TaskRow[]>`
    select * from tasks where session_id = ${sessionId} and status in ${CANCELLABLE}
    order by queue_order for update`;
}
