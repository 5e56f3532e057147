/**
 * A database per test file on the real Postgres.
 *
 * - `claimTestDatabase()` (what `useGateway` and `useSqlDatabase` use): a migrated database from a
 *   pool, emptied for this file. Creating a database on Postgres takes one to two seconds, migrating
 *   it one more and dropping it another, on every file; a claimed one costs a truncate. The pool's
 *   databases are named after the migrations (`mooring_pool_<hash>_<n>`), so a branch with other
 *   migrations never gets one migrated differently; a file holds its database by a session
 *   advisory lock on the admin database for as long as it runs (so two runs, or two checkouts,
 *   never share one), and the global setup drops the pool's idle databases when the run ends.
 * - `createTestDatabase()`: a fresh, empty (unmigrated) database, dropped afterwards: for the tests of
 *   migrating itself and of a database that is not there yet.
 */
import { createHash, randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { inject } from "vitest";
import { connect } from "../../src/db/client.js";
import { applyMigrations, migrationsFolder } from "../../src/db/migrate.js";

export interface TestDatabase {
  url: string;
  name: string;
  /** A plain client for assertions (camelCase rows). */
  sql: postgres.Sql;
  /** Ends the file's use of it: dropped (a fresh one), or given back to the pool (a claimed one). */
  drop(): Promise<void>;
}

function assertionClient(url: string): postgres.Sql {
  return postgres(url, {
    max: 4,
    onnotice: () => {},
    transform: postgres.camel,
    types: {
      int8: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
  });
}

function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject("adminDatabaseUrl");
  const name = `mooring_test_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = databaseUrl(adminUrl, name);
  const sql = assertionClient(url);
  return {
    url,
    name,
    sql,
    async drop() {
      await sql.end({ timeout: 2 });
      const a = postgres(adminUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists ${name} with (force)`);
      await a.end();
    },
  };
}

/** Every database of the pool starts with this (the global setup drops its idle ones: global-setup.ts). */
export const poolPrefix = "mooring_pool_";

/** The pool of this checkout's migrations: a hash of the migration files' names and text. */
function poolName(): string {
  const hash = createHash("sha256");
  for (const file of readdirSync(migrationsFolder).filter((f) => f.endsWith(".sql")).sort()) {
    hash.update(file).update(readFileSync(join(migrationsFolder, file)));
  }
  return `${poolPrefix}${hash.digest("hex").slice(0, 12)}`;
}

/**
 * A migrated database, emptied, for this file alone until `drop()` gives it back. The first free
 * database of the pool (one whose lock no one holds) is taken, or a new one made and migrated.
 */
export async function claimTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject("adminDatabaseUrl");
  const pool = poolName();
  // One connection, held while the file runs: the advisory lock lives as long as its session.
  const lock = postgres(adminUrl, { max: 1, idle_timeout: 0, max_lifetime: null, onnotice: () => {} });
  for (let n = 0; ; n++) {
    const name = `${pool}_${n}`;
    const [{ locked }] = await lock<{ locked: boolean }[]>`select pg_try_advisory_lock(hashtext(${name})) as locked`;
    if (!locked) continue;
    const url = databaseUrl(adminUrl, name);
    try {
      const [exists] = await lock`select 1 from pg_database where datname = ${name}`;
      if (exists) {
        // Whatever a previous file left connected (a killed process's backends) goes first.
        await lock`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid()`;
      } else {
        await lock.unsafe(`create database ${name}`);
      }
      const db = connect(url, { max: 1 });
      try {
        // Nothing pending on a pool database (a cheap look at the journal), unless a run died mid-way.
        await applyMigrations(db);
        const tables = await db.sql<{ name: string }[]>`select tablename as name from pg_tables where schemaname = 'public'`;
        if (tables.length > 0)
          await db.sql.unsafe(`truncate ${tables.map((t) => `"${t.name}"`).join(", ")} restart identity cascade`);
      } finally {
        await db.close();
      }
    } catch (err) {
      await lock.end();
      throw err;
    }
    const sql = assertionClient(url);
    let released = false;
    return {
      url,
      name,
      sql,
      async drop() {
        if (released) return;
        released = true;
        await sql.end({ timeout: 2 });
        await lock.end({ timeout: 2 });
      },
    };
  }
}
