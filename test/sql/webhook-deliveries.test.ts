/**
 * The webhook outbox (src/sql/webhook-deliveries.ts) called directly on a real database: the
 * per-URL cap counts deliveries leased by any claimer, only due and signable rows are taken, two
 * claimers under the claim lock never exceed the cap together, a record is fenced by its lease and
 * ends or reschedules the delivery, and the admin reads and retries filter by tenant.
 */
import { randomUUID } from "node:crypto";
import { beforeEach, describe, expect, it } from "vitest";
import type { Tx } from "../../src/db/client.js";
import { pipelined } from "../../src/db/pipeline.js";
import {
  type DeliveryRow,
  webhookClaimDueDeliveries,
  webhookCountPending,
  webhookListDeliveries,
  webhookLockClaims,
  webhookRecordAttempt,
  webhookRetryDelivery,
} from "../../src/sql/webhook-deliveries.js";
import { addSession, addTask, someoneWaitsForALock, useSqlTestDatabase } from "../support/sql-fixtures.js";

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

/** One delivery with the fields given (a due, pending, unleased one by default); its id. */
async function delivery(
  over: {
    tenant?: string;
    endpoint?: string | null;
    url?: string;
    status?: DeliveryRow["status"];
    /** Due time relative to now, in ms (positive: not due yet). */
    dueInMs?: number;
    /** Lease end relative to now, in ms (negative: run out); absent: no lease. */
    leaseInMs?: number;
    sessionId?: string;
    seq?: number;
    createdAt?: string;
  } = {},
): Promise<string> {
  const [row] = await db.sql<{ id: string }[]>`
    insert into webhook_deliveries (tenant, endpoint_id, url, event_type, session_id, seq, body, status,
                                    next_attempt_at, lease_until, created_at)
    values (${over.tenant ?? "default"}, ${over.endpoint === undefined ? "e1" : over.endpoint}, ${over.url ?? FAST},
            'task.completed', ${over.sessionId ?? randomUUID()}, ${over.seq ?? 1}, '{}', ${over.status ?? "pending"},
            now() + make_interval(secs => ${over.dueInMs ?? -1000} / 1000.0),
            case when ${over.leaseInMs ?? null}::int is null then null
                 else now() + make_interval(secs => ${over.leaseInMs ?? 0}::int / 1000.0) end,
            coalesce(${over.createdAt ?? null}::timestamptz, now()))
    returning id`;
  return row.id;
}

const ok = { ok: true, statusCode: 200, response: "", retryInMs: null };

const claim = (limit: number, perEndpoint = 2) =>
  pipelined(db.sql, (q) => [
    webhookLockClaims(q),
    webhookClaimDueDeliveries(q, { endpoints: ["e1"], turnTenants: [], limit, leaseMs: 60_000, perEndpoint }),
  ]).then(([, rows]) => rows);

