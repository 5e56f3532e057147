import type { Queryable, Tx } from "../db/client.js";

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
  /** The trace context of the turn whose event this is (tasks.trace_context), as the claim reads it; absent elsewhere. */
  traceContext?: string | null;
}

/** Any fixed number works; every instance must use the same one. */
export const WEBHOOK_CLAIM_LOCK_KEY = 0x7768_6b73; // "whks"

/**
 * Taken first in the claim's transaction (pipelined with it): claims run one at a time across
 * instances, so each one counts the deliveries the others have in flight (committed leases) and a
 * URL never gets more than its per-endpoint concurrency. The claim is one short statement, so
 * the serial step costs little; attempts themselves run outside it.
 */
export function webhookLockClaims(tx: Tx): Promise<unknown> {
  return tx`select pg_advisory_xact_lock(${WEBHOOK_CLAIM_LOCK_KEY})`;
}

/**
 * Claim up to `limit` due deliveries this instance can sign (`endpoints`: the configured endpoint
 * ids it holds secrets for; `turnTenants`: tenants whose per-turn URLs it can sign), at most
 * `perEndpoint` in flight per URL across all instances. Run after `webhookLockClaims` in the same
 * transaction: then `busy` (deliveries leased and not yet recorded, on any instance) is exact,
 * and each URL's oldest due rows fill only its free slots, so a slow or dead receiver's backlog
 * takes at most its own slots and the other URLs' rows are claimed next to it. Window functions
 * cannot be combined with FOR UPDATE; the UPDATE re-checks the status and lease on the row as it
 * is now, so a retry or record committed meanwhile is not overwritten. The lease: until
 * `lease_until` no other instance picks the row, and a crashed sender's lease simply runs out.
 *
 * Its cost per delivery (bench/results/notes.md, "Webhook deliveries: one scan, HOT claims"): the
 * pending rows (the backlog, `webhook_deliveries_due_idx`) are read once, for both `busy` and
 * `due`, not once each; and no index holds `lease_until`, the one column the claim's UPDATE
 * changes, so with the table's free space per page (its fillfactor) the claim is a HOT update,
 * writing no index entry.
 */
export function webhookClaimDueDeliveries(
  q: Queryable,
  opts: {
    endpoints: string[];
    turnTenants: string[];
    limit: number;
    leaseMs: number;
    perEndpoint: number;
    /** Answer each row's trace context (default true); false (tracing off) skips its two lookups. */
    traceContext?: boolean;
  },
): Promise<DeliveryRow[]> {
  return q<DeliveryRow[]>`
    with pending as materialized (
      select id, url, next_attempt_at, lease_until, endpoint_id, tenant from webhook_deliveries
      where status = 'pending'
    ), busy as (
      select url, count(*)::int as n from pending where lease_until > now() group by url
    ), due as (
      select id, url, next_attempt_at,
        row_number() over (partition by url order by next_attempt_at, id) as rank
      from pending
      where next_attempt_at <= now() and (lease_until is null or lease_until < now())
        and (endpoint_id = any(${opts.endpoints}::text[])
             or (endpoint_id is null and tenant = any(${opts.turnTenants}::text[])))
    ), picked as (
      select due.id from due left join busy on busy.url = due.url
      where due.rank <= ${opts.perEndpoint} - coalesce(busy.n, 0)
      order by due.next_attempt_at, due.id
      limit ${opts.limit}
    )
    update webhook_deliveries d set lease_until = now() + ${opts.leaseMs} * interval '1 millisecond'
    from picked
    where d.id = picked.id and d.status = 'pending' and (d.lease_until is null or d.lease_until < now())
    -- The turn's trace context, so the delivery continues its trace (docs/operations.md, Tracing):
    -- one index lookup of the event (session_id, seq) and its task per claimed row, only when
    -- the sender traces (the subquery is not run otherwise).
    returning d.*, case when ${opts.traceContext ?? true}::boolean then
                     (select t.trace_context from events e join tasks t on t.id = e.task_id
                      where e.session_id = d.session_id and e.seq = d.seq) end as trace_context`;
}

/**
 * Record one attempt's outcome and release the lease. `retryInMs` null ends the delivery:
 * `delivered` when `ok`, else `failed` (the schedule ran out); otherwise it is due again then.
 * Fenced by the claim's lease (compared to the millisecond, as a Date holds it): a sender whose
 * lease ran out and was claimed again, or was reset by a retry, records nothing.
 */
export interface AttemptOutcome {
  ok: boolean;
  statusCode: number | null;
  response: string;
  retryInMs: number | null;
}

/** One statement (it can be pipelined in the claim's transaction: domain/changes/claim-deliveries.ts). */
export function webhookRecordAttempt(
  q: Queryable,
  id: string,
  lease: Date,
  outcome: AttemptOutcome,
): Promise<boolean> {
  const status = outcome.ok ? "delivered" : outcome.retryInMs === null ? "failed" : "pending";
  return q`
    update webhook_deliveries set
      status = ${status}, attempts = attempts + 1, lease_until = null, last_attempt_at = now(),
      last_status_code = ${outcome.statusCode}, last_response = ${outcome.response},
      next_attempt_at = case when ${status} = 'pending'
                             then now() + ${outcome.retryInMs ?? 0} * interval '1 millisecond' end
    where id = ${id} and date_trunc('milliseconds', lease_until) = ${lease}
    returning id`.then((rows) => rows.length === 1);
}

/**
 * A page of deliveries, newest first, keyset-paginated on (created_at, id). `tenant` null: every
 * tenant (admin); `status` null: any.
 */
export async function webhookListDeliveries(
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
export async function webhookRetryDelivery(
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
export async function webhookCountPending(q: Queryable): Promise<number> {
  const [row] = await q<
    { n: number }[]
  >`select count(*)::int as n from webhook_deliveries where status = 'pending'`;
  return row.n;
}
