/**
 * `GET /v1/sessions` timed over HTTP on a database from bench/growth-seed.ts, as growth times it
 * (the caller tenant `default`, pages of 50, the first and one from a cursor 90% down): one
 * gateway per checkout given, in turn, for before/after figures in one run on one database:
 * `npx tsx bench/growth-time-page.ts <db> <checkout dir>...` (another commit: `git archive <commit>
 * | tar -x -C <dir>` and a node_modules link). SAMPLES (default 200) timed requests per page, after
 * 10 untimed.
 */
import postgres from "postgres";
import { gatewayEnv, spawnGateway } from "./lib/gateway.js";
import { HttpClient } from "./lib/http.js";
import { percentile } from "./lib/stats.js";

const [dbName, ...dirs] = process.argv.slice(2);
if (!dbName || dirs.length === 0) {
  console.error("usage: npx tsx bench/growth-time-page.ts <database> <checkout dir>...");
  process.exit(2);
}
const server = new URL(process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
server.pathname = `/${dbName}`;
const url = server.toString();
const sql = postgres(url, { max: 1, onnotice: () => {} });
const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from sessions where tenant = 'default'`;
const depth = Math.max(0, Math.min(Math.floor(n * 0.9), n - 51));
const [deep] = await sql<{ at: Date; id: string }[]>`
  select date_trunc('milliseconds', created_at) as at, id from sessions where tenant = 'default'
  order by created_at desc, id desc offset ${depth} limit 1`;
await sql.end();
const cursor = Buffer.from(JSON.stringify([deep.at.toISOString(), deep.id])).toString("base64url");
const TENANTS = ["default", "acme", "globex", "initech"];
const env = gatewayEnv(url, {
  MOORING_INSTANCE_ID: "bench-growth",
  MOORING_MAX_ACTIVE: "1000",
  MOORING_MAX_QUEUED: "100000",
  MOORING_TENANTS: JSON.stringify(
    Object.fromEntries(
      TENANTS.map((t) => [t, { tokens: [`growth-${t}`], maxActive: 1000, maxQueued: 100_000 }]),
    ),
  ),
});
const samples = Number(process.env.SAMPLES ?? 200);
for (const dir of dirs) {
  const gw = await spawnGateway({ env, cwd: dir });
  try {
    await gw.waitReady(600_000, 20);
    const client = new HttpClient(gw.url, 4, { authorization: "Bearer growth-default" });
    const time = async (path: string) => {
      for (let i = 0; i < 10; i++) await client.request("GET", path);
      const t: number[] = [];
      for (let i = 0; i < samples; i++) {
        const t0 = performance.now();
        const a = await client.request("GET", path);
        t.push(performance.now() - t0);
        if (a.status !== 200 || (a.body as { items: unknown[] }).items.length !== 50)
          throw new Error(`${path}: ${a.status}`);
      }
      return `p50 ${percentile(t, 50).toFixed(2)} ms, p99 ${percentile(t, 99).toFixed(2)} ms`;
    };
    const first = await time("/v1/sessions?limit=50");
    const deepPage = await time(`/v1/sessions?limit=50&cursor=${cursor}`);
    console.log(`${dbName} ${dir}: first page ${first}; deep cursor ${deepPage} (${samples} samples)`);
    client.close();
  } finally {
    await gw.stop();
  }
}
