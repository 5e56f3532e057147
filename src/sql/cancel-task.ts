import type { Queryable } from "../db/client.js";
import type { TaskRow } from "./task-row.js";

/**
 * A queued task is cancelled at once: nothing runs it yet, so no owner needs to agree. Guarded by
 * status so a task claimed in the meantime is left to the running path.
 */
export async function cancelQueuedTask(q: Queryable, taskId: string): Promise<TaskRow | null> {
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
export async function markTaskCancelling(q: Queryable, taskId: string): Promise<TaskRow | null> {
  const [row] = await q<TaskRow[]>`
    update tasks set status = 'cancelling', cancel_requested_at = now(), version = version + 1
    where id = ${taskId} and status = 'running'
    returning *`;
  return row ?? null;
}

/** The running (or cancelling) task of a session, if any. */
export async function findActiveTaskOfSession(q: Queryable, sessionId: string): Promise<TaskRow | null> {
  const [row] = await q<TaskRow[]>`
    select * from tasks where session_id = ${sessionId} and status in ('running', 'cancelling') limit 1`;
  return row ?? null;
}
