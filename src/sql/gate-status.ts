import type { Queryable } from "../db/client.js";
import { ACTIVE, withSets } from "./task-status-sets.js";

/** Both counts in one statement; both use partial indexes. */
export async function countActiveAndQueued(q: Queryable): Promise<{ active: number; queued: number }> {
  const [row] = await withSets(q)<{ active: number; queued: number }[]>`
    select (select count(*)::int from tasks where status in ${ACTIVE}) as active,
           (select count(*)::int from tasks where status = 'queued') as queued`;
  return row;
}

/**
 * Live 1-based positions in the global queue (admission order), for the given tasks. Counting
 * the queued tasks admitted before each is exact and, with at most MOORING_MAX_QUEUED rows in the
 * partial index, cheap.
 */
export async function queuePositions(q: Queryable, taskIds: string[]): Promise<Map<string, number>> {
  if (taskIds.length === 0) return new Map();
  const rows = await q<{ id: string; position: number }[]>`
    select t.id, (select count(*)::int from tasks q where q.status = 'queued' and q.queue_order <= t.queue_order) as position
    from tasks t where t.id = any(${taskIds}::uuid[]) and t.status = 'queued'`;
  return new Map(rows.map((r) => [r.id, r.position]));
}

/** Every queued task with its position, in queue order (for `task.position` announcements). */
export async function listQueuePositions(
  q: Queryable,
  limit: number,
): Promise<{ id: string; sessionId: string; position: number; queuedAt: number | null }[]> {
  // queuedAt: the position its `task.queued` event told (the task's first event, a primary-key
  // lookup), so a task first seen by the announcer after it already moved is still announced.
  return q<{ id: string; sessionId: string; position: number; queuedAt: number | null }[]>`
    select q.id, q.session_id, q.position,
           (select (e.data->>'position')::int from events e
            where e.session_id = q.session_id and e.seq = q.first_seq) as queued_at
    from (select id, session_id, first_seq, row_number() over (order by queue_order)::int as position
          from tasks where status = 'queued' order by queue_order limit ${limit}) q
    order by q.position`;
}
