/** One database per test file, created fresh and dropped afterwards. */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { inject } from "vitest";

export interface TestDatabase {
  url: string;
  name: string;
  /** A plain client for assertions (camelCase rows). */
  sql: postgres.Sql;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject("adminDatabaseUrl");
  const name = `mooring_test_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const sql = postgres(url.toString(), {
    max: 4,
    onnotice: () => {},
    transform: postgres.camel,
    types: {
      int8: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
  });
  return {
    url: url.toString(),
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
