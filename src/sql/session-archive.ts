import type { Queryable } from "../db/client.js";

/**
 * Marks a session archived (the first archive's time stays). It is the archive transaction's first
 * statement, so it takes the session row lock before the task rows (the order every writer keeps).
 */
export async function sessionMarkArchived(q: Queryable, sessionId: string): Promise<void> {
  await q`update sessions set archived_at = coalesce(archived_at, now()), updated_at = now() where id = ${sessionId}`;
}
