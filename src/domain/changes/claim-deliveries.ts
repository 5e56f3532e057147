/**
 * Claiming due webhook deliveries for this instance, a pipelined change: the claim lock, then the
 * claim (sql/webhook-deliveries.ts), so the lock is held only while Postgres runs it. Sets nothing
 * off: the delivery worker sends what it claimed.
 */
import type { Tx } from "../../db/client.js";
import { claimDueDeliveries, lockWebhookClaims } from "../../sql/webhook-deliveries.js";
import type { Answers, Effects } from "../committer.js";

export type DeliveryClaim = Parameters<typeof claimDueDeliveries>[1];

export function claimDeliveriesChange(claim: DeliveryClaim) {
  const statements = (q: Tx) => ({ lock: lockWebhookClaims(q), claimed: claimDueDeliveries(q, claim) });
  return {
    statements,
    outcome: ({ claimed }: Answers<ReturnType<typeof statements>>) => ({
      value: claimed,
      effects: {} as Effects<"afterCommit">,
    }),
  };
}
