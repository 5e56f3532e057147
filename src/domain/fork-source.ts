/**
 * Whether a fork's source has moved on past the fork point since the fork was made (a turn of it
 * started, here or on another instance): checked as the fork's first turn is about to branch the
 * source's agent conversation whole (ACP `session/fork`), which is right only while that
 * conversation still ends at the fork point. A `Rewind.atSourceHead` decided at the fork
 * (domain/changes/fork.ts) cannot know what the source did after.
 */
import type { Queryable } from "../db/client.js";
import { sessionHasTurnAfter } from "../sql/session-fork.js";

export function forkSourceMovedOn(
  q: Queryable,
  forkedFrom: { sessionId: string; turnIndex: number },
): Promise<boolean> {
  return sessionHasTurnAfter(q, forkedFrom.sessionId, forkedFrom.turnIndex);
}
