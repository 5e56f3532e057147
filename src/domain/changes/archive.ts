/**
 * Archiving a session, one transaction: the session marked archived, each open task cancelled
 * (changes/cancel.ts), and the archive itself declared (its warm agents close here; other
 * instances hear mooring_archived). Its notifications go inside the transaction, the one change
 * that does so: nothing polls for archived sessions on other instances (their warm agent and
 * checkpoint refs), so the notification is delivered at the commit or never, not lost after it;
 * an archive is too rare for the commit-time notify lock to matter. Answers how many tasks it
 * cancelled.
 */
import type { Tx } from "../../db/client.js";
import { sessionMarkArchived } from "../../sql/session-archive.js";
import { taskLockOpenOfSession } from "../../sql/task-cancel.js";
import type { Effects } from "../committer.js";
import { cancelTaskIn, mergeEffects } from "./cancel.js";

export async function archiveSessionIn(
  tx: Tx,
  sessionId: string,
): Promise<{ value: number; effects: Effects }> {
  await sessionMarkArchived(tx, sessionId);
  const open = await taskLockOpenOfSession(tx, sessionId);
  const changes = [];
  for (const task of open) changes.push(await cancelTaskIn(tx, task));
  const notify = { when: "inTransaction" as const, heads: new Map([[sessionId, -1]]), archived: [sessionId] };
  return {
    value: changes.length,
    effects: mergeEffects([...changes.map((c) => c.effects), { archived: [sessionId], notify }]),
  };
}