describe("webhookClaimDueDeliveries", () => {
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

  it("takes due, pending, unleased rows only, oldest due first, up to the limit, and leases them", async () => {
    const notDue = await delivery({ dueInMs: 60_000 });
    await delivery({ status: "delivered" });
    await delivery({ status: "failed" });
    const leased = await delivery({ leaseInMs: 60_000, url: SLOW });
    const runOut = await delivery({ leaseInMs: -1000, url: "http://127.0.0.1:9/a", dueInMs: -3000 });
    const older = await delivery({ url: "http://127.0.0.1:9/b", dueInMs: -2000 });
    const newer = await delivery({ url: "http://127.0.0.1:9/c", dueInMs: -1000 });
    const rows = await pipelined(db.sql, (q) => [
      webhookLockClaims(q),
      webhookClaimDueDeliveries(q, {
        endpoints: ["e1"],
        turnTenants: [],
        limit: 2,
        leaseMs: 30_000,
        perEndpoint: 5,
      }),
    ]).then(([, r]) => r);
    expect(rows.map((r) => r.id).sort()).toEqual([runOut, older].sort());
    const [{ now }] = await db.sql<{ now: Date }[]>`select now()`;
    for (const r of rows) {
      expect(r.leaseUntil!.getTime()).toBeGreaterThan(now.getTime());
      expect(r.status).toBe("pending");
    }
    expect((await claim(10, 5)).map((r) => r.id)).toEqual([newer]);
    const [nd] = await db.sql`select lease_until from webhook_deliveries where id = ${notDue}`;
    expect(nd.leaseUntil).toBeNull();
    const [l] = await db.sql`select lease_until from webhook_deliveries where id = ${leased}`;
    expect(l.leaseUntil.getTime()).toBeGreaterThan(now.getTime());
  });

  it("takes a turn's own URL (no endpoint) only for the tenants the claimer can sign for", async () => {
    const mine = await delivery({ endpoint: null, tenant: "a" });
    await delivery({ endpoint: null, tenant: "b" });
    const rows = await pipelined(db.sql, (q) => [
      webhookLockClaims(q),
      webhookClaimDueDeliveries(q, {
        endpoints: [],
        turnTenants: ["a"],
        limit: 10,
        leaseMs: 60_000,
        perEndpoint: 5,
      }),
    ]).then(([, r]) => r);
    expect(rows.map((r) => r.id)).toEqual([mine]);
  });

  it("answers the trace context of the turn whose event it delivers", async () => {
    const sessionId = await addSession(db.sql, { lastSeq: 2 });
    const task = await addTask(db.sql, sessionId, { status: "completed" });
    const later = await addTask(db.sql, sessionId, { status: "completed" });
    await db.sql`update tasks set trace_context = '00-trace-span-01' where id = ${task.id}`;
    await db.sql`update tasks set trace_context = '00-later-span-01' where id = ${later.id}`;
    await db.sql`insert into events (session_id, seq, task_id, type, data)
                 values (${sessionId}, 1, ${task.id}, 'message.delta', '{}'::jsonb),
                        (${sessionId}, 2, ${later.id}, 'message.delta', '{}'::jsonb)`;
    await db.sql`truncate webhook_deliveries`;
    const traced = await delivery({ sessionId, seq: 1, url: "http://127.0.0.1:9/t" });
    const untraced = await delivery({ url: "http://127.0.0.1:9/u" });
    const rows = await claim(10, 5);
    expect(Object.fromEntries(rows.map((r) => [r.id, r.traceContext]))).toEqual({
      [traced]: "00-trace-span-01",
      [untraced]: null,
    });
  });
  it("skips the trace context lookup when the claimer does not trace (traceContext false)", async () => {
    const sessionId = await addSession(db.sql, { lastSeq: 1 });
    const task = await addTask(db.sql, sessionId, { status: "completed" });
    await db.sql`update tasks set trace_context = '00-trace-span-01' where id = ${task.id}`;
    await db.sql`insert into events (session_id, seq, task_id, type, data)
                 values (${sessionId}, 1, ${task.id}, 'message.delta', '{}'::jsonb)`;
    await db.sql`truncate webhook_deliveries`;
    const id = await delivery({ sessionId, seq: 1 });
    const rows = await pipelined(db.sql, (q) => [
      webhookLockClaims(q),
      webhookClaimDueDeliveries(q, {
        endpoints: ["e1"],
        turnTenants: [],
        limit: 10,
        leaseMs: 60_000,
        perEndpoint: 2,
        traceContext: false,
      }),
    ]).then(([, claimed]) => claimed);
    expect(rows.map((r) => [r.id, r.traceContext])).toEqual([[id, null]]);
  });
});

