import type { Queryable } from "../db/client.js";
import { ACTIVE, UNFINISHED, taskWithStatusSets } from "./task-status-sets.js";

/** Both counts in one statement; both use partial indexes. */
export async function gateCountActiveAndQueued(q: Queryable): Promise<{ active: number; queued: number }> {
  const [row] = await taskWithStatusSets(q)<{ active: number; queued: number }[]>`
    select (select count(*)::int from tasks where status in ${ACTIVE}) as active,
           (select count(*)::int from tasks where status = 'queued') as queued`;
  return row;
}

/**
 * Live 1-based positions under the fair claim's order (sql/task-claim.ts), for the given tasks.
 * A queued task's level is the running turns of its tenant plus the queued turns of its tenant
 * admitted before it: the running count its tenant would have when it is picked. Tasks ahead of
 * it are those with a smaller (level, queue_order). An estimate (docs/api.md, Queue positions):
 * it moves when running counts change, and it leaves out the session rule (one running turn per
 * session) and tenants held at their own limit. With one tenant it is the admission order, as
 * before tenants existed. At most MOORING_MAX_QUEUED rows are ranked.
 */
export async function gateQueuePositions(q: Queryable, taskIds: string[]): Promise<Map<string, number>> {
  if (taskIds.length === 0) return new Map();
  const rows = await fairQueue(q, taskIds, taskIds.length);
  return new Map(rows.map((r) => [r.id, r.position]));
}

/** Every queued task with its position, in that order, up to `limit` (for `task.position` announcements). */
export function gateListQueuePositions(
  q: Queryable,
  limit: number,
): Promise<{ id: string; sessionId: string; position: number; queuedAt: number | null }[]> {
  return fairQueue(q, null, limit);
}

/** The queue in the fair order, the first `limit` of it (of `taskIds` only, when given). */
function fairQueue(
  q: Queryable,
  taskIds: string[] | null,
  limit: number,
): Promise<{ id: string; sessionId: string; position: number; queuedAt: number | null }[]> {
  // queuedAt: the position its `task.queued` event told (the task's first event, a primary-key
  // lookup), so a task first seen by the announcer after it already moved is still announced.
  return taskWithStatusSets(q)<
    { id: string; sessionId: string; position: number; queuedAt: number | null }[]
  >`
    with active as (
      select tenant, count(*)::int as n from tasks where status in ${ACTIVE} group by tenant
    ), ranked as (
      select t.id, t.session_id, t.first_seq, t.queue_order,
             coalesce(a.n, 0) + row_number() over (partition by t.tenant order by t.queue_order) - 1 as level
      from tasks t left join active a on a.tenant = t.tenant
      where t.status = 'queued'
    ), ordered as (
      select id, session_id, first_seq, row_number() over (order by level, queue_order)::int as position from ranked
    )
    select o.id, o.session_id, o.position,
           (select (e.data->>'position')::int from events e
            where e.session_id = o.session_id and e.seq = o.first_seq) as queued_at
    from ordered o
    where ${taskIds}::uuid[] is null or o.id = any(${taskIds}::uuid[])
    order by o.position
    limit ${limit}`;
}

/**
 * Running (with cancelling) and queued turns per tenant, of the given tenants or of every tenant
 * with any (null). One pass over the active and queued rows, which the gate keeps few.
 */
export async function gateCountByTenant(
  q: Queryable,
  tenants: string[] | null,
): Promise<Map<string, { active: number; queued: number }>> {
  const rows = await taskWithStatusSets(q)<{ tenant: string; active: number; queued: number }[]>`
    select tenant,
           count(*) filter (where status in ${ACTIVE})::int as active,
           count(*) filter (where status = 'queued')::int as queued
    from tasks
    where status in ${UNFINISHED}
      and (${tenants}::text[] is null or tenant = any(${tenants}::text[]))
    group by tenant`;
  return new Map(rows.map((r) => [r.tenant, { active: r.active, queued: r.queued }]));
}
