/**
 * Databases for the benchmarks: the Postgres at BENCH_DATABASE_URL (default: the machine's
 * Postgres at 127.0.0.1:5432), where each benchmark gets a fresh `mooring_bench_*` database that
 * is dropped afterwards. Without a reachable server an embedded Postgres is started for the run.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import postgres from "postgres";
import { type EmbeddedDatabase, startEmbeddedPostgres } from "../../src/db/embedded.js";

const DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres";

export type Sql = postgres.Sql;

export interface BenchDatabase {
  name: string;
  url: string;
  /** A plain client (snake_case rows, int8 as number). */
  sql: Sql;
}

export class BenchDatabases {
  private readonly created: BenchDatabase[] = [];

  private constructor(
    readonly adminUrl: string,
    private readonly embedded: { db: EmbeddedDatabase; dir: string } | null,
  ) {}

  static async open(log: (line: string) => void): Promise<BenchDatabases> {
    const wanted = process.env.BENCH_DATABASE_URL ?? DEFAULT_URL;
    if (await reachable(wanted)) return new BenchDatabases(wanted, null);
    if (process.env.BENCH_DATABASE_URL) throw new Error(`BENCH_DATABASE_URL is not reachable: ${wanted}`);
    log(`no Postgres at ${wanted}; starting an embedded one for the run`);
    const dir = await mkdtemp(join(tmpdir(), "mooring-bench-pg-"));
    const db = await startEmbeddedPostgres(dir, pino({ level: "warn" }));
    return new BenchDatabases(db.url, { db, dir });
  }

  get server(): string {
    const url = new URL(this.adminUrl);
    return `${url.hostname}:${url.port || 5432}${this.embedded ? " (embedded)" : ""}`;
  }

  /** A fresh, empty database, dropped by `dropAll`. */
  async create(label: string): Promise<BenchDatabase> {
    const name = `mooring_bench_${label.replace(/\W/g, "_")}_${randomBytes(4).toString("hex")}`;
    const admin = postgres(this.adminUrl, { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`create database ${name}`);
    } finally {
      await admin.end({ timeout: 2 });
    }
    const url = new URL(this.adminUrl);
    url.pathname = `/${name}`;
    const sql = postgres(url.toString(), {
      max: 4,
      onnotice: () => {},
      types: {
        int8: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
      },
    });
    const db = { name, url: url.toString(), sql };
    this.created.push(db);
    return db;
  }

  async drop(db: BenchDatabase): Promise<void> {
    await db.sql.end({ timeout: 2 }).catch(() => {});
    const admin = postgres(this.adminUrl, { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`drop database if exists ${db.name} with (force)`);
    } finally {
      await admin.end({ timeout: 2 });
    }
    const i = this.created.indexOf(db);
    if (i >= 0) this.created.splice(i, 1);
  }

  async dropAll(): Promise<void> {
    for (const db of [...this.created]) await this.drop(db).catch(() => {});
    if (this.embedded) {
      await this.embedded.db.stop().catch(() => {});
      await rm(this.embedded.dir, { recursive: true, force: true });
    }
  }
}

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

/** The pgbench binary: PGBENCH, PATH, or the Debian/Ubuntu Postgres layout. Null when absent. */
export function findPgbench(): string | null {
  if (process.env.PGBENCH) return process.env.PGBENCH;
  try {
    const found = execFileSync("sh", ["-c", "command -v pgbench"], { encoding: "utf8" }).trim();
    if (found) return found;
  } catch {
    // not on PATH
  }
  const root = "/usr/lib/postgresql";
  if (existsSync(root)) {
    for (const version of readdirSync(root).sort().reverse()) {
      const candidate = join(root, version, "bin", "pgbench");
      if (existsSync(candidate)) return candidate;
    }
  }
  return null;
}