describe("webhookClaimDueDeliveries, its cost", () => {
  it("counts a lease on a row not due again yet as busy (busy is read from every pending row, not only due ones)", async () => {
    await delivery({ url: SLOW, dueInMs: 60_000, leaseInMs: 60_000 });
    await insert(SLOW, 3);
    expect((await claim(10)).map((r) => r.url)).toEqual([SLOW]);
    expect(await claim(10)).toEqual([]);
  });

  it("leases a row with a HOT update: no index holds lease_until, and the page keeps room", async () => {
    const id = await delivery();
    // This backend's table counters not yet reported, exact inside its transaction: the change
    // across the claim is the claim's own.
    const counters = async (tx: Tx) => {
      const [row] = await tx<{ updated: number; hot: number }[]>`
        select n_tup_upd::int as updated, n_tup_hot_upd::int as hot
        from pg_stat_xact_user_tables where relname = 'webhook_deliveries'`;
      return row;
    };
    const hot = await db.sql.begin(async (tx) => {
      const before = await counters(tx);
      await webhookLockClaims(tx);
      const rows = await webhookClaimDueDeliveries(tx, {
        endpoints: ["e1"],
        turnTenants: [],
        limit: 1,
        leaseMs: 60_000,
        perEndpoint: 2,
      });
      expect(rows.map((r) => r.id)).toEqual([id]);
      const after = await counters(tx);
      return { updated: after.updated - before.updated, hot: after.hot - before.hot };
    });
    expect(hot).toEqual({ updated: 1, hot: 1 });
    const [table] = await db.sql<{ options: string[] }[]>`
      select reloptions as options from pg_class where oid = 'webhook_deliveries'::regclass`;
    expect(table.options).toContain("fillfactor=80");
  });
});

describe("webhookRecordAttempt", () => {
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

  it("ends a delivery when it succeeds or its schedule ran out; otherwise makes it due again after the retry delay", async () => {
    await insert(FAST, 3);
    const [a, b, c] = await claim(3, 3);
    expect(await webhookRecordAttempt(db.sql, a.id, a.leaseUntil!, ok)).toBe(true);
    const failed = { ok: false, statusCode: 503, response: "busy", retryInMs: null };
    expect(await webhookRecordAttempt(db.sql, b.id, b.leaseUntil!, failed)).toBe(true);
    const retry = { ok: false, statusCode: null, response: "timeout", retryInMs: 90_000 };
    expect(await webhookRecordAttempt(db.sql, c.id, c.leaseUntil!, retry)).toBe(true);
    const rows = await db.sql<DeliveryRow[]>`select * from webhook_deliveries`;
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(a.id)).toMatchObject({
      status: "delivered",
      attempts: 1,
      lastStatusCode: 200,
      nextAttemptAt: null,
      leaseUntil: null,
    });
    expect(byId.get(b.id)).toMatchObject({
      status: "failed",
      attempts: 1,
      lastStatusCode: 503,
      lastResponse: "busy",
      nextAttemptAt: null,
    });
    const again = byId.get(c.id)!;
    expect(again).toMatchObject({
      status: "pending",
      attempts: 1,
      lastStatusCode: null,
      lastResponse: "timeout",
      leaseUntil: null,
    });
    // Both times are the statement's now(): the delay is exact.
    expect(again.nextAttemptAt!.getTime() - again.lastAttemptAt!.getTime()).toBe(90_000);
    // Not due yet, so not claimed again.
    expect(await claim(10, 3)).toEqual([]);
  });

  it("records nothing once a retry reset the lease", async () => {
    await insert(FAST, 1);
    const [row] = await claim(1);
    expect(await webhookRetryDelivery(db.sql, row.id, null)).not.toBeNull();
    expect(await webhookRecordAttempt(db.sql, row.id, row.leaseUntil!, ok)).toBe(false);
    const [after] = await db.sql`select status, attempts from webhook_deliveries where id = ${row.id}`;
    expect(after).toEqual({ status: "pending", attempts: 0 });
  });
});

describe("webhookLockClaims", () => {
  it("holds the claim lock until the transaction ends: a second claimer waits for it", async () => {
    let second: Promise<unknown> | undefined;
    let secondDone = false;
    await db.sql.begin(async (tx) => {
      await webhookLockClaims(tx);
      second = db.sql
        .begin((t2) => webhookLockClaims(t2))
        .then(() => {
          secondDone = true;
        });
      await someoneWaitsForALock(db.sql);
      expect(secondDone).toBe(false);
    });
    await second;
    expect(secondDone).toBe(true);
  });
});

