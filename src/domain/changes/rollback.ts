/**
 * Rolling back a session's last turns (docs/api.md, Fork and rollback), one transaction: the last
 * completed turns are marked `rolledBack` (nothing is deleted) and `session.rollback` is logged. It
 * leaves a `rewind` on the session that the next turn's driver applies to the agent's own
 * conversation (agents/driver.ts, ResumeCursor.rewind).
 */
import type { Rewind } from "../../db/schema.js";
import type { Tx } from "../../db/client.js";
import { errors, invalid } from "../../errors.js";
import { eventAppend } from "../../sql/event-append.js";
import { sessionReadBranchPoint } from "../../sql/session-fork.js";
import { sessionLock } from "../../sql/session-lock.js";
import {
  taskHasOpenTurn,
  taskKeptTurnBefore,
  taskLastCompletedTurns,
  taskMarkRolledBack,
} from "../../sql/task-rollback.js";
import { type Effects, headsOf } from "../committer.js";

/**
 * Roll back the last `turns` completed turns of an idle session: SESSION_BUSY while a turn is
 * queued or running, 400 when it has fewer. Every ended turn from the first dropped one on is
 * marked (a failed turn among them goes too), `session.rollback` marks the boundary in the log,
 * and the rewind points at the newest kept turn's end.
 */
export async function rollbackIn(
  tx: Tx,
  sessionId: string,
  turns: number,
): Promise<{ value: number[]; effects: Effects }> {
  await sessionLock(tx, sessionId);
  if (await taskHasOpenTurn(tx, sessionId)) throw errors.sessionBusyForRollback(sessionId);
  const last = await taskLastCompletedTurns(tx, sessionId, turns);
  if (last.length < turns) {
    throw invalid(
      `session ${sessionId} has ${last.length} completed turn${last.length === 1 ? "" : "s"} to roll back, not ${turns}`,
      "turns",
    );
  }
  const fromTurn = Math.min(...last);
  const branch = await sessionReadBranchPoint(tx, sessionId, fromTurn - 1);
  const kept = await taskKeptTurnBefore(tx, sessionId, fromTurn);
  const rewind: Rewind = { kind: "rollback", ...branch, turnIndex: kept };
  const dropped = await taskMarkRolledBack(tx, sessionId, fromTurn, rewind);
  const events = await eventAppend(tx, sessionId, [
    {
      taskId: null,
      type: "session.rollback",
      data: { fromTurn, toTurn: dropped[dropped.length - 1] ?? fromTurn, keptTurn: kept, turns: dropped },
    },
  ]);
  return {
    value: dropped,
    effects: { events, notify: { when: "afterCommit", heads: headsOf(events) } },
  };
}
