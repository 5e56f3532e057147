/**
 * A connection that closes under a query must not poison the next one. postgres.js 3.4.9 kept the
 * closed connection's query and the server's last error, and rejected the next query that
 * reconnected it with that old `57P01` without sending it: a gateway whose database came back
 * answered 503 NOT_READY after `/readyz` said ready (porsager/postgres#1223; mooring patches the
 * driver at install, scripts/patch-postgres.mjs).
 */
import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type Database } from "../../src/db/client.js";
import { postgresDriverPatched } from "../../src/db/driver-patch.js";
import { pipelined } from "../../src/db/pipeline.js";
import { isDatabaseUnavailable } from "../../src/errors.js";
import { claimTestDatabase, type TestDatabase } from "../support/db.js";

let db: TestDatabase;
let pool: Database;

beforeAll(async () => {
  db = await claimTestDatabase();
  // One connection, so the query after the kill must reconnect the very connection that was killed.
  pool = connect(db.url, { max: 1, applicationName: "mooring:reconnect" });
});
afterAll(async () => {
  await pool?.close();
  await db?.drop();
});

it("the query after a backend was terminated mid-query runs on the reconnected connection", async () => {
  const [{ pid }] = await pool.sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const inFlight = pool.sql`select pg_sleep(30)`.then(
    () => null,
    (err: unknown) => err,
  );
  await expect
    .poll(async () => (await db.sql`select 1 from pg_stat_activity where pid = ${pid} and query like 'select pg_sleep%'`).length)
    .toBe(1);
  await db.sql`select pg_terminate_backend(${pid})`;
  const killed = await inFlight;
  expect(isDatabaseUnavailable(killed)).toBe(true);

  // Unpatched, this one failed with the killed backend's "57P01 terminating connection".
  const [{ one, pid: newPid }] = await pool.sql<{ one: number; pid: number }[]>`select 1 as one, pg_backend_pid() as pid`;
  expect(one).toBe(1);
  expect(newPid).not.toBe(pid);
});

it("a pipelined transaction killed while it waits for a lock leaves the next one on that connection working", async () => {
  const holder = postgres(db.url, { max: 1, onnotice: () => {} });
  try {
    const reserved = await holder.reserve();
    await reserved`select pg_advisory_lock(4242)`;
    // The gateway's gate transactions are pipelined (db/pipeline.ts); postgres.js's own `begin`
    // has another bug on a killed connection, handled by replacing the pool (db/client.ts).
    const waiting = pipelined(pool.sql, (q) => [q`select pg_advisory_xact_lock(4242)`] as const).then(
      () => null,
      (err: unknown) => err,
    );
    await expect
      .poll(async () =>
        (await db.sql`select pid from pg_stat_activity where application_name = 'mooring:reconnect' and wait_event_type = 'Lock'`).map(
          (r) => r.pid,
        ),
      )
      .toHaveLength(1);
    await db.sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'mooring:reconnect' and wait_event_type = 'Lock'`;
    expect(isDatabaseUnavailable(await waiting)).toBe(true);
    await reserved`select pg_advisory_unlock(4242)`;
    reserved.release();

    const [rows] = await pipelined(pool.sql, (q) => [q`select 2 as two`] as const);
    expect(rows[0].two).toBe(2);
  } finally {
    await holder.end({ timeout: 1 });
  }
});

it("the installed driver carries the patch (npm ci ran scripts/patch-postgres.mjs)", () => {
  expect(postgresDriverPatched()).toBe(true);
});