describe("webhookListDeliveries", () => {
  const list = (opts: Partial<Parameters<typeof webhookListDeliveries>[1]>) =>
    webhookListDeliveries(db.sql, { tenant: null, status: null, limit: 100, after: null, ...opts }).then(
      (rows) => rows.map((r) => r.id),
    );

  it("pages newest first, ties within a millisecond by id, through the cursor", async () => {
    const oldest = await delivery({ createdAt: "2026-01-01T00:00:00Z" });
    const middle = await delivery({ createdAt: "2026-01-01T00:01:00Z" });
    const tie = [await delivery(), await delivery()].sort();
    // Within one millisecond, the lower id the later: the cursor's order is (millisecond, id).
    await db.sql`update webhook_deliveries set created_at = '2026-01-01T00:02:00.000100Z' where id = ${tie[1]}`;
    await db.sql`update webhook_deliveries set created_at = '2026-01-01T00:02:00.000200Z' where id = ${tie[0]}`;
    expect(await list({})).toEqual([tie[1], tie[0], middle, oldest]);
    const [first] = await webhookListDeliveries(db.sql, {
      tenant: null,
      status: null,
      limit: 1,
      after: null,
    });
    expect(first.id).toBe(tie[1]);
    expect(await list({ limit: 2, after: { at: first.createdAt, id: first.id } })).toEqual([tie[0], middle]);
    expect(await list({ after: { at: new Date("2026-01-01T00:01:00Z"), id: middle } })).toEqual([oldest]);
  });

  it("filters by tenant (null: all) and status (null: any)", async () => {
    const a = await delivery({ tenant: "a", createdAt: "2026-01-01T00:00:00Z" });
    const aDone = await delivery({ tenant: "a", status: "delivered", createdAt: "2026-01-01T00:01:00Z" });
    const b = await delivery({ tenant: "b", createdAt: "2026-01-01T00:02:00Z" });
    expect(await list({ tenant: "a" })).toEqual([aDone, a]);
    expect(await list({ tenant: "b" })).toEqual([b]);
    expect(await list({ tenant: "c" })).toEqual([]);
    expect(await list({ status: "pending" })).toEqual([b, a]);
    expect(await list({ tenant: "a", status: "delivered" })).toEqual([aDone]);
  });
});

describe("webhookRetryDelivery", () => {
  it("makes a delivery of any status due now, unleased, keeping its id and attempts", async () => {
    for (const status of ["failed", "delivered", "pending"] as const) {
      const id = await delivery({ status, dueInMs: 600_000, leaseInMs: 60_000 });
      await db.sql`update webhook_deliveries set attempts = 4 where id = ${id}`;
      const row = await webhookRetryDelivery(db.sql, id, null);
      const [{ now }] = await db.sql<{ now: Date }[]>`select now()`;
      expect(row).toMatchObject({ id, status: "pending", attempts: 4, leaseUntil: null });
      expect(row!.nextAttemptAt!.getTime()).toBeLessThanOrEqual(now.getTime());
    }
    expect((await claim(10, 5)).length).toBe(3);
  });

  it("answers null, touching nothing, for another tenant's delivery or a missing one", async () => {
    const id = await delivery({ tenant: "a", status: "failed" });
    expect(await webhookRetryDelivery(db.sql, id, "b")).toBeNull();
    expect(await webhookRetryDelivery(db.sql, randomUUID(), null)).toBeNull();
    const [row] = await db.sql`select status from webhook_deliveries where id = ${id}`;
    expect(row.status).toBe("failed");
    expect((await webhookRetryDelivery(db.sql, id, "a"))?.status).toBe("pending");
  });
});

describe("webhookCountPending", () => {
  it("counts pending deliveries, leased or not, due or not, of every tenant", async () => {
    expect(await webhookCountPending(db.sql)).toBe(0);
    await delivery({ tenant: "a" });
    await delivery({ tenant: "b", leaseInMs: 60_000 });
    await delivery({ dueInMs: 60_000 });
    await delivery({ status: "delivered" });
    await delivery({ status: "failed" });
    expect(await webhookCountPending(db.sql)).toBe(3);
  });
});
