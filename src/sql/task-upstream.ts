import type { Queryable } from "../db/client.js";
import type { OwnerFence } from "./event-append.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

/** What `tasks.upstream` holds for a chained turn (driver `mooring`). */
export interface UpstreamColumn {
  taskId: string | null;
  position: number | null;
  queueDeadlineAt: string | null;
  retryAt?: string;
  /** Set once an interrupted turn's upstream task was cancelled (domain/upstream-orphans.ts). */
  released?: string;
}

/**
 * A running chained turn's upstream state. Written directly, not through the event log: it changes
 * a few times per turn (submitted, queue moves, started), and it must be durable before a kill -9
 * so the next boot can cancel the upstream task. Guarded by ownership like every turn write: a turn
 * that lost its task changes nothing. Marking the upstream task released may land after the
 * settlement (it is written beside it, not before), so that write is allowed on the owner's
 * settled row too. Only the task row is touched (no session row lock).
 */
export async function taskSaveUpstream(
  q: Queryable,
  fence: OwnerFence,
  upstream: UpstreamColumn,
): Promise<boolean> {
  const rows = await taskWithStatusSets(q)`
    update tasks set upstream = ${JSON.stringify(upstream)}::text::jsonb
    where id = ${fence.taskId} and owner_boot = ${fence.bootId} and attempt = ${fence.attempt}
      and (status in ${ACTIVE} or ${upstream.released !== undefined})
    returning id`;
  return rows.length > 0;
}
