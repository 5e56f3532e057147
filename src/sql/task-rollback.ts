import type { Rewind } from "../db/schema.js";
import type { Tx } from "../db/client.js";
import { TERMINAL, UNFINISHED, taskWithStatusSets } from "./task-status-sets.js";

/** Whether the session has a turn queued, running or cancelling (its status `busy`). Under its row lock. */
export async function taskHasOpenTurn(q: Tx, sessionId: string): Promise<boolean> {
  const [row] = await taskWithStatusSets(q)<{ open: boolean }[]>`
    select exists (select 1 from tasks where session_id = ${sessionId} and status in ${UNFINISHED}) as open`;
  return row.open;
}

/**
 * The turn indexes of the last `n` completed turns still part of the conversation, newest first
 * (fewer when there are fewer). tasks_session_idx walked backwards.
 */
export async function taskLastCompletedTurns(q: Tx, sessionId: string, n: number): Promise<number[]> {
  const rows = await q<{ turnIndex: number }[]>`
    select turn_index from tasks
    where session_id = ${sessionId} and status = 'completed' and rolled_back_at is null
    order by turn_index desc limit ${n}`;
  return rows.map((r) => r.turnIndex);
}

/**
 * Marks every ended turn from `fromTurn` on rolled back (the dropped completed turns and any failed
 * or cancelled one between them), and stores the rewind the next turn applies. Nothing is deleted.
 * Answers the turn indexes marked, in order.
 */
export async function taskMarkRolledBack(
  q: Tx,
  sessionId: string,
  fromTurn: number,
  rewind: Rewind,
): Promise<number[]> {
  const rows = await taskWithStatusSets(q)<{ turnIndex: number }[]>`
    update tasks set rolled_back_at = now(), version = version + 1
    where session_id = ${sessionId} and turn_index >= ${fromTurn} and rolled_back_at is null
      and status in ${TERMINAL}
    returning turn_index`;
  await q`update sessions set rewind = ${JSON.stringify(rewind)}::text::jsonb, updated_at = now()
    where id = ${sessionId}`;
  return rows.map((r) => r.turnIndex).sort((a, b) => a - b);
}

/** The newest completed turn before `fromTurn` still in the conversation (-1: none); tasks_session_idx. */
export async function taskKeptTurnBefore(q: Tx, sessionId: string, fromTurn: number): Promise<number> {
  const [row] = await q<{ turnIndex: number }[]>`
    select turn_index from tasks where session_id = ${sessionId} and turn_index < ${fromTurn}
      and rolled_back_at is null and status = 'completed'
    order by turn_index desc limit 1`;
  return row?.turnIndex ?? -1;
}
