import type { Queryable, Tx } from "../db/client.js";
import type { StoredEvent } from "./event-append.js";
import type { TaskRow } from "./task-row.js";
import { ACTIVE, UNFINISHED, taskWithStatusSets } from "./task-status-sets.js";

export interface TaskToInsert {
  sessionId: string;
  prompt: string;
  idempotencyKey: string | null;
  jumpsQueue: boolean;
  loadClass: string | null;
  timeoutMs: number;
  queueTimeoutMs: number;
  continuesTaskId: string | null;
  /** The task's id, chosen by the caller so later statements can name it before this one answers. */
  id?: string;
  /**
   * The submitting tenant: nothing is inserted unless the session is its own (docs/tenants.md).
   * Null: any session (the gateway's own continuations, an admin).
   */
  tenant: string | null;
  /** The turn's own webhook URL (tasks.webhook_url; the outbox trigger reads it). */
  webhookUrl?: string | null;
  /** The turn's W3C traceparent (tasks.trace_context), or none. */
  traceContext?: string | null;
}

/**
 * Inserts a queued task with its `task.queued` event, in one statement. The session row's update
 * takes the turn index and the event's seq together, so turn indexes are dense and ordered per
 * session and seqs stay gap-free (as in event-append.ts); one statement per admission instead of
 * two in the gate's transaction (bench/results/history.md). The event's data is `{position,
 * turnIndex, continuesTaskId}`: `position` is this task's place in the fair claim order
 * (sql/gate-status.ts, gateQueuePositions), counted without ranking the queue: the new task is the
 * last of its tenant's queue, so its level is its tenant's running plus queued turns, and ahead of
 * it are every queued task of its tenant and, of every other tenant U, the tasks of level at most
 * its own (all were admitted before it): min(queued of U, level + 1 - running of U). Counted over
 * the visible queue (earlier statements of this transaction included), plus this task, which the
 * statement's own snapshot cannot see; with one tenant, the queued tasks admitted before it plus
 * one. The task takes its session's tenant and instance group from the row the statement updates.
 * Returns null when the session does not exist or is archived (the caller then says which)
 * or is another tenant's (then it says SESSION_NOT_FOUND), or when the session already has a task
 * with this idempotency key (nothing is taken from the session then, so no turn index is skipped).
 */
export async function taskInsertQueued(
  tx: Tx,
  task: TaskToInsert,
): Promise<{ row: TaskRow; queued: StoredEvent } | null> {
  const [found] = await taskWithStatusSets(tx)<(TaskRow & { eventAt: Date; eventData: unknown })[]>`
    with turn as (
      update sessions set next_turn_index = next_turn_index + 1, last_seq = last_seq + 1,
        updated_at = now(), last_activity_at = now()
      where id = ${task.sessionId} and archived_at is null
        and (${task.tenant}::text is null or tenant = ${task.tenant})
        and (${task.idempotencyKey}::text is null or not exists (
          select 1 from tasks where session_id = ${task.sessionId} and idempotency_key = ${task.idempotencyKey}))
      returning next_turn_index - 1 as turn_index, last_seq as seq, tenant, instance_group
    ), inserted as (
      insert into tasks (id, session_id, tenant, instance_group, turn_index, status, prompt, idempotency_key, jumps_queue, load_class,
                         timeout_ms, queue_deadline_at, continues_task_id, first_seq, last_seq, webhook_url, trace_context)
      select coalesce(${task.id ?? null}::uuid, gen_random_uuid()), ${task.sessionId}, turn.tenant, turn.instance_group, turn.turn_index, 'queued',
             ${task.prompt}, ${task.idempotencyKey}, ${task.jumpsQueue}, ${task.loadClass}, ${task.timeoutMs},
             now() + make_interval(secs => ${task.queueTimeoutMs} / 1000.0), ${task.continuesTaskId},
             turn.seq, turn.seq, ${task.webhookUrl ?? null}::text, ${task.traceContext ?? null}::text
      from turn
      returning *
    ), tenants as (
      -- Each tenant's queued turns admitted before this one and its running turns, in one read.
      select t.tenant,
             count(*) filter (where t.status = 'queued' and t.queue_order < i.queue_order)::int as queued,
             count(*) filter (where t.status in ${ACTIVE})::int as running
      from tasks t, inserted i
      where t.status in ${UNFINISHED}
      group by t.tenant
    ), queued as (
      insert into events (session_id, seq, task_id, type, data)
      select i.session_id, i.first_seq, i.id, 'task.queued', jsonb_build_object(
               'position', 1 + coalesce((
                 select sum(case when q.tenant = i.tenant then q.queued
                                 else least(q.queued, greatest(0, coalesce(m.queued + m.running, 0) + 1 - q.running)) end)::int
                 from tenants q left join tenants m on m.tenant = i.tenant), 0),
               'turnIndex', i.turn_index, 'continuesTaskId', i.continues_task_id)
      from inserted i
      returning at, data
    )
    select inserted.*, queued.at as event_at, queued.data as event_data from inserted, queued`;
  if (!found) return null;
  const { eventAt, eventData, ...row } = found;
  return {
    row: row as TaskRow,
    queued: {
      sessionId: row.sessionId,
      seq: row.firstSeq!,
      taskId: row.id,
      type: "task.queued",
      at: eventAt,
      data: eventData,
    },
  };
}

/**
 * The task of a session that holds an idempotency key, if the session is `tenant`'s (null: any):
 * a task's tenant is its session's, so a key used in another tenant's session finds nothing here.
 */
export async function taskFindByIdempotencyKey(
  tx: Queryable,
  sessionId: string,
  key: string,
  tenant: string | null,
): Promise<TaskRow | null> {
  const [row] = await tx<TaskRow[]>`
    select * from tasks where session_id = ${sessionId} and idempotency_key = ${key}
      and (${tenant}::text is null or tenant = ${tenant})`;
  return row ?? null;
}
