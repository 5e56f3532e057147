/**
 * Steered input (docs/api.md, Steering a running turn): a `turn.input` event in the session's log
 * is the durable record of text a client added to a running turn; the instance running the turn
 * reads it from there (domain/turn-inputs.ts). The fence between a steer and the end of the turn is
 * the turn's settlement, which refuses to settle past a `turn.input` it has not read
 * (sql/task-settle.ts), or, for a turn that closes its input before that, `tasks.input_closed_at`:
 * the steer locks the task row and needs it null, the turn sets it (taking the same row lock) before
 * its last read, so every steer that was accepted is read.
 */
import type { Queryable, Tx } from "../db/client.js";
import type { OwnerFence } from "./event-append.js";
import type { TaskStatus } from "./task-row.js";

/** The running turn's state as a steer sees it, under the task row's lock (the session row is locked first). */
export async function taskLockForInput(
  tx: Tx,
  taskId: string,
): Promise<{ status: TaskStatus; inputClosed: boolean } | null> {
  // FOR UPDATE: a concurrent close (taskCloseInput) waits for this transaction, and then reads
  // the event it appends; a close that came first makes this read see input_closed_at set.
  const [row] = await tx<{ status: TaskStatus; inputClosed: boolean }[]>`
    select status, input_closed_at is not null as input_closed from tasks where id = ${taskId} for update`;
  return row ?? null;
}

export interface TurnInputEvent {
  seq: number;
  text: string;
  at: Date;
}

/**
 * The `turn.input` with this idempotency key, if one was stored (a retried steer): the task's
 * (`taskId`), or any of the session's (null: a retried submit with ifBusy steer).
 */
export async function taskFindInputByKey(
  q: Queryable,
  sessionId: string,
  taskId: string | null,
  idempotencyKey: string,
): Promise<(TurnInputEvent & { taskId: string }) | null> {
  // A scan of the session's events (the key's leading column); steers with a key are rare and a
  // session's log is bounded by its retention.
  const [row] = await q<(TurnInputEvent & { taskId: string })[]>`
    select seq, data->>'text' as text, at, task_id from events
    where session_id = ${sessionId} and type = 'turn.input'
      and (${taskId}::uuid is null or task_id = ${taskId}::uuid)
      and data->>'idempotencyKey' = ${idempotencyKey}
    order by seq limit 1`;
  return row ? { ...row, seq: Number(row.seq) } : null;
}

/** The session's running task, if `tenant` (null: any) may see the session (ifBusy steer). */
export async function taskReadRunningOfSession(
  q: Queryable,
  sessionId: string,
  tenant: string | null,
): Promise<{ id: string } | null> {
  // One running task per session at most (the claim starts one at a time per session).
  const [row] = await q<{ id: string }[]>`
    select id from tasks
    where session_id = ${sessionId} and status = 'running' and input_closed_at is null
      and (${tenant}::text is null or tenant = ${tenant})
    limit 1`;
  return row ?? null;
}

/**
 * The task's `turn.input` events after `afterSeq`, oldest first, and `head`, the last seq of the
 * session's log that was scanned: the next read starts after it, so a poll reads each of a chatty
 * turn's events once, not all of them again (seqs of one session commit in order: the session
 * row's lock allocates them, so none below a visible one is still to come).
 */
export async function taskReadInputs(
  q: Queryable,
  sessionId: string,
  taskId: string,
  afterSeq: number,
): Promise<{ inputs: TurnInputEvent[]; head: number }> {
  const [row] = await q<{ head: number | null; inputs: TurnInputEvent[] | null }[]>`
    select max(seq) as head,
           json_agg(json_build_object('seq', seq, 'text', data->>'text', 'at', at) order by seq)
             filter (where task_id = ${taskId} and type = 'turn.input') as inputs
    from events where session_id = ${sessionId} and seq > ${afterSeq}`;
  return {
    head: row?.head === null || row?.head === undefined ? afterSeq : Number(row.head),
    inputs: (row?.inputs ?? []).map((r) => ({ seq: Number(r.seq), text: r.text, at: new Date(r.at) })),
  };
}

/**
 * The safety poll of one instance's running turns (notifications are hints): for each turn whose
 * session's log grew past the seq it has read, that log's head and whether any of the new events is
 * the turn's `turn.input`. One statement for all of them, each reading only its session's events
 * after the turn's seq through the (session_id, seq) key: it costs the same with no input at all,
 * where a read per turn would cost a statement each.
 */
export async function taskFindInputs(
  q: Queryable,
  turns: { sessionId: string; taskId: string; afterSeq: number }[],
): Promise<{ taskId: string; head: number; input: boolean }[]> {
  const rows = await q<{ taskId: string; head: number; input: boolean }[]>`
    select f.task_id, max(e.seq) as head, bool_or(e.task_id = f.task_id and e.type = 'turn.input') as input
    from unnest(${turns.map((t) => t.sessionId)}::uuid[], ${turns.map((t) => t.taskId)}::uuid[],
                ${turns.map((t) => t.afterSeq)}::bigint[]) as f(session_id, task_id, after_seq)
    join events e on e.session_id = f.session_id and e.seq > f.after_seq
    group by f.task_id`;
  return rows.map((r) => ({ taskId: r.taskId, head: Number(r.head), input: r.input === true }));
}

/** Whether the owner still runs its task (a settlement whose answer was lost: did it settle?). */
export async function taskStillRuns(q: Queryable, fence: OwnerFence): Promise<boolean> {
  const [row] = await q<{ runs: boolean }[]>`
    select exists (select 1 from tasks where id = ${fence.taskId} and owner_boot = ${fence.bootId}
      and attempt = ${fence.attempt} and status = 'running') as runs`;
  return row?.runs === true;
}

/**
 * The turn takes no more input: from this commit on a steer answers TASK_NOT_RUNNING. Takes the
 * task row's lock, so it waits for a steer in flight, whose event the caller's next read then sees.
 * Fenced like every write of the owner: a stale owner (the task taken over) changes nothing.
 */
export async function taskCloseInput(q: Queryable, fence: OwnerFence): Promise<void> {
  await q`
    update tasks set input_closed_at = coalesce(input_closed_at, now())
    where id = ${fence.taskId} and owner_boot = ${fence.bootId} and attempt = ${fence.attempt}`;
}
