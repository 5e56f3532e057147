import type { Tx } from "../db/client.js";

/**
 * A savepoint around each submit of a batched admission (domain/admission.ts), so that a submit
 * the SQL refuses (MG409 busy, MG429 / MG430 queue full) or that fails otherwise rolls back alone,
 * and the batch's other submits commit in the same round trip.
 *
 * Why shaped so: a pipelined transaction (db/pipeline.ts) cannot look at an answer before it sends
 * the next statement, so "roll back this submit only if it failed" must be the same statements
 * either way. Before the submit, `savepoint submit` (S1). After it, `gateCloseSubmit` sends:
 *
 *   savepoint submit               S2; fails (transaction aborted) when the submit failed
 *   rollback to savepoint submit   the newest `submit`: S2 (undoes nothing) or, after a failure, S1
 *                                  (undoes the submit and ends the aborted state)
 *   release savepoint submit       S2 (S1 stays open, holding the submit's writes) or S1 (gone)
 *
 * A submit that went through thus keeps its writes (inside S1, which the next submit's savepoint
 * nests in and the COMMIT keeps); one that failed leaves nothing. Only the first statement here fails, and only after a failure; the caller
 * takes its answer as "failed" and ignores it. A submit that wrote holds one subtransaction id
 * (at most MAX_BATCH per transaction, within Postgres' per-backend cache of 64).
 */
export function gateOpenSubmit(q: Tx): Promise<unknown> {
  return q`savepoint submit`;
}

/** The three statements after a submit (see above), in order. */
export function gateCloseSubmit(q: Tx): {
  kept: Promise<unknown>;
  undo: Promise<unknown>;
  release: Promise<unknown>;
} {
  const kept = q`savepoint submit`;
  const undo = q`rollback to savepoint submit`;
  const release = q`release savepoint submit`;
  return { kept, undo, release };
}
