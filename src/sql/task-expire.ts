import type { Queryable } from "../db/client.js";
import type { TaskRow } from "./task-row.js";

/**
 * Queued tasks past their queue deadline end `expired` with GATEWAY_BUSY / queue_timeout. The
 * partial index on queued tasks keeps this cheap enough to run on every poll tick.
 * `SKIP LOCKED` leaves a task that a claim is taking right now to that claim.
 */
export async function taskExpireQueued(q: Queryable): Promise<TaskRow[]> {
  return q<TaskRow[]>`
    with due as (
      select id from tasks where status = 'queued' and queue_deadline_at <= now()
      for update skip locked
    )
    update tasks t set status = 'expired', finished_at = now(), version = t.version + 1,
      error = ${JSON.stringify({
        code: "GATEWAY_BUSY",
        reason: "queue_timeout",
        message: "The gateway was busy and the turn waited in the queue past its deadline; submit it again.",
      })}::text::jsonb
    from due where t.id = due.id
    returning t.*`;
}
