/** Claiming queued work for this instance, with the `task.started` events in the same transaction. */
import type { Tx } from "../db/client.js";
import type { StoredEvent } from "../sql/append-events.js";
import { claimTasks } from "../sql/claim-tasks.js";
import { lockGate } from "../sql/gate-lock.js";
import type { TaskRow } from "../sql/task-row.js";
import type { Effects } from "./committer.js";
import type { Runtime } from "./runtime.js";

/** How many tasks this instance will take now (0 while shutting down): the worker says. */
export interface ClaimLimit {
  claimLimit(): number;
}

/** Must run with the gate lock held. The claim and its `task.started` events are one statement. */
export async function claimAndStart(
  tx: Tx,
  rt: Runtime,
  limit: number,
): Promise<{ rows: TaskRow[]; events: StoredEvent[]; heads: Map<string, number> }> {
  const claimed = await claimTasks(
    tx,
    {
      instanceId: rt.identity.instanceId,
      bootId: rt.identity.bootId,
      leaseMs: rt.config.leaseMs,
      group: rt.config.instanceGroup,
    },
    rt.config.maxActive,
    rt.tenants.limitsJson,
    limit,
  );
  const heads = new Map<string, number>();
  for (const { row, started } of claimed) heads.set(row.sessionId, started.seq);
  return { rows: claimed.map((c) => c.row), events: claimed.map((c) => c.started), heads };
}

/**
 * The worker's claim as one pipelined state change: the gate lock, then the claim. The gate lock is
 * held only while Postgres runs it (db/pipeline.ts). Nothing claimed, nothing set off.
 */
export function claimChange(rt: Runtime, limit: number) {
  return {
    statements: (q: Tx) => ({ gate: lockGate(q), claim: claimAndStart(q, rt, limit) }),
    outcome: ({
      claim,
    }: {
      claim: Awaited<ReturnType<typeof claimAndStart>>;
    }): { value: null; effects: Effects<"afterCommit"> } => ({
      value: null,
      effects:
        claim.rows.length === 0
          ? {}
          : {
              events: claim.events,
              notify: { when: "afterCommit", heads: claim.heads, gate: true },
              claimed: claim.rows,
              queueMoved: true,
            },
    }),
  };
}
