import type { Tx } from "../db/client.js";

/** SQLSTATE of the refusal below: the request would overfill the queue (HTTP 429). */
export const QUEUE_FULL_SQLSTATE = "MG429";
/** SQLSTATE of the refusal below: the request would overfill its tenant's queue (HTTP 429, TENANT_BUSY). */
export const TENANT_QUEUE_FULL_SQLSTATE = "MG430";

/**
 * The admission gate's queue limits, decided inside the transaction so that a pipelined submit
 * (db/pipeline.ts) needs no round trip to decide: when one of `taskIds` was inserted by this
 * transaction and more than `maxQueued` tasks are now queued in all, raise QUEUE_FULL_SQLSTATE;
 * else, when the tenant of one of them has more queued tasks than its limit, raise
 * TENANT_QUEUE_FULL_SQLSTATE (with one tenant, whose limit is the global one, only the first). Either aborts the transaction (its COMMIT becomes a ROLLBACK). Run with the
 * gate lock held, after the claim, like the count it replaces. `tenantLimits` is the directory's
 * `limitsJson` (domain/tenants.ts); a tenant missing from it has the global limits. The check is a
 * function (migrations/0008, after 0002) so that it is one prepared statement; the DO block it
 * replaced was parsed and compiled on every submit.
 */
export function gateRefuseIfQueueOverflows(
  q: Tx,
  taskIds: string[],
  maxQueued: number,
  tenantLimits: string,
): Promise<unknown> {
  return q`select mooring_refuse_if_queues_overflow(${taskIds}::uuid[], ${maxQueued}::int, ${tenantLimits}::text::jsonb)`;
}

export function gateIsQueueFull(err: unknown): boolean {
  return (err as { code?: string })?.code === QUEUE_FULL_SQLSTATE;
}

export function gateIsTenantQueueFull(err: unknown): boolean {
  return (err as { code?: string })?.code === TENANT_QUEUE_FULL_SQLSTATE;
}
