import type { Queryable } from "../db/client.js";

export interface DeliveryRow {
  id: string;
  tenant: string;
  endpointId: string | null;
  url: string;
  eventType: string;
  sessionId: string;
  seq: number;
  body: string;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  nextAttemptAt: Date | null;
  lastStatusCode: number | null;
  lastResponse: string | null;
  lastAttemptAt: Date | null;
  /** Set while a sender holds it (the claim's lease). */
  leaseUntil: Date | null;
  createdAt: Date;
}

/**
 * Claim up to `limit` due deliveries this instance can sign (`endpoints`: the configured endpoint
 * ids it holds secrets for; `turnTenants`: tenants whose per-turn URLs it can sign). Shape: the
 * due rows, oldest first, locked `FOR UPDATE SKIP LOCKED` so concurrent claimers take different
 * rows, then given a lease: until `lease_until` no other instance picks them even after this
 * transaction ends, and a crashed sender's lease simply runs out.
 */
export async function claimDueDeliveries(
  q: Queryable,
  opts: { endpoints: string[]; turnTenants: string[]; limit: number; leaseMs: number },
): Promise<DeliveryRow[]> {
  return q<DeliveryRow[]>`
    with due as (
      select id from webhook_deliveries
      where status = 'pending' and next_attempt_at <= now()
        and (lease_until is null or lease_until < now())
        and (endpoint_id = any(${opts.endpoints}::text[])
             or (endpoint_id is null and tenant = any(${opts.turnTenants}::text[])))
      order by next_attempt_at
      limit ${opts.limit}
      for update skip locked
    )
    update webhook_deliveries d set lease_until = now() + ${opts.leaseMs} * interval '1 millisecond'
    from due where d.id = due.id
    returning d.*`;
}

/**
 * Record one attempt's outcome and release the lease. `retryInMs` null ends the delivery:
 * `delivered` when `ok`, else `failed` (the schedule ran out); otherwise it is due again then.
 * Fenced by the claim's lease (compared to the millisecond, as a Date holds it): a sender whose
 * lease ran out and was claimed again, or was reset by a retry, records nothing.
 */
export async function recordAttempt(
  q: Queryable,
  id: string,
  lease: Date,
  outcome: { ok: boolean; statusCode: number | null; response: string; retryInMs: number | null },
): Promise<boolean> {
  const status = outcome.ok ? "delivered" : outcome.retryInMs === null ? "failed" : "pending";
  const rows = await q`
    update webhook_deliveries set
      status = ${status}, attempts = attempts + 1, lease_until = null, last_attempt_at = now(),
      last_status_code = ${outcome.statusCode}, last_response = ${outcome.response},
      next_attempt_at = case when ${status} = 'pending'
                             then now() + ${outcome.retryInMs ?? 0} * interval '1 millisecond' end
    where id = ${id} and date_trunc('milliseconds', lease_until) = ${lease}
    returning id`;
  return rows.length === 1;
}

/**
 * A page of deliveries, newest first, keyset-paginated on (created_at, id). `tenant` null: every
 * tenant (admin); `status` null: any.
 */
export async function listDeliveries(
  q: Queryable,
  opts: {
    tenant: string | null;
    status: string | null;
    limit: number;
    after: { at: Date; id: string } | null;
  },
): Promise<DeliveryRow[]> {
  return q<DeliveryRow[]>`
    select * from webhook_deliveries
    where (${opts.tenant}::text is null or tenant = ${opts.tenant})
      and (${opts.status}::text is null or status = ${opts.status})
      and (${opts.after ? opts.after.at : null}::timestamptz is null
           or (date_trunc('milliseconds', created_at), id) < (${opts.after ? opts.after.at : null}::timestamptz, ${opts.after ? opts.after.id : null}::uuid))
    order by date_trunc('milliseconds', created_at) desc, id desc
    limit ${opts.limit}`;
}

/** Make a delivery due now again (any status), keeping its id and attempts; null when not visible. */
export async function retryDelivery(
  q: Queryable,
  id: string,
  tenant: string | null,
): Promise<DeliveryRow | null> {
  const [row] = await q<DeliveryRow[]>`
    update webhook_deliveries set status = 'pending', next_attempt_at = now(), lease_until = null
    where id = ${id} and (${tenant}::text is null or tenant = ${tenant})
    returning *`;
  return row ?? null;
}

/** Deliveries still pending (the backlog gauge). */
export async function countPending(q: Queryable): Promise<number> {
  const [row] = await q<
    { n: number }[]
  >`select count(*)::int as n from webhook_deliveries where status = 'pending'`;
  return row.n;
}
