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

export default async function setup(project: TestProject) {
  const wanted = process.env.TEST_DATABASE_URL ?? DEFAULT_URL;
  if (await reachable(wanted)) {
    project.provide("adminDatabaseUrl", wanted);
    return;
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
