/**
 * Purging an archived session, one transaction: its row locked (waiting at most `lockWaitMs` when
 * `wait`, else passing over a locked one), then one statement deleting its rows from every table
 * (sql/session-purge.ts). Answers what it found (a session purged, missing, busy) and the
 * checkpoint repositories its refs were in, which the caller cleans after the commit.
 */
import type { Tx } from "../../db/client.js";
import { checkpointReadRepos } from "../../sql/checkpoint.js";
import {
  sessionLimitLockWait,
  sessionLockArchivedForPurge,
  type PurgedRows,
  sessionPurge,
} from "../../sql/session-purge.js";
import type { Effects } from "../committer.js";

/** What the purge found; `skipped` when it does not wait and the session's row is locked. */
export type PurgeFound =
  | { status: "purged"; rows: PurgedRows }
  | { status: "missing" }
  | { status: "busy" }
  | { status: "skipped" };

export async function purgeSessionIn(
  tx: Tx,
  sessionId: string,
  lock: { wait: boolean; lockWaitMs: number },
): Promise<{ value: { found: PurgeFound; repos: { gitDir: string; store: string }[] }; effects: Effects }> {
  await sessionLimitLockWait(tx, lock.lockWaitMs);
  const found = await sessionLockArchivedForPurge(tx, sessionId, lock.wait);
  if (found !== "locked") return { value: { found: { status: found }, repos: [] }, effects: {} };
  const repos = await checkpointReadRepos(tx, sessionId);
  const rows = await sessionPurge(tx, sessionId);
  return { value: { found: { status: "purged", rows }, repos }, effects: { purged: [sessionId] } };
}
