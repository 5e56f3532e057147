/**
 * Interrupting orphaned turns (a previous boot's, an expired lease's, this boot's at shutdown), one
 * transaction: the orphans are found and locked (sql/task-orphans.ts), their pending
 * permission requests resolved `restart` (nobody can answer them any more; their events go before
 * the terminal one), and each turn ends through the one settlement (domain/turn-end.ts), which
 * queues a continuation when the recovery policy says so. Answers the settled tasks.
 */
import type { Tx } from "../../db/client.js";
import { gateLock } from "../../sql/gate-lock.js";
import { taskOwnerOf, taskRestartSettlement } from "../../sql/task-orphans.js";
import { permissionResolvePendingOfTasks } from "../../sql/permission.js";
import type { TaskRow } from "../../sql/task-row.js";
import type { Recovery } from "../recovery.js";
import { endTurnsIn } from "../turn-end.js";

/** Finds and locks the orphans to interrupt (sql/task-orphans.ts). */
export type Orphans = (tx: Tx) => Promise<TaskRow[]>;

export async function interruptOrphansIn(tx: Tx, recovery: Recovery, orphans: Orphans) {
  if (recovery.needsGateLock) await gateLock(tx);
  const rows = await orphans(tx);
  const withdrawn = await permissionResolvePendingOfTasks(
    tx,
    rows.map((r) => r.id),
    "restart",
  );
  const ends = rows.map((row) => ({ fence: taskOwnerOf(row), settlement: taskRestartSettlement }));
  return endTurnsIn(tx, recovery, ends, withdrawn);
}
