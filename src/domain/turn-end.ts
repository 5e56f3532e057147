/**
 * A turn's end, as a change inside a transaction: the settlement of each turn with its terminal
 * event (sql/task-settle.ts: the statement the event log's flush sends for a turn that ends
 * normally), the events of the permission requests it withdraws before that, and, for an
 * interruption under MOORING_RECOVERY=continue, its continuation. The owner's interruption that
 * may continue (domain/turn-run.ts) and the sweeper's interruptions of orphans (domain/sweeper.ts)
 * both end their turns here.
 */
import type { Tx } from "../db/client.js";
import { eventAppend, type OwnerFence, type StoredEvent } from "../sql/event-append.js";
import { gateLock } from "../sql/gate-lock.js";
import { sessionLock } from "../sql/session-lock.js";
import type { PermissionRow } from "../sql/permission.js";
import { type Settlement, taskSettleOwned } from "../sql/task-settle.js";
import type { TaskRow } from "../sql/task-row.js";
import { type Effects, headsOf } from "./committer.js";
import type { Recovery } from "./recovery.js";

/** One turn to end: its owner (the fence) and how it ended. */
export interface TurnEnd {
  fence: OwnerFence;
  settlement: Settlement;
}

/**
 * Ends `ends` with their terminal events. The caller holds their session rows locked (and the gate
 * lock when the recovery policy may queue a continuation). A turn whose fence no longer holds is
 * left as it is (settled or taken over elsewhere). `withdrawn`: permission requests resolved in
 * this transaction, whose events go before their turn's terminal event. Nothing settled: no effects.
 */
export async function endTurnsIn(
  tx: Tx,
  recovery: Recovery,
  ends: TurnEnd[],
  withdrawn: PermissionRow[] = [],
): Promise<{ value: TaskRow[]; effects: Effects }> {
  // One statement per turn, sent together (postgres.js pipelines them on the transaction's
  // connection; Postgres runs them in this order): at startup after a crash that is hundreds of
  // round trips in one (bench/results/history.md, recovery).
  const ended = await Promise.all(
    ends.map(async ({ fence, settlement }) => {
      const before = withdrawn.filter((p) => p.taskId === fence.taskId);
      const resolved =
        before.length === 0
          ? []
          : await eventAppend(
              tx,
              before[0].sessionId,
              before.map((p) => ({
                taskId: fence.taskId,
                type: "permission.resolved" as const,
                data: { requestId: p.id, optionId: p.optionId, by: p.resolvedBy },
              })),
            );
      const settled = await taskSettleOwned(tx, fence, settlement);
      return { resolved, settled };
    }),
  );
  const rows = ended.flatMap(({ settled }) => (settled ? [settled.row] : []));
  if (rows.length === 0) return { value: rows, effects: {} };
  const events: StoredEvent[] = ended.flatMap(({ resolved, settled }) =>
    settled ? [...resolved, settled.event] : resolved,
  );
  events.push(
    ...(await recovery.afterInterrupted(
      tx,
      rows.filter((r) => r.status === "interrupted"),
    )),
  );
  // A slot is free (here and, through mooring_gate, on every instance); a continuation may be queued.
  const notify = { when: "afterCommit" as const, heads: headsOf(events), gate: true };
  return { value: rows, effects: { events, gateChanged: true, queueMoved: true, notify } };
}

/**
 * The owner's interruption with the recovery policy's continuation, admitted under the gate lock
 * like any turn. Null, with nothing written, when the fence no longer holds.
 */
export async function settleWithContinuationIn(
  tx: Tx,
  recovery: Recovery,
  sessionId: string,
  fence: OwnerFence,
  settlement: Settlement,
): Promise<{ value: TaskRow | null; effects: Effects }> {
  await gateLock(tx);
  // Session row before task row, the order the event log's flush takes them in.
  await sessionLock(tx, sessionId);
  const { value, effects } = await endTurnsIn(tx, recovery, [{ fence, settlement }]);
  return { value: value[0] ?? null, effects };
}
