/**
 * Announcing a session's new queue positions (`task.position` events): a pipelined change, lock
 * then append (db/pipeline.ts), so the session row is held only while Postgres runs it. The
 * notification follows the commit (a hint).
 */
import type { Tx } from "../../db/client.js";
import { eventAppendPositions } from "../../sql/event-append-positions.js";
import { sessionLock } from "../../sql/session-lock.js";
import { type Answers, type Effects, headsOf } from "../committer.js";

export function announcePositionsChange(
  sessionId: string,
  positions: { taskId: string; position: number }[],
) {
  const statements = (q: Tx) => ({
    session: sessionLock(q, sessionId),
    events: eventAppendPositions(q, sessionId, positions),
  });
  return {
    statements,
    outcome: ({
      events,
    }: Answers<ReturnType<typeof statements>>): { value: null; effects: Effects<"afterCommit"> } => ({
      value: null,
      effects: { events, notify: { when: "afterCommit", heads: headsOf(events), gate: false } },
    }),
  };
}
