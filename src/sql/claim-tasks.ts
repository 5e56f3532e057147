import type { Tx } from "../db/client.js";
import type { StoredEvent } from "./append-events.js";
import type { TaskRow } from "./task-row.js";
import { ACTIVE, withSets } from "./task-status-sets.js";

export interface Claimant {
  instanceId: string;
  bootId: string;
  leaseMs: number;
}

/** A claimed task with the `task.started` event appended for it in the same statement. */
export interface ClaimedTask {
  row: TaskRow;
  started: StoredEvent;
}

/**
 * Moves up to `limit` queued tasks to running for this instance. Called with the gate lock held,
 * so `maxActive - running` is exact. A task is runnable when its session has nothing running and
 * it is the head of its session's waiting turns (interrupting turns first, then admission order);
 * among runnable tasks the oldest admission wins (global FIFO), so a busy session's backlog never
 * holds up other sessions. `FOR UPDATE SKIP LOCKED` passes over rows another transaction is
 * cancelling right now instead of waiting on them.
 *
 * The `task.started` event of every claimed task goes in with the claim, in the same statement:
 * one round trip however many tasks are claimed, while the gate lock is held (appending them one
 * by one afterwards cost a round trip per task under the lock; bench/results/history.md). Each
 * claimed task is the only one of its session (the head rule), so the session's `last_seq`
 * allocates exactly one seq, gap-free as in append-events.ts, and the task's first/last seq are
 * set by the claim's own update. The event's data is `startedEvent` (domain/task-events.ts)
 * built in SQL: `{attempt, deadlineAt}` with deadlineAt as JavaScript's toISOString writes it.
 */
export async function claimTasks(tx: Tx, claimant: Claimant, maxActive: number, limit: number): Promise<ClaimedTask[]> {
  if (limit <= 0) return [];
  const rows = await withSets(tx)<(TaskRow & { eventSeq: number; eventAt: Date; eventData: unknown })[]>`
    with free as (
      select greatest(${maxActive} - count(*), 0) as n from tasks where status in ${ACTIVE}
    ), candidates as (
      select t.id, t.session_id from tasks t
      where t.status = 'queued'
        and not exists (select 1 from tasks r where r.session_id = t.session_id and r.status in ${ACTIVE})
        and not exists (
          select 1 from tasks h where h.session_id = t.session_id and h.status = 'queued' and h.id <> t.id
            and (h.jumps_queue, -h.queue_order) > (t.jumps_queue, -t.queue_order))
      order by t.queue_order
      limit least(${limit}, (select n from free))
      for update skip locked
    ), clock as (
      -- The moment of the claim, not now() (the start of a transaction that may have waited on the
      -- gate lock): startedAt then follows claim order, and the run deadline counts from the start.
      select clock_timestamp() as at
    ), heads as (
      update sessions s set last_seq = s.last_seq + 1, last_activity_at = now(), updated_at = now()
      from candidates c where s.id = c.session_id
      returning s.id as session_id, s.last_seq as seq
    ), claimed as (
      update tasks t set
        status = 'running', attempt = t.attempt + 1, started_at = k.at,
        deadline_at = k.at + make_interval(secs => t.timeout_ms / 1000.0),
        owner_instance = ${claimant.instanceId}, owner_boot = ${claimant.bootId},
        lease_expires_at = k.at + make_interval(secs => ${claimant.leaseMs} / 1000.0),
        first_seq = coalesce(t.first_seq, h.seq), last_seq = h.seq,
        version = t.version + 1
      from candidates c, clock k, heads h where t.id = c.id and h.session_id = c.session_id
      returning t.*
    ), started as (
      insert into events (session_id, seq, task_id, type, data)
      select c.session_id, c.last_seq, c.id, 'task.started',
             jsonb_build_object('attempt', c.attempt,
               'deadlineAt', to_char(c.deadline_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
      from claimed c
      returning task_id, seq, at, data
    )
    select c.*, e.seq as event_seq, e.at as event_at, e.data as event_data
    from claimed c join started e on e.task_id = c.id
    order by c.queue_order`;
  return rows.map(({ eventSeq, eventAt, eventData, ...row }) => ({
    row: row as TaskRow,
    started: { sessionId: row.sessionId, seq: eventSeq, taskId: row.id, type: "task.started", at: eventAt, data: eventData },
  }));
}
