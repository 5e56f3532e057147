import type { EventType } from "../contract/events.js";
import type { Queryable } from "../db/client.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

export interface NewEvent {
  taskId: string | null;
  type: EventType;
  /** What clients see (previews already cut). */
  data: unknown;
  /** Full payload behind a preview, or null. */
  payload?: unknown;
}

export interface StoredEvent {
  sessionId: string;
  seq: number;
  taskId: string | null;
  type: string;
  at: Date;
  data: unknown;
}

/** Only the current owner of a running task may add its events (a zombie's late events are dropped). */
export interface OwnerFence {
  taskId: string;
  bootId: string;
  attempt: number;
}

/**
 * Appends events to one session's log with gap-free seqs, in one statement:
 * - the session row's `last_seq` is the allocator; updating it locks the row, so concurrent writers
 *   of one session serialize and seqs never collide or skip (a rolled-back transaction leaves no
 *   gap because its increment rolls back with it);
 * - all events of a flush go in as one JSON array (one round trip however many events);
 * - the task's first/last seq follow in the same statement (except for `task.position`, see below);
 * - with a fence, nothing happens unless the writer still owns the task.
 * Returns the stored events in seq order (empty when fenced out).
 */
export async function eventAppend(
  q: Queryable,
  sessionId: string,
  events: NewEvent[],
  fence?: OwnerFence,
): Promise<StoredEvent[]> {
  if (events.length === 0) return [];
  const n = events.length;
  const doc = JSON.stringify(
    events.map((e) => ({ t: e.taskId, y: e.type, d: e.data, p: e.payload ?? null })),
  );
  const rows = await taskWithStatusSets(q)<StoredEvent[]>`
    with head as (
      update sessions set last_seq = last_seq + ${n}, last_activity_at = now(), updated_at = now()
      where id = ${sessionId}
        and (${fence ? fence.taskId : null}::uuid is null or exists (
          select 1 from tasks
          where id = ${fence ? fence.taskId : null}::uuid and owner_boot = ${fence ? fence.bootId : null}::uuid
            and attempt = ${fence ? fence.attempt : 0} and status in ${ACTIVE}))
      returning last_seq
    ), input as (
      select e.value as ev, e.ord from jsonb_array_elements(${doc}::text::jsonb) with ordinality as e(value, ord)
    ), inserted as (
      insert into events (session_id, seq, task_id, type, data, payload)
      select ${sessionId}, head.last_seq - ${n} + input.ord, (ev->>'t')::uuid, ev->>'y', ev->'d',
             nullif(ev->'p', 'null'::jsonb)
      from head, input
      returning session_id, seq, task_id, type, at, data
    ), task_seqs as (
      update tasks t set first_seq = coalesce(t.first_seq, s.min_seq), last_seq = s.max_seq
      -- task.position announcements of queued tasks do not touch the task row: their writer (the
      -- batched log) would row-lock queued tasks, and the claim's SKIP LOCKED would then pass over
      -- the head of the queue and start a later task first (FIFO broken; found by test/changes/gate.test.ts).
      from (select task_id, min(seq) as min_seq, max(seq) as max_seq from inserted
            where task_id is not null and type <> 'task.position' group by task_id) s
      -- The array condition makes the tasks a primary-key lookup: planned from the join alone
      -- (estimated at 100 rows, as any set-returning function is), it was a sequential scan of
      -- every task on each append once the table held a few thousand (bench/results/history.md).
      where t.id = s.task_id
        and t.id = any(array(select task_id from inserted where task_id is not null and type <> 'task.position'))
    )
    select * from inserted order by seq`;
  return rows;
}
