/**
 * The migrator (src/db/migrate.ts) keeps drizzle's bookkeeping, so databases migrated by
 * drizzle-orm's migrator (every version before it) are up to date for it, a partly migrated one
 * gets the rest, and the other way round; and two instances migrating one database at once apply
 * each migration once. drizzle-orm's migrator runs here only, to make the old state.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate as drizzleMigrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type Database } from "../../src/db/client.js";
import { applyMigrations, migrationsFolder, readMigrations } from "../../src/db/migrate.js";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { eventually } from "../support/gateway.js";

/** src/db/migrate.ts's advisory lock key ("moor"). */
const MIGRATION_LOCK_KEY = 0x6d6f6f72;

const all = readMigrations();
const tags = all.map((m) => m.tag);
let scratch: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "mooring-migrations-"));
});
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A copy of migrations/ whose journal lists only the first `n` entries (an older version's). */
function firstMigrations(n: number): string {
  const folder = join(scratch, `first-${n}`);
  cpSync(migrationsFolder, folder, { recursive: true });
  const journalPath = join(folder, "meta", "_journal.json");
  const journal = JSON.parse(readFileSync(journalPath, "utf8"));
  journal.entries = journal.entries.slice(0, n);
  writeFileSync(journalPath, JSON.stringify(journal));
  return folder;
}

/** drizzle-orm's own migrator on a client of its own (drizzle rewires its client's parsers). */
async function migrateWithDrizzle(url: string, folder: string): Promise<void> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await drizzleMigrate(drizzle(client), { migrationsFolder: folder });
  } finally {
    await client.end();
  }
}

async function bookkeeping(db: TestDatabase): Promise<{ hash: string; createdAt: number }[]> {
  return await db.sql<{ hash: string; createdAt: number }[]>`
    select hash, created_at from drizzle.__drizzle_migrations order by id`;
}

const expected = (migrations = all) => migrations.map((m) => ({ hash: m.hash, createdAt: m.when }));

/** A fresh database and a gateway pool on it, both dropped after `body`. */
async function withDatabase(body: (db: TestDatabase, open: () => Database) => Promise<void>): Promise<void> {
  const db = await createTestDatabase();
  const pools: Database[] = [];
  try {
    await body(db, () => {
      const pool = connect(db.url, { max: 2 });
      pools.push(pool);
      return pool;
    });
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await db.drop();
  }
}

it("finds a database migrated by drizzle's migrator up to date, and writes the rows drizzle writes", async () => {
  await withDatabase(async (db, open) => {
    await migrateWithDrizzle(db.url, migrationsFolder);
    const drizzleRows = await bookkeeping(db);
    expect(drizzleRows).toEqual(expected());
    expect(await applyMigrations(open())).toEqual([]);
    expect(await bookkeeping(db)).toEqual(drizzleRows);
  });
  await withDatabase(async (db, open) => {
    expect(await applyMigrations(open())).toEqual(tags);
    expect(await bookkeeping(db)).toEqual(expected());
    // …and the rows ours wrote satisfy drizzle's migrator (an older version started on it).
    await migrateWithDrizzle(db.url, migrationsFolder);
    expect(await bookkeeping(db)).toEqual(expected());
  });
});

it("applies what an older version's drizzle migrator left, and the other way round", async () => {
  const older = 3;
  await withDatabase(async (db, open) => {
    await migrateWithDrizzle(db.url, firstMigrations(older));
    expect(await applyMigrations(open())).toEqual(tags.slice(older));
    expect(await bookkeeping(db)).toEqual(expected());
  });
  await withDatabase(async (db, open) => {
    expect(await applyMigrations(open(), firstMigrations(older))).toEqual(tags.slice(0, older));
    await migrateWithDrizzle(db.url, migrationsFolder);
    expect(await bookkeeping(db)).toEqual(expected());
  });
});

it("applies each migration once when several instances migrate one database at once", async () => {
  await withDatabase(async (db, open) => {
    const applied = await Promise.all([open(), open(), open()].map((pool) => applyMigrations(pool)));
    // One instance applied everything; the others waited for its commit and found nothing left.
    expect(applied.flat().sort()).toEqual([...tags].sort());
    expect(applied.filter((a) => a.length > 0)).toHaveLength(1);
    expect(await bookkeeping(db)).toEqual(expected());
    const [{ tables }] = await db.sql<{ tables: number }[]>`
      select count(*)::int as tables from pg_tables where schemaname = 'public'`;
    expect(tables).toBeGreaterThan(0);
  });
});

it("finds an up-to-date database without the lock, and waits for the lock when something is pending", async () => {
  const older = 3;
  await withDatabase(async (db, open) => {
    expect(await applyMigrations(open(), firstMigrations(older))).toEqual(tags.slice(0, older));
    // Another instance holds the migration lock (as while it migrates).
    const holder = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      await holder`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
      // Up to date for the older version: answered by the plain read, the lock never asked for.
      expect(await applyMigrations(open(), firstMigrations(older))).toEqual([]);
      // Pending migrations wait for the lock, then apply.
      let done = false;
      const pending = applyMigrations(open()).then((applied) => {
        done = true;
        return applied;
      });
      await eventually(async () => {
        const [{ n }] = await db.sql<{ n: number }[]>`
          select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted`;
        return n > 0;
      });
      expect(done).toBe(false);
      await holder`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`;
      expect(await pending).toEqual(tags.slice(older));
    } finally {
      await holder.end();
    }
    expect(await bookkeeping(db)).toEqual(expected());
  });
});

