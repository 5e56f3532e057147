import type { Queryable } from "../db/client.js";
import { TERMINAL, taskWithStatusSets } from "./task-status-sets.js";

/** One ended turn as a recap shows it: the prompt and the final reply, each cut to the budget. */
export interface RecapTurnRow {
  turnIndex: number;
  status: string;
  prompt: string;
  /** The final text of a completed turn; null when the turn ended otherwise or said nothing. */
  reply: string | null;
  /** Characters of the prompt and of the reply before `left` cut them. */
  promptChars: number;
  replyChars: number;
}

/**
 * A session's most recent ended turns that ran, newest first, for the recap of a fresh start
 * (domain/carry-over.ts). Walks tasks_session_idx backwards and stops after `limit` rows. Prompt
 * and reply come cut to `maxChars` in Postgres: a recap never holds more than its budget, and a
 * turn whose prompt was a pasted megabyte must not travel whole to be cut here. The running turn
 * (the one that needs the recap) is not terminal, so it is never part of it; rolled-back turns
 * are no longer part of the conversation (docs/api.md, Fork and rollback).
 */
export async function taskReadRecapTurns(
  q: Queryable,
  sessionId: string,
  limit: number,
  maxChars: number,
): Promise<RecapTurnRow[]> {
  return taskWithStatusSets(q)<RecapTurnRow[]>`
    select turn_index, status,
      left(prompt, ${maxChars}) as prompt, length(prompt) as prompt_chars,
      case when status = 'completed' then left(result->>'text', ${maxChars}) end as reply,
      coalesce(length(result->>'text'), 0) as reply_chars
    from tasks
    where session_id = ${sessionId} and status in ${TERMINAL} and started_at is not null
      and rolled_back_at is null
    order by turn_index desc
    limit ${limit}`;
}
