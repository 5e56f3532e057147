/** Claiming queued work for this instance, with the `task.started` events in the same transaction. */
import type { Config } from "../../config.js";
import type { Tx } from "../../db/client.js";
import type { StoredEvent } from "../../sql/event-append.js";
import { taskClaim } from "../../sql/task-claim.js";
import { gateLock } from "../../sql/gate-lock.js";
import type { TaskRow } from "../../sql/task-row.js";
import type { Answers, Effects } from "../committer.js";
import type { Identity } from "../runtime.js";
import type { TenantDirectory } from "../tenants.js";

/** How many tasks this instance will take now (0 while shutting down): the worker says. */
export interface ClaimLimit {
  claimLimit(): number;
}

/** What a claim needs: who claims, the lease and group, the gate's limits and the tenants' ones. */
export interface ClaimDeps {
  identity: Pick<Identity, "instanceId" | "bootId">;
  config: Pick<Config, "leaseMs" | "instanceGroup" | "maxActive">;
  tenants: Pick<TenantDirectory, "limitsJson">;
}

/** Must run with the gate lock held. The claim and its `task.started` events are one statement. */
export async function claimAndStart(
  tx: Tx,
  deps: ClaimDeps,
  limit: number,
): Promise<{ rows: TaskRow[]; events: StoredEvent[]; heads: Map<string, number> }> {
  const claimed = await taskClaim(
    tx,
    {
      instanceId: deps.identity.instanceId,
      bootId: deps.identity.bootId,
      leaseMs: deps.config.leaseMs,
      group: deps.config.instanceGroup,
    },
    deps.config.maxActive,
    deps.tenants.limitsJson,
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
export function claimChange(deps: ClaimDeps, limit: number) {
  const statements = (q: Tx) => ({ gate: gateLock(q), claim: claimAndStart(q, deps, limit) });
  return {
    statements,
    outcome: ({
      claim,
    }: Answers<ReturnType<typeof statements>>): { value: null; effects: Effects<"afterCommit"> } => ({
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
