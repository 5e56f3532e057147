import type { Queryable } from "../db/client.js";
import { TERMINAL, taskWithStatusSets } from "./task-status-sets.js";

export interface UpstreamOrphan {
  id: string;
  agent: string;
  upstreamTaskId: string;
}

/**
 * Ended chained turns whose upstream task was not let go of yet (the driver marks it released when
 * it saw the upstream task end or its cancel accepted; a turn whose gateway died, or that lost its
 * upstream, never could), oldest first. The partial index tasks_upstream_orphans_idx holds exactly these rows (the
 * condition is repeated verbatim so the planner uses it), so the periodic look is cheap however
 * many tasks there are.
 */
export async function taskListUpstreamOrphans(q: Queryable, limit: number): Promise<UpstreamOrphan[]> {
  return taskWithStatusSets(q)<UpstreamOrphan[]>`
    select t.id, s.agent, t.upstream->>'taskId' as upstream_task_id
    from tasks t join sessions s on s.id = t.session_id
    where t.status in ${TERMINAL}
      and t.upstream->>'taskId' is not null and t.upstream->>'released' is null
    order by t.finished_at limit ${limit}`;
}

/** Marks an orphan's upstream task as let go of, so it leaves the index. */
export async function taskMarkUpstreamReleased(q: Queryable, taskId: string): Promise<void> {
  await q`
    update tasks set upstream = upstream || jsonb_build_object('released', now())
    where id = ${taskId}`;
}
