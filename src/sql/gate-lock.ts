import type { Tx } from "../db/client.js";

/** Any fixed number works; every instance must use the same one. */
export const GATE_LOCK_KEY = 0x6761_7465; // "gate"

/**
 * The admission gate is exact across instances because every transaction that adds a queued task
 * or moves one to running takes this transaction-scoped lock first: counting and acting happen as
 * one serial step. Settling a task needs no lock (it only frees capacity). The lock is held for a
 * few milliseconds per submit or claim; measured, it is not the bottleneck (see bench/).
 *
 * The same statement turns bitmap scans off for the rest of the transaction (`set_config(...,
 * true)` is transaction-local): the gate's counts (running turns per tenant in the claim, a
 * tenant's unfinished turns for a new turn's queue position) read small partial indexes of tasks
 * that fill with dead entries between vacuums, one per turn that passed through them (a settled
 * turn leaves the running index, a claimed one the queued index). A bitmap heap scan visits the
 * heap page of every dead entry on every call and never marks it; an index scan marks it dead on
 * its first visit (the index's kill bit), and later scans skip it. `npx tsx bench/dead-entries.ts`
 * (50,000 settled turns, no vacuum, 20 running): the claim's count of running turns read 1,107
 * blocks (1.5–4 ms) on every bitmap scan; an index scan read 1,147 once, then 43 (0.03 ms). The
 * planner picks the bitmap scan when it expects few live rows; with 10^6 tasks and autovacuum's
 * default 20% threshold, the dead entries between two vacuums run to the hundreds of
 * thousands. The other statements of a gate transaction find their few rows by key or through the
 * same partial indexes (orphaned turns by lease or owner), where an index scan is as good.
 */
export async function gateLock(tx: Tx): Promise<void> {
  await tx`select pg_advisory_xact_lock(${GATE_LOCK_KEY}), set_config('enable_bitmapscan', 'off', true)`;
}
