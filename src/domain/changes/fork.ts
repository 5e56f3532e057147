/**
 * Forking a session (docs/api.md, Fork and rollback), one transaction: a new session of the same
 * tenant, workspace, agent and config whose history is its source's up to a turn. The turns and
 * their events are COPIED into the fork (sql/session-fork.ts), so the fork's snapshot, event log,
 * recap and any later fork of it read only its own rows. It leaves a `rewind` on the fork that the
 * next turn's driver applies to the agent's own conversation (agents/driver.ts,
 * ResumeCursor.rewind): branch it at the kept turn's last assistant message where the agent can,
 * else start fresh with the carried history.
 */
import type { Rewind } from "../../db/schema.js";
import type { Tx } from "../../db/client.js";
import { invalid } from "../../errors.js";
import type { StoredEvent } from "../../sql/event-append.js";
import {
  sessionCopyForkHistory,
  sessionCopyTranscript,
  type ForkPoint,
  sessionInsertForkedEvent,
  sessionInsertFork,
  sessionIsAtSourceHead,
  sessionReadBranchPoint,
  sessionReadForkPoint,
} from "../../sql/session-fork.js";
import type { Effects } from "../committer.js";

export interface ForkInput {
  atTurn?: number;
  title?: string;
  metadata?: Record<string, unknown>;
  idempotencyKey?: string;
}

/** The fork point `input.atTurn` names (or the last completed turn), or a 400 saying why not. */
async function forkPointOf(tx: Tx, sourceId: string, atTurn: number | undefined): Promise<ForkPoint> {
  const point = await sessionReadForkPoint(tx, sourceId, atTurn ?? null);
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
  const branch = await sessionReadBranchPoint(tx, sourceId, point.turnIndex);
  const atSourceHead = await sessionIsAtSourceHead(tx, sourceId, point.turnIndex, branch.agentSessionId);
  const rewind: Rewind = { kind: "fork", ...branch, turnIndex: point.turnIndex, atSourceHead };
  const { id, created } = await sessionInsertFork(tx, {
    sourceId,
    title: input.title ?? sourceTitle,
    metadata: input.metadata ?? {},
    idempotencyKey: input.idempotencyKey ?? null,
    point,
    rewind,
  });
  if (!created) return { value: { id, created }, effects: {} };
  const carried = await sessionCopyForkHistory(tx, id, sourceId, point);
  const forked = await sessionInsertForkedEvent(
    tx,
    id,
    { sessionId: sourceId, turnIndex: point.turnIndex, carriedTurns: carried.turns },
    carried.events,
  );
  if (branch.agentSessionId) await sessionCopyTranscript(tx, id, sourceId, branch.agentSessionId);
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
