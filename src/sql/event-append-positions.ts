import type { Tx } from "../db/client.js";
import type { StoredEvent } from "./event-append.js";

/**
 * Appends `task.position` events for tasks of one session that are still queued, and for no other.
 * The caller locks the session row first, in a statement of its own (sql/session-lock.ts): every
 * move out of `queued` (claim, cancel, expiry, archive) writes its event under that same row lock
 * after changing the status, so the status read by this statement (a fresh snapshot, taken after
 * the lock) is either still `queued` (and this event goes in before theirs) or already moved on
 * (and nothing is written). A position is therefore never announced after a task started or
 * ended. The task rows are only read, never locked: a claim's SKIP LOCKED would pass over a locked
 * head of the queue.
 *
 * One statement (the filter, gap-free seq allocation as in event-append.ts, the insert), so the
 * announcement can be sent as one pipelined transaction with the lock (db/pipeline.ts) instead of
 * holding the session row across round trips (bench/results/history.md). Position events do not
 * touch the task rows' seq range, as in event-append.ts.
 */
export async function eventAppendPositions(
  tx: Tx,
  sessionId: string,
  positions: { taskId: string; position: number }[],
): Promise<StoredEvent[]> {
  if (positions.length === 0) return [];
  const doc = JSON.stringify(positions.map((p, i) => ({ t: p.taskId, p: p.position, o: i })));
  return tx<StoredEvent[]>`
    with input as (
      select (e->>'t')::uuid as task_id, (e->>'p')::int as position, (e->>'o')::int as ord
      from jsonb_array_elements(${doc}::text::jsonb) e
    ), still as (
      select i.task_id, i.position, row_number() over (order by i.ord) as k
      from input i join tasks t on t.id = i.task_id and t.session_id = ${sessionId} and t.status = 'queued'
    ), head as (
      update sessions s set last_seq = s.last_seq + n.n, last_activity_at = now(), updated_at = now()
      from (select count(*) as n from still) n
      where s.id = ${sessionId} and n.n > 0
      returning s.last_seq, n.n
    ), inserted as (
      insert into events (session_id, seq, task_id, type, data)
      select ${sessionId}, head.last_seq - head.n + still.k, still.task_id, 'task.position',
             jsonb_build_object('position', still.position)
      from still, head
      returning session_id, seq, task_id, type, at, data
    )
    select * from inserted order by seq`;
}
