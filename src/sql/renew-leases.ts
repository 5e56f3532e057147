import type { Queryable } from "../db/client.js";

export interface RenewedLease {
  id: string;
  attempt: number;
  status: "running" | "cancelling";
}

/**
 * One statement renews every lease this boot holds and reports each task's status, so the
 * heartbeat also tells the owner which of its tasks were asked to cancel (a backstop for a lost
 * notification) and which it no longer owns (absent from the answer: taken over, so stop it).
 */
export async function renewLeases(q: Queryable, bootId: string, leaseMs: number): Promise<RenewedLease[]> {
  return q<RenewedLease[]>`
    update tasks set lease_expires_at = now() + make_interval(secs => ${leaseMs} / 1000.0)
    where owner_boot = ${bootId} and status in ('running', 'cancelling')
    returning id, attempt, status`;
}
