import type { Tx } from "../db/client.js";

/** SQLSTATE of the refusal below: the request would overfill the queue (HTTP 429). */
export const QUEUE_FULL_SQLSTATE = "MG429";

/**
 * The admission gate's queue limit, decided inside the transaction so that a pipelined submit
 * (db/pipeline.ts) needs no round trip to decide: when one of `taskIds` was inserted by this
 * transaction and more than `maxQueued` tasks are now queued, raise QUEUE_FULL_SQLSTATE, which
 * aborts the transaction (its COMMIT becomes a ROLLBACK). Run with the gate lock held, after the
 * claim, like the count it replaces. The check is a function (migrations/0002) so that it is one
 * prepared statement; the DO block it replaces was parsed and compiled on every submit.
 */
export function refuseIfQueueOverflows(q: Tx, taskIds: string[], maxQueued: number): Promise<unknown> {
  return q`select mooring_refuse_if_queue_overflows(${taskIds}::uuid[], ${maxQueued}::int)`;
}

export function isQueueFull(err: unknown): boolean {
  return (err as { code?: string })?.code === QUEUE_FULL_SQLSTATE;
}
