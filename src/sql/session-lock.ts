import type { Tx } from "../db/client.js";

/**
 * Lock order is session row, then task row, everywhere a transaction takes both: the event log's
 * flush takes them in that order (seq allocation, then the task's seq range), so a settlement or
 * an interrupting submit that took the task row first could deadlock against it.
 */
export async function sessionLock(tx: Tx, sessionId: string): Promise<void> {
  await tx`select 1 from sessions where id = ${sessionId} for update`;
}

/**
 * Several session rows in one statement, in id order: `FOR UPDATE` locks rows as the sorted rows
 * come out, and id order is the order the event log's flush takes them in.
 */
export async function sessionLockMany(tx: Tx, sessionIds: string[]): Promise<void> {
  await tx`select 1 from sessions where id = any(${sessionIds}::uuid[]) order by id for update`;
}
