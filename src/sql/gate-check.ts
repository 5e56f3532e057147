import type { Tx } from "../db/client.js";

/** SQLSTATE of the refusal below: the request would overfill the queue (HTTP 429). */
export const QUEUE_FULL_SQLSTATE = "MG429";

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The admission gate's queue limit, decided inside the transaction so that a pipelined submit
 * (db/pipeline.ts) needs no round trip to decide: when the task `taskId` was inserted by this
 * transaction and more than `maxQueued` tasks are now queued, raise QUEUE_FULL_SQLSTATE, which
 * aborts the transaction (its COMMIT becomes a ROLLBACK). Run with the gate lock held, after the
 * claim, like the count it replaces. `DO` takes no parameters, so both values are inlined: a uuid
 * the gateway generated and an integer from the configuration, each checked here.
 */
export function refuseIfQueueOverflows(q: Tx, taskId: string, maxQueued: number): Promise<unknown> {
  if (!uuid.test(taskId)) throw new Error(`not a uuid: ${taskId}`);
  if (!Number.isSafeInteger(maxQueued) || maxQueued < 0) throw new Error(`bad maxQueued: ${maxQueued}`);
  return q.unsafe(`
    do $$ begin
      if exists (select 1 from tasks where id = '${taskId}')
         and (select count(*) from tasks where status = 'queued') > ${maxQueued} then
        raise exception 'the queue is full' using errcode = '${QUEUE_FULL_SQLSTATE}';
      end if;
    end $$`);
}

export function isQueueFull(err: unknown): boolean {
  return (err as { code?: string })?.code === QUEUE_FULL_SQLSTATE;
}
