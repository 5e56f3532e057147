/**
 * The webhook outbox's claim and attempt record (src/sql/webhook-deliveries.ts) called directly on
 * a real database: the per-URL cap counts deliveries leased by any claimer, only signable rows are
 * taken, two claimers under the claim lock never exceed the cap together, and a record is fenced
 * by its lease.
 */
import { randomUUID } from "node:crypto";
import { beforeEach, expect, it } from "vitest";
import { pipelined } from "../../src/db/pipeline.js";
import {
  webhookClaimDueDeliveries,
  webhookLockClaims,
  webhookRecordAttempt,
} from "../../src/sql/webhook-deliveries.js";
import { useSqlTestDatabase } from "../support/sql-fixtures.js";

const db = useSqlTestDatabase();
const SLOW = "http://127.0.0.1:9/slow";
const FAST = "http://127.0.0.1:9/fast";

beforeEach(async () => {
  await db.sql`truncate webhook_deliveries`;
});

/** `n` due deliveries to `url` for endpoint `endpoint`; `leased`: held by some claimer for a minute. */
async function insert(url: string, n: number, opts: { endpoint?: string; leased?: boolean } = {}) {
  for (let i = 0; i < n; i++) {
    await db.sql`
      insert into webhook_deliveries (tenant, endpoint_id, url, event_type, session_id, seq, body, lease_until)
      values ('default', ${opts.endpoint ?? "e1"}, ${url}, 'task.completed', ${randomUUID()}, ${i + 1}, '{}',
              ${opts.leased ? db.sql`now() + interval '1 minute'` : null})`;
  }
}

const claim = (limit: number, perEndpoint = 2) =>
  pipelined(db.sql, (q) => [
    webhookLockClaims(q),
    webhookClaimDueDeliveries(q, { endpoints: ["e1"], turnTenants: [], limit, leaseMs: 60_000, perEndpoint }),
  ]).then(([, rows]) => rows);

it("fills each URL's free slots only, counting the leases another claimer holds", async () => {
  await insert(SLOW, 1, { leased: true });
  await insert(SLOW, 5);
  await insert(FAST, 2);
  const rows = await claim(10);
  expect(rows.filter((r) => r.url === SLOW)).toHaveLength(1);
  expect(rows.filter((r) => r.url === FAST)).toHaveLength(2);
  expect(rows.every((r) => r.leaseUntil !== null)).toBe(true);
  // Both URLs are full now: nothing more until an attempt is recorded.
  expect(await claim(10)).toEqual([]);
  const fast = rows.find((r) => r.url === FAST)!;
  expect(
    await webhookRecordAttempt(db.sql, fast.id, fast.leaseUntil!, {
      ok: true,
      statusCode: 200,
      response: "",
      retryInMs: null,
    }),
  ).toBe(true);
  expect(await claim(10)).toEqual([]); // FAST had only two
  const slow = rows.find((r) => r.url === SLOW)!;
  await webhookRecordAttempt(db.sql, slow.id, slow.leaseUntil!, {
    ok: true,
    statusCode: 200,
    response: "",
    retryInMs: null,
  });
  const next = await claim(10);
  expect(next.map((r) => r.url)).toEqual([SLOW]);
});

it("takes only rows whose secret the claimer holds", async () => {
  await insert(FAST, 2, { endpoint: "someone-else" });
  expect(await claim(10)).toEqual([]);
});

it("concurrent claimers never exceed the per-URL cap together, even when they may sign different rows", async () => {
  // Two endpoints (two tenants, say) at one URL; one claimer holds both secrets, the other one.
  // Unlocked, each would see the URL free and lease different rows: three in flight, not two.
  const claimWith = (endpoints: string[]) =>
    pipelined(db.sql, (q) => [
      webhookLockClaims(q),
      webhookClaimDueDeliveries(q, {
        endpoints,
        turnTenants: [],
        limit: 10,
        leaseMs: 60_000,
        perEndpoint: 2,
      }),
    ]).then(([, rows]) => rows);
  for (let round = 0; round < 15; round++) {
    await db.sql`truncate webhook_deliveries`;
    await insert(SLOW, 1, { endpoint: "e1" });
    await insert(SLOW, 3, { endpoint: "e2" });
    const claims = await Promise.all([claimWith(["e1", "e2"]), claimWith(["e2"])]);
    expect(claims.flat().length).toBeLessThanOrEqual(2);
    const [row] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from webhook_deliveries where lease_until is not null`;
    expect(row.n).toBe(2);
  }
});

it("records an attempt only under the lease it was claimed with", async () => {
  await insert(FAST, 1);
  const [row] = await claim(1);
  const stale = new Date(row.leaseUntil!.getTime() - 1000);
  expect(
    await webhookRecordAttempt(db.sql, row.id, stale, {
      ok: true,
      statusCode: 200,
      response: "",
      retryInMs: null,
    }),
  ).toBe(false);
  expect(
    await webhookRecordAttempt(db.sql, row.id, row.leaseUntil!, {
      ok: false,
      statusCode: 500,
      response: "no",
      retryInMs: 1000,
    }),
  ).toBe(true);
  const [after] = await db.sql<{ status: string; attempts: number; leaseUntil: Date | null }[]>`
    select status, attempts, lease_until from webhook_deliveries where id = ${row.id}`;
  expect(after).toEqual({ status: "pending", attempts: 1, leaseUntil: null });
});
