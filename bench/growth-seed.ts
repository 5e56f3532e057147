/**
 * A database seeded as the growth benchmark seeds it (bench/growth.ts, `seed`), kept for reading
 * plans: `npx tsx bench/growth-seed.ts <database> <sessions>` (re)creates `<database>` on the
 * server of BENCH_DATABASE_URL (default 127.0.0.1:5432), migrates and seeds it, and leaves it
 * there; drop it when done. The benchmark itself drops its databases after timing.
 */
import postgres from "postgres";
import { connect } from "../src/db/client.js";
import { applyMigrations } from "../src/db/migrate.js";
import { seed } from "./growth.js";

const [name, size] = process.argv.slice(2);
const n = Number(size);
if (!name || !/^[a-z_][a-z0-9_]*$/.test(name) || !Number.isInteger(n) || n < 100) {
  console.error("usage: npx tsx bench/growth-seed.ts <database> <sessions, at least 100>");
  process.exit(2);
}
const server = new URL(process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
const admin = postgres(server.toString(), { max: 1, onnotice: () => {} });
try {
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.unsafe(`create database ${name}`);
} finally {
  await admin.end();
}
server.pathname = `/${name}`;
const database = connect(server.toString(), { max: 2, applicationName: "bench-growth-seed" });
try {
  await applyMigrations(database);
} finally {
  await database.close();
}
const sql = postgres(server.toString(), { max: 2, onnotice: () => {} });
try {
  const t0 = Date.now();
  await seed(sql, n);
  console.log(`${name}: ${n} sessions seeded in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
} finally {
  await sql.end();
}
