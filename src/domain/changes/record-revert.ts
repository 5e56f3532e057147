/**
 * Recording a workspace revert (domain/checkpoints.ts) once its files are restored: the
 * `session.reverted` event, its session's subscribers told after the commit.
 */
import type { Tx } from "../../db/client.js";
import { eventAppend } from "../../sql/event-append.js";
import { type Effects, headsOf } from "../committer.js";

export async function recordRevertIn(
  tx: Tx,
  sessionId: string,
  revert: Record<string, unknown>,
): Promise<{ value: null; effects: Effects }> {
  const events = await eventAppend(tx, sessionId, [
    { taskId: null, type: "session.reverted", data: revert },
  ]);
  return { value: null, effects: { events, notify: { when: "afterCommit", heads: headsOf(events) } } };
}
