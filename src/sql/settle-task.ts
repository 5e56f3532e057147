import type { Queryable } from "../db/client.js";
import type { StoredEvent } from "./append-events.js";
import type { TaskError, TaskResult, TaskRow, TaskStatus } from "./task-row.js";
import { ACTIVE, withSets } from "./task-status-sets.js";

export interface Settlement {
  status: Extract<TaskStatus, "completed" | "failed" | "cancelled" | "interrupted">;
  result?: TaskResult | null;
  error?: TaskError | null;
}

/**
 * The owner ends its running task. Fenced by owner boot and attempt: if the lease was taken over
 * (sweep, restart) or the task was already settled, nothing changes and null comes back, so a
 * stale writer never overwrites a newer state. Only the fields a settlement owns are written.
 */
export async function settleOwnedTask(
  q: Queryable,
  taskId: string,
  owner: { bootId: string; attempt: number },
  settlement: Settlement,
): Promise<TaskRow | null> {
  const [row] = await withSets(q)<TaskRow[]>`
    update tasks set
      status = ${settlement.status},
      result = ${settlement.result ? JSON.stringify(settlement.result) : null}::text::jsonb,
      error = ${settlement.error ? JSON.stringify(settlement.error) : null}::text::jsonb,
      finished_at = now(), lease_expires_at = null, version = version + 1,
      -- Where the agent's conversation stands now: the point a fork or a rollback branches at.
      agent_cursor = (select jsonb_build_object('agentSessionId', s.agent_session_id,
        'lastAssistantMessageId', s.last_assistant_message_id) from sessions s where s.id = tasks.session_id)
    where id = ${taskId} and owner_boot = ${owner.bootId} and attempt = ${owner.attempt}
      and status in ${ACTIVE}
    returning *`;
  return row ?? null;
}

/**
 * `settleOwnedTask` and its terminal event (`terminalEvent` of domain/task-events.ts, built in SQL:
 * `task.<status>` with `{status, result, error}`) in one statement, so a settlement can be sent as
 * one pipelined transaction (db/pipeline.ts) instead of a round trip per statement while it holds
 * the session and task rows (bench/results/history.md). The caller must hold the session row lock
 * (sql/lock-session.ts) taken earlier in the transaction: the event's seq is read from the
 * session's `last_seq` as this statement starts, and the lock guarantees nobody moves it before
 * the same statement sets it. Fenced exactly like `settleOwnedTask`: when the guard fails nothing
 * is written, no seq is taken, and null comes back.
 *
 * `inputAfter` (a running turn whose agent takes steered input, domain/turn-inputs.ts): the seq up
 * to which the turn has read the session's log for its `turn.input` events. When one of the task's
 * came after it, nothing is written and "input-pending" comes back: the turn sends it to its agent
 * as a follow-up prompt before it settles. The session row lock makes this the turn's close: a
 * steer takes that lock first, so it either committed before this statement (which sees its event)
 * or waits for this commit and then finds the task settled. So a turn nobody steered closes its
 * input without a statement of its own.
 */
export async function settleOwnedTaskWithEvent(
  q: Queryable,
  taskId: string,
  owner: { bootId: string; attempt: number },
  settlement: Settlement,
  input: { sessionId: string; after: number } | null = null,
): Promise<{ row: TaskRow; event: StoredEvent } | "input-pending" | null> {
  const [row] = await withSets(q)<
    (((TaskRow & { eventAt: Date; eventData: unknown }) | { id: null }) & { inputPending: boolean })[]
  >`
    with pending as (
      select ${input?.after ?? null}::bigint is not null and exists (
        select 1 from events e
        where e.session_id = ${input?.sessionId ?? null}::uuid and e.seq > ${input?.after ?? null}::bigint
          and e.task_id = ${taskId} and e.type = 'turn.input') as input_pending
    ), settled as (
      update tasks t set
        status = ${settlement.status},
        result = ${settlement.result ? JSON.stringify(settlement.result) : null}::text::jsonb,
        error = ${settlement.error ? JSON.stringify(settlement.error) : null}::text::jsonb,
        finished_at = now(), lease_expires_at = null, version = t.version + 1,
        first_seq = coalesce(t.first_seq, s.last_seq + 1), last_seq = s.last_seq + 1,
        -- Where the agent's conversation stands now: the point a fork or a rollback branches at.
        agent_cursor = jsonb_build_object('agentSessionId', s.agent_session_id,
          'lastAssistantMessageId', s.last_assistant_message_id)
      from sessions s
      where t.id = ${taskId} and s.id = t.session_id and t.owner_boot = ${owner.bootId}
        and t.attempt = ${owner.attempt} and t.status in ${ACTIVE}
        and not (select input_pending from pending)
      returning t.*
    ), head as (
      update sessions s set last_seq = settled.last_seq, last_activity_at = now(), updated_at = now()
      from settled where s.id = settled.session_id
    ), inserted as (
      insert into events (session_id, seq, task_id, type, data)
      select session_id, last_seq, id, 'task.' || status,
             jsonb_build_object('status', status, 'result', result, 'error', error)
      from settled
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
      type: `task.${task.status}`,
      at: eventAt,
      data: eventData,
    },
  };
}
