import type { Tx } from "../db/client.js";

/** SQLSTATE of the refusal below: the session is running a turn and the submit said ifBusy=reject. */
export const SESSION_BUSY_SQLSTATE = "MG409";

/**
 * The ifBusy=reject rule, decided inside the admission's transaction so a pipelined admission
 * (db/pipeline.ts) needs no round trip: raises SESSION_BUSY_SQLSTATE, which aborts the
 * transaction, when the open session has a queued, running or cancelling task, unless the
 * idempotency key is already taken (the repeat then answers with its task, as an enqueue would).
 * Sent after the session row lock, so what it sees cannot change before the commit. A function
 * (migrations/0006) so that it is one prepared statement, like the queue check (gate-check.ts).
 * It is called only when the session is the submitting `tenant`'s (null: any): another tenant's
 * busy session must not answer SESSION_BUSY (existence does not leak; docs/tenants.md), and the
 * condition rides on this same statement, a primary-key read, instead of a read of its own.
 */
export function sessionRefuseIfBusy(
  q: Tx,
  sessionId: string,
  idempotencyKey: string | null,
  tenant: string | null,
): Promise<unknown> {
  return q`select mooring_refuse_if_session_busy(s.id, ${idempotencyKey}::text) from sessions s
    where s.id = ${sessionId}::uuid and (${tenant}::text is null or s.tenant = ${tenant})`;
}

export function sessionIsBusy(err: unknown): boolean {
  return (err as { code?: string })?.code === SESSION_BUSY_SQLSTATE;
}
