/**
 * A turn's end: the one statement that settles a running task with its terminal event, for every
 * path that ends one (the event log's flush, the continuation's transaction, the sweeper's
 * interruptions), and the one builder of a terminal event (also used when a queued task is
 * cancelled or expires, which never ran).
 */
import type { TerminalEventType } from "../contract/events.js";
import type { Queryable } from "../db/client.js";
import type { NewEvent, OwnerFence, StoredEvent } from "./event-append.js";
import type { TaskError, TaskResult, TaskRow, TaskStatus } from "./task-row.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

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
export const taskTerminalEvent = (task: Ending): NewEvent => ({
  taskId: task.id,
  type: `task.${task.status}` as TerminalEventType,
  data: { status: task.status, result: task.result ?? null, error: task.error ?? null },
});

/**
 * The owner ends its running task with its terminal event (`taskTerminalEvent`), in one statement, so
 * a settlement can ride in a pipelined transaction (db/pipeline.ts) instead of costing a round
 * trip per statement while it holds the session and task rows (bench/results/history.md). The row's
 * result and error are the event's: the event's data is sent once and both are written from it.
 *
 * Fenced by owner boot and attempt: if the lease was taken over (sweep, restart) or the task was
 * already settled, nothing is written, no seq is taken, and null comes back, so a stale writer
 * never overwrites a newer state. The caller must hold the session row lock (sql/session-lock.ts)
 * taken earlier in the transaction: the event's seq is read from the session's `last_seq` as this
 * statement starts, and the lock guarantees nobody moves it before the same statement sets it.
 *
 * `input` (a running turn whose agent takes steered input, domain/turn-inputs.ts): the seq up to
 * which the turn has read the session's log for its `turn.input` events. When one of the task's
 * came after it, nothing is written and "input-pending" comes back: the turn sends it to its agent
 * as a follow-up prompt before it settles. The session row lock makes this the turn's close: a
 * steer takes that lock first, so it either committed before this statement (which sees its event)
 * or waits for this commit and then finds the task settled. So a turn nobody steered closes its
 * input without a statement of its own.
 */
export async function taskSettleOwned(
  q: Queryable,
  owner: OwnerFence,
  settlement: Settlement,
): Promise<{ row: TaskRow; event: StoredEvent } | null>;
export async function taskSettleOwned(
  q: Queryable,
  owner: OwnerFence,
  settlement: Settlement,
  input: { sessionId: string; after: number } | null,
): Promise<{ row: TaskRow; event: StoredEvent } | "input-pending" | null>;
export async function taskSettleOwned(
  q: Queryable,
  owner: OwnerFence,
  settlement: Settlement,
  input: { sessionId: string; after: number } | null = null,
): Promise<{ row: TaskRow; event: StoredEvent } | "input-pending" | null> {
  const event = taskTerminalEvent({ id: owner.taskId, ...settlement });
  const [row] = await taskWithStatusSets(q)<
    (((TaskRow & { eventAt: Date; eventData: unknown }) | { id: null }) & { inputPending: boolean })[]
  >`
    with ending as (select ${JSON.stringify(event.data)}::text::jsonb as data),
    pending as (
      select ${input?.after ?? null}::bigint is not null and exists (
        select 1 from events e
        where e.session_id = ${input?.sessionId ?? null}::uuid and e.seq > ${input?.after ?? null}::bigint
          and e.task_id = ${owner.taskId} and e.type = 'turn.input') as input_pending
    ),
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
        and not (select input_pending from pending)
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
    select settled.*, inserted.at as event_at, inserted.data as event_data, pending.input_pending
    from pending left join (settled join inserted on inserted.task_id = settled.id) on true`;
  if (!row || row.id === null) return row?.inputPending ? "input-pending" : null;
  const { eventAt, eventData, inputPending: _, ...task } = row;
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
