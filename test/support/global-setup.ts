/**
 * Tests use the Postgres on 127.0.0.1:5432 when reachable (TEST_DATABASE_URL overrides); on a
 * machine without one, a real embedded Postgres is started for the whole run.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../src/db/embedded.js";

const DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres";

async function reachable(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Drops the pool databases no file holds (test/support/db.ts, `claimTestDatabase`) when the run ends. */
async function dropIdlePool(adminUrl: string): Promise<void> {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const rows = await admin<{ name: string }[]>`select datname as name from pg_database where datname like ${`mooring_pool_%`}`;
    for (const { name } of rows) {
      const [{ locked }] = await admin<{ locked: boolean }[]>`select pg_try_advisory_lock(hashtext(${name})) as locked`;
      if (!locked) continue;
      try {
        await admin.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await admin`select pg_advisory_unlock(hashtext(${name}))`;
      }
    }
  } finally {
    await admin.end();
  }
}

export default async function setup(project: TestProject) {
  const wanted = process.env.TEST_DATABASE_URL ?? DEFAULT_URL;
  if (await reachable(wanted)) {
    project.provide("adminDatabaseUrl", wanted);
    return () => dropIdlePool(wanted);
  }
  if (process.env.TEST_DATABASE_URL) throw new Error(`TEST_DATABASE_URL is not reachable: ${wanted}`);
  const dir = await mkdtemp(join(tmpdir(), "mooring-test-pg-"));
  const embedded = await startEmbeddedPostgres(dir, pino({ level: "warn" }));
  project.provide("adminDatabaseUrl", embedded.url);
  return async () => {
    await embedded.stop();
    await rm(dir, { recursive: true, force: true });
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
  }
}
