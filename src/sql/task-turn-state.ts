import type { Queryable } from "../db/client.js";
import type { Rewind } from "../db/schema.js";
import type { OwnerFence } from "./event-append.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

export interface CursorFields {
  agentSessionId: string | null;
  turnCount: number;
  lastAssistantMessageId: string | null;
  pastAgentSessionIds: string[];
  /** A fork's or rollback's pending rewind (db/schema.ts); absent or null once applied. */
  rewind?: Rewind | null;
}

/** How full the session's context window was at its last model call. */
export interface ContextUsage {
  inputTokens: number;
  contextWindow: number;
  percent: number;
}

/**
 * A running turn's resume cursor and context usage in one statement (either may be absent: its
 * columns are left as they are). Guarded by task ownership: a turn whose lease was taken over (or a
 * late callback of a killed agent) changes nothing, and false comes back. Only these fields are
 * written, so a concurrent archive or title change is never overwritten. The event log writes all
 * of a turn's session writes of one flush this way, only the latest of each kind, right after the
 * turn's events.
 */
export async function taskSaveTurnState(
  q: Queryable,
  sessionId: string,
  state: { cursor?: CursorFields; contextUsage?: ContextUsage },
  fence: OwnerFence,
): Promise<boolean> {
  const cursor = state.cursor ?? null;
  const rows = await taskWithStatusSets(q)`
    update sessions set
      agent_session_id = case when ${cursor !== null} then ${cursor?.agentSessionId ?? null} else agent_session_id end,
      turn_count = case when ${cursor !== null} then ${cursor?.turnCount ?? 0}::int else turn_count end,
      last_assistant_message_id = case when ${cursor !== null} then ${cursor?.lastAssistantMessageId ?? null}
        else last_assistant_message_id end,
      past_agent_session_ids = coalesce(${cursor ? JSON.stringify(cursor.pastAgentSessionIds) : null}::text::jsonb,
        past_agent_session_ids),
      -- A cursor saved without the rewind says the driver applied it (or never needed it).
      rewind = case when ${cursor !== null} then ${cursor?.rewind ? JSON.stringify(cursor.rewind) : null}::text::jsonb
        else rewind end,
      context_usage = coalesce(${state.contextUsage ? JSON.stringify(state.contextUsage) : null}::text::jsonb,
        context_usage),
      version = version + 1, updated_at = now()
    where id = ${sessionId} and exists (
      select 1 from tasks where id = ${fence.taskId} and owner_boot = ${fence.bootId}
        and attempt = ${fence.attempt} and status in ${ACTIVE})
    returning id`;
  return rows.length > 0;
}
