import type { Tx } from "../db/client.js";
import type { StoredEvent } from "./append-events.js";
import type { TaskRow } from "./task-row.js";

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
}

/**
 * Inserts a queued task and takes its turn index from the session in the same statement, so turn
 * indexes are dense and ordered per session. Returns null when the session does not exist or is
 * archived (the caller then says which), or when the session already has a task with this
 * idempotency key (nothing is taken from the session then, so no turn index is skipped).
 */
export async function insertTask(tx: Tx, task: TaskToInsert): Promise<TaskRow | null> {
  const [row] = await tx<TaskRow[]>`
    with turn as (
      update sessions set next_turn_index = next_turn_index + 1, updated_at = now(), last_activity_at = now()
      where id = ${task.sessionId} and archived_at is null
        and (${task.idempotencyKey}::text is null or not exists (
          select 1 from tasks where session_id = ${task.sessionId} and idempotency_key = ${task.idempotencyKey}))
      returning next_turn_index - 1 as turn_index
    )
    insert into tasks (id, session_id, turn_index, status, prompt, idempotency_key, jumps_queue, load_class,
                       timeout_ms, queue_deadline_at, continues_task_id)
    select coalesce(${task.id ?? null}::uuid, gen_random_uuid()), ${task.sessionId}, turn.turn_index, 'queued',
           ${task.prompt}, ${task.idempotencyKey}, ${task.jumpsQueue}, ${task.loadClass}, ${task.timeoutMs},
           now() + make_interval(secs => ${task.queueTimeoutMs} / 1000.0), ${task.continuesTaskId}
    from turn
    returning *`;
  return row ?? null;
}

/**
 * The `task.queued` event of a task inserted earlier in this transaction, with its place in the
 * global queue: `queuedEvent` (domain/task-events.ts) built in SQL, so that it needs nothing from
 * the insert's answer and goes out in the same round trip (bench/results/history.md). Seq
 * allocation as in append-events.ts (the session's `last_seq`, gap-free); the task's first/last
 * seq follow. Null when the task is not there (the insert did nothing) or no longer queued.
 */
export async function appendQueuedEvent(tx: Tx, taskId: string): Promise<StoredEvent | null> {
  const [row] = await tx<StoredEvent[]>`
    with t as (
      select id, session_id, turn_index, queue_order, continues_task_id from tasks
      where id = ${taskId} and status = 'queued'
    ), head as (
      update sessions s set last_seq = s.last_seq + 1, last_activity_at = now(), updated_at = now()
      from t where s.id = t.session_id
      returning s.last_seq as seq
    ), inserted as (
      insert into events (session_id, seq, task_id, type, data)
      select t.session_id, head.seq, t.id, 'task.queued', jsonb_build_object(
               'position', (select count(*)::int from tasks q where q.status = 'queued' and q.queue_order <= t.queue_order),
               'turnIndex', t.turn_index, 'continuesTaskId', t.continues_task_id)
      from t, head
      returning session_id, seq, task_id, type, at, data
    ), seqs as (
      update tasks set first_seq = coalesce(first_seq, i.seq), last_seq = i.seq
      from inserted i where tasks.id = i.task_id
    )
    select * from inserted`;
  return row ?? null;
}

export async function findTaskByIdempotencyKey(tx: Tx, sessionId: string, key: string): Promise<TaskRow | null> {
  const [row] = await tx<TaskRow[]>`
    select * from tasks where session_id = ${sessionId} and idempotency_key = ${key}`;
  return row ?? null;
}
