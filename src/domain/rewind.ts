/**
 * Fork and rollback (docs/api.md, Fork and rollback): the state changes, each one transaction.
 *
 * A fork is a new session of the same tenant, workspace, agent and config whose history is its
 * source's up to a turn: the turns and their events are COPIED into the fork (sql/fork-session.ts),
 * so the fork's snapshot, event log, recap and any later fork of it read only its own rows. A
 * rollback marks the last completed turns `rolledBack` (nothing is deleted) and logs
 * `session.rollback`. Both leave a `rewind` on the session that the next turn's driver applies to
 * the agent's own conversation (agents/driver.ts, ResumeCursor.rewind): branch it at the kept
 * turn's last assistant message where the agent can, else start fresh with the carried history.
 */
import type { Rewind } from "../db/schema.js";
import type { Queryable, Tx } from "../db/client.js";
import { errors, invalid } from "../errors.js";
import { appendEvents, type StoredEvent } from "../sql/append-events.js";
import {
  copyForkHistory,
  copyTranscript,
  type ForkPoint,
  hasTurnAfter,
  insertForkedEvent,
  insertForkSession,
  isAtSourceHead,
  readBranchPoint,
  readForkPoint,
} from "../sql/fork-session.js";
import { lockSessionRow } from "../sql/lock-session.js";
import { hasOpenTurn, keptTurnBefore, lastCompletedTurns, markRolledBack } from "../sql/rollback-turns.js";
import type { Effects } from "./committer.js";
import { headsOf } from "./committer.js";

export interface ForkInput {
  atTurn?: number;
  title?: string;
  metadata?: Record<string, unknown>;
  idempotencyKey?: string;
}

/** The fork point `input.atTurn` names (or the last completed turn), or a 400 saying why not. */
async function forkPointOf(tx: Tx, sourceId: string, atTurn: number | undefined): Promise<ForkPoint> {
  const point = await readForkPoint(tx, sourceId, atTurn ?? null);
  if (!point) {
    throw atTurn === undefined
      ? invalid(`session ${sourceId} has no completed turn to fork at`, "atTurn")
      : invalid(
          `session ${sourceId} has no ended turn ${atTurn} (a fork is taken at a turn that ended)`,
          "atTurn",
        );
  }
  if (point.rolledBack)
    throw invalid(`turn ${point.turnIndex} of session ${sourceId} was rolled back`, "atTurn");
  return point;
}

/**
 * Fork `sourceId` (already checked visible to the caller). Answers the fork's id and whether this
 * call made it (a retried key answers the first fork).
 */
export async function forkSessionIn(
  tx: Tx,
  sourceId: string,
  input: ForkInput,
  sourceTitle: string | null,
): Promise<{ value: { id: string; created: boolean }; effects: Effects }> {
  const point = await forkPointOf(tx, sourceId, input.atTurn);
  const branch = await readBranchPoint(tx, sourceId, point.turnIndex);
  const atSourceHead = await isAtSourceHead(tx, sourceId, point.turnIndex, branch.agentSessionId);
  const rewind: Rewind = { kind: "fork", ...branch, turnIndex: point.turnIndex, atSourceHead };
  const { id, created } = await insertForkSession(tx, {
    sourceId,
    title: input.title ?? sourceTitle,
    metadata: input.metadata ?? {},
    idempotencyKey: input.idempotencyKey ?? null,
    point,
    rewind,
  });
  if (!created) return { value: { id, created }, effects: {} };
  const carried = await copyForkHistory(tx, id, sourceId, point);
  const forked = await insertForkedEvent(
    tx,
    id,
    { sessionId: sourceId, turnIndex: point.turnIndex, carriedTurns: carried.turns },
    carried.events,
  );
  if (branch.agentSessionId) await copyTranscript(tx, id, sourceId, branch.agentSessionId);
  const event: StoredEvent = {
    sessionId: id,
    seq: forked.seq,
    taskId: null,
    type: "session.forked",
    at: forked.at,
    data: { sessionId: sourceId, turnIndex: point.turnIndex, carriedTurns: carried.turns },
  };
  return { value: { id, created }, effects: { events: [event] } };
}

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
  await lockSessionRow(tx, sessionId);
  if (await hasOpenTurn(tx, sessionId)) throw errors.sessionBusyForRollback(sessionId);
  const last = await lastCompletedTurns(tx, sessionId, turns);
  if (last.length < turns) {
    throw invalid(
      `session ${sessionId} has ${last.length} completed turn${last.length === 1 ? "" : "s"} to roll back, not ${turns}`,
      "turns",
    );
  }
  const fromTurn = Math.min(...last);
  const branch = await readBranchPoint(tx, sessionId, fromTurn - 1);
  const kept = await keptTurnBefore(tx, sessionId, fromTurn);
  const rewind: Rewind = { kind: "rollback", ...branch, turnIndex: kept };
  const dropped = await markRolledBack(tx, sessionId, fromTurn, rewind);
  const events = await appendEvents(tx, sessionId, [
    {
      taskId: null,
      type: "session.rollback",
      data: { fromTurn, toTurn: dropped[dropped.length - 1] ?? fromTurn, keptTurn: kept, turns: dropped },
    },
  ]);
  return {
    value: dropped,
    effects: { events, notify: { when: "inTransaction", heads: headsOf(events) } },
  };
}

/**
 * Whether a fork's source has moved on past the fork point since the fork was made (a turn of it
 * started, here or on another instance): checked as the fork's first turn is about to branch the
 * source's agent conversation whole (ACP `session/fork`), which is right only while that
 * conversation still ends at the fork point. A `Rewind.atSourceHead` decided at the fork cannot
 * know what the source did after.
 */
export function forkSourceMovedOn(
  q: Queryable,
  forkedFrom: { sessionId: string; turnIndex: number },
): Promise<boolean> {
  return hasTurnAfter(q, forkedFrom.sessionId, forkedFrom.turnIndex);
}
