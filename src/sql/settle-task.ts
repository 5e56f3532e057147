/**
 * A turn's end: the one statement that settles a running task with its terminal event, for every
 * path that ends one (the event log's flush, the continuation's transaction, the sweeper's
 * interruptions), and the one builder of a terminal event (also used when a queued task is
 * cancelled or expires, which never ran).
 */
import type { TerminalEventType } from "../contract/events.js";
import type { Queryable } from "../db/client.js";
import type { NewEvent, OwnerFence, StoredEvent } from "./append-events.js";
import type { TaskError, TaskResult, TaskRow, TaskStatus } from "./task-row.js";
import { ACTIVE, withSets } from "./task-status-sets.js";

export interface Settlement {
  status: Extract<TaskStatus, "completed" | "failed" | "cancelled" | "interrupted">;
  result?: TaskResult | null;
  error?: TaskError | null;
}

/** What ends a task: its terminal status with its result or error (a settled row qualifies). */
export interface Ending {
  id: string;
  status: TaskStatus;
  result?: TaskResult | null;
  error?: TaskError | null;
}

/** `task.completed`, `task.failed`, ... with the task's result or error (docs/api.md, Streaming). */
export const terminalEvent = (task: Ending): NewEvent => ({
  taskId: task.id,
  type: `task.${task.status}` as TerminalEventType,
  data: { status: task.status, result: task.result ?? null, error: task.error ?? null },
});

/**
 * The owner ends its running task with its terminal event (`terminalEvent`), in one statement, so
 * a settlement can ride in a pipelined transaction (db/pipeline.ts) instead of costing a round
 * trip per statement while it holds the session and task rows (bench/results/history.md). The row's
 * result and error are the event's: the event's data is sent once and both are written from it.
 *
 * Fenced by owner boot and attempt: if the lease was taken over (sweep, restart) or the task was
 * already settled, nothing is written, no seq is taken, and null comes back, so a stale writer
 * never overwrites a newer state. The caller must hold the session row lock (sql/lock-session.ts)
 * taken earlier in the transaction: the event's seq is read from the session's `last_seq` as this
 * statement starts, and the lock guarantees nobody moves it before the same statement sets it.
 */
export async function settleOwnedTask(
  q: Queryable,
  owner: OwnerFence,
  settlement: Settlement,
): Promise<{ row: TaskRow; event: StoredEvent } | null> {
  const event = terminalEvent({ id: owner.taskId, ...settlement });
  const [row] = await withSets(q)<(TaskRow & { eventAt: Date; eventData: unknown })[]>`
    with ending as (select ${JSON.stringify(event.data)}::text::jsonb as data),
    settled as (
      update tasks t set
        status = ${settlement.status},
        result = nullif(ending.data->'result', 'null'::jsonb),
        error = nullif(ending.data->'error', 'null'::jsonb),
        finished_at = now(), lease_expires_at = null, version = t.version + 1,
        first_seq = coalesce(t.first_seq, s.last_seq + 1), last_seq = s.last_seq + 1,
        -- Where the agent's conversation stands now: the point a fork or a rollback branches at.
        agent_cursor = jsonb_build_object('agentSessionId', s.agent_session_id,
          'lastAssistantMessageId', s.last_assistant_message_id)
      from sessions s, ending
      where t.id = ${owner.taskId} and s.id = t.session_id and t.owner_boot = ${owner.bootId}
        and t.attempt = ${owner.attempt} and t.status in ${ACTIVE}
      returning t.*
    ), head as (
      update sessions s set last_seq = settled.last_seq, last_activity_at = now(), updated_at = now()
      from settled where s.id = settled.session_id
    ), inserted as (
      insert into events (session_id, seq, task_id, type, data)
      select settled.session_id, settled.last_seq, settled.id, ${event.type}, ending.data
      from settled, ending
      returning task_id, at, data
    )
    select settled.*, inserted.at as event_at, inserted.data as event_data
    from settled join inserted on inserted.task_id = settled.id`;
  if (!row) return null;
  const { eventAt, eventData, ...task } = row;
  return {
    row: task as TaskRow,
    event: {
      sessionId: task.sessionId,
      seq: task.lastSeq!,
      taskId: task.id,
      type: event.type,
      at: eventAt,
      data: eventData,
    },
  };
}
