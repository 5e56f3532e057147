import type { Tx } from "../db/client.js";
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
}

/**
 * Inserts a queued task and takes its turn index from the session in the same statement, so turn
 * indexes are dense and ordered per session. Returns null when the session does not exist or is
 * archived (the caller then says which).
 */
export async function insertTask(tx: Tx, task: TaskToInsert): Promise<TaskRow | null> {
  const [row] = await tx<TaskRow[]>`
    with turn as (
      update sessions set next_turn_index = next_turn_index + 1, updated_at = now(), last_activity_at = now()
      where id = ${task.sessionId} and archived_at is null
      returning next_turn_index - 1 as turn_index
    )
    insert into tasks (session_id, turn_index, status, prompt, idempotency_key, jumps_queue, load_class,
                       timeout_ms, queue_deadline_at, continues_task_id)
    select ${task.sessionId}, turn.turn_index, 'queued', ${task.prompt}, ${task.idempotencyKey},
           ${task.jumpsQueue}, ${task.loadClass}, ${task.timeoutMs},
           now() + make_interval(secs => ${task.queueTimeoutMs} / 1000.0), ${task.continuesTaskId}
    from turn
    returning *`;
  return row ?? null;
}

export async function findTaskByIdempotencyKey(tx: Tx, sessionId: string, key: string): Promise<TaskRow | null> {
  const [row] = await tx<TaskRow[]>`
    select * from tasks where session_id = ${sessionId} and idempotency_key = ${key}`;
  return row ?? null;
}
