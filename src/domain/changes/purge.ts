/**
 * Purging an archived session, one transaction: its row locked (waiting at most `lockWaitMs` when
 * `wait`, else passing over a locked one), then one statement deleting its rows from every table
 * (sql/purge-sessions.ts). Answers what it found (a session purged, missing, busy) and the
 * checkpoint repositories its refs were in, which the caller cleans after the commit.
 */
import type { Tx } from "../../db/client.js";
import { readCheckpointRepos } from "../../sql/checkpoints.js";
import {
  limitLockWait,
  lockArchivedForPurge,
  type PurgedRows,
  purgeSession,
} from "../../sql/purge-sessions.js";
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
  await limitLockWait(tx, lock.lockWaitMs);
  const found = await lockArchivedForPurge(tx, sessionId, lock.wait);
  if (found !== "locked") return { value: { found: { status: found }, repos: [] }, effects: {} };
  const repos = await readCheckpointRepos(tx, sessionId);
  const rows = await purgeSession(tx, sessionId);
  return { value: { found: { status: "purged", rows }, repos }, effects: { purged: [sessionId] } };
}
