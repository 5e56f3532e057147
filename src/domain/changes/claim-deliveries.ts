/**
 * Claiming due webhook deliveries for this instance, a pipelined change: the outcomes of the
 * attempts that ended since the last claim (each fenced by its lease, sql/webhook-deliveries.ts),
 * then the claim lock, then the claim, so the lock is held only while Postgres runs it. Recording
 * finished attempts in the claim that fills their freed slots makes a delivery cost one commit,
 * not two (a record, then a claim woken by it): at a steady rate those commits were the sender's
 * pace and a share of the turns' database. Sets nothing off: the delivery worker sends what it
 * claimed and reports what was recorded.
 */
import type { Tx } from "../../db/client.js";
import {
  type AttemptOutcome,
  webhookClaimDueDeliveries,
  webhookLockClaims,
  webhookRecordAttempt,
} from "../../sql/webhook-deliveries.js";
import type { Answers, Effects } from "../committer.js";

export type DeliveryClaim = Parameters<typeof webhookClaimDueDeliveries>[1];

/** An attempt that ended, to record: the delivery, the lease it was made under, its outcome. */
export interface FinishedAttempt {
  id: string;
  lease: Date;
  outcome: AttemptOutcome;
}

export function claimDeliveriesChange(claim: DeliveryClaim, finished: readonly FinishedAttempt[] = []) {
  const statements = (q: Tx) => ({
    recorded: finished.map((f) => webhookRecordAttempt(q, f.id, f.lease, f.outcome)),
    lock: webhookLockClaims(q),
    claimed: webhookClaimDueDeliveries(q, claim),
  });
  return {
    statements,
    outcome: ({ claimed, recorded }: Answers<ReturnType<typeof statements>>) => ({
      /** `recorded[i]`: whether `finished[i]` was recorded (false: fenced out, its lease ran out). */
      value: { claimed, recorded },
      effects: {} as Effects<"afterCommit">,
    }),
  };
}
