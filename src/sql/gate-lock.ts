import type { Tx } from "../db/client.js";

/** Any fixed number works; every instance must use the same one. */
export const GATE_LOCK_KEY = 0x6761_7465; // "gate"

/**
 * The admission gate is exact across instances because every transaction that adds a queued task
 * or moves one to running takes this transaction-scoped lock first: counting and acting happen as
 * one serial step. Settling a task needs no lock (it only frees capacity). The lock is held for a
 * few milliseconds per submit or claim; measured, it is not the bottleneck (see bench/).
 */
export async function gateLock(tx: Tx): Promise<void> {
  await tx`select pg_advisory_xact_lock(${GATE_LOCK_KEY})`;
}
