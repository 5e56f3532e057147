/**
 * Where a turn waits under the throughput benchmark's load: runs its turns (10 events each on the
 * simulated agent, 32 HTTP clients) while another connection samples `pg_stat_activity` for the
 * gateway's backends every few ms, then prints what the backends were doing (on CPU, waiting for
 * the gateway to send the next statement, waiting on a lock, on I/O) and, for lock waits, which
 * statement waited; and, from the gateway's /metrics, the time each turn spent queued (admission
 * commit → claim) and running (claim → settlement), and the event log's flush time. A profiling
 * aid, not a benchmark: `npx tsx bench/wait-events.ts [turns]` (default 3000);
 * BENCH_WAITS_SETTING=name=value sets a Postgres setting on its database for an experiment.
 */
import postgres from "postgres";
import { BenchDatabases } from "./lib/db.js";
import { gatewayEnv, spawnGateway } from "./lib/gateway.js";
import { createSessions, HttpClient } from "./lib/http.js";
import { sleep, wallMs } from "./lib/stats.js";
import { TEN_EVENT_PROMPT } from "./throughput.js";

const turns = Number(process.argv[2] ?? 3000);
const CLIENTS = 32;
const SAMPLE_MS = 5;

const databases = await BenchDatabases.open(console.log);
const db = await databases.create("waits");
// An experiment's database setting, e.g. BENCH_WAITS_SETTING=synchronous_commit=off.
const setting = process.env.BENCH_WAITS_SETTING?.match(/^([a-z_]+)=([a-z0-9_]+)$/);
if (setting) await db.sql.unsafe(`alter database ${db.name} set ${setting[1]} = '${setting[2]}'`);
const gateway = await spawnGateway({
  env: gatewayEnv(db.url, {
    MOORING_MAX_ACTIVE: "100000",
    MOORING_MAX_QUEUED: "1000000",
    MOORING_INSTANCE_ID: "bench-waits",
  }),
});
const sampler = postgres(databases.adminUrl, { max: 1, onnotice: () => {} });
const client = new HttpClient(gateway.url, CLIENTS * 2);
try {
  await gateway.waitReady();
  const sessions = await createSessions(client, Math.min(1000, turns));
  const submitAll = async (n: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < n) {
          const i = next++;
          const answer = await client.request("POST", `/v1/sessions/${sessions[i % sessions.length]}/turns`, {
            prompt: TEN_EVENT_PROMPT,
          });
          if (answer.status !== 202) throw new Error(`submit answered ${answer.status}`);
        }
      }),
    );
  };
  const finished = async (n: number) => {
    for (;;) {
      const [{ c }] = await db.sql<{ c: number }[]>`
        select count(*)::int as c from tasks where status in ('completed', 'failed', 'cancelled', 'expired', 'interrupted')`;
      if (c >= n) return;
      await sleep(50);
    }
  };
  // Warm-up (JIT, connections), not sampled.
  const warmup = Math.min(300, Math.round(turns / 10));
  await submitAll(warmup);
  await finished(warmup);
  const before = await scrape(gateway.url);

  const states = new Map<string, number>();
  const lockWaits = new Map<string, number>();
  const idleInTx = new Map<string, number>();
  let samples = 0;
  let sampling = true;
  const sample = async () => {
    while (sampling) {
      const rows = await sampler<{ state: string; kind: string; query: string }[]>`
        select state, coalesce(wait_event_type || ':' || wait_event, 'on CPU') as kind, left(query, 70) as query
        from pg_stat_activity
        where datname = ${db.name} and backend_type = 'client backend' and pid <> pg_backend_pid()`;
      samples++;
      for (const r of rows) {
        const key = `${r.state} / ${r.state === "active" ? r.kind : r.kind.replace(/^Client:ClientRead$/, "waiting for the client")}`;
        states.set(key, (states.get(key) ?? 0) + 1);
        if (r.state === "active" && r.kind.startsWith("Lock:")) {
          const q = `${r.kind} ${r.query.replace(/\s+/g, " ")}`;
          lockWaits.set(q, (lockWaits.get(q) ?? 0) + 1);
        }
        if (r.state === "idle in transaction") {
          const q = r.query.replace(/\s+/g, " ");
          idleInTx.set(q, (idleInTx.get(q) ?? 0) + 1);
        }
      }
      await sleep(SAMPLE_MS);
    }
  };
  const t0 = wallMs();
  const sampled = sample();
  await submitAll(turns);
  await finished(warmup + turns);
  const seconds = (wallMs() - t0) / 1000;
  sampling = false;
  await sampled;
  const after = await scrape(gateway.url);

  console.log(
    `${turns} turns in ${seconds.toFixed(1)} s (${(turns / seconds).toFixed(0)}/s); ${samples} samples of pg_stat_activity`,
  );
  console.log("\nthe gateway's backends, average number in each state per sample:");
  for (const [k, n] of [...states].sort((a, b) => b[1] - a[1]))
    console.log(`  ${(n / samples).toFixed(2)}  ${k}`);
  console.log("\nlock waits by statement (share of samples with one):");
  for (const [k, n] of [...lockWaits].sort((a, b) => b[1] - a[1]).slice(0, 10))
    console.log(`  ${((100 * n) / samples).toFixed(1)}%  ${k}`);
  console.log("\nidle in transaction, by the last statement sent (share of samples):");
  for (const [k, n] of [...idleInTx].sort((a, b) => b[1] - a[1]).slice(0, 10))
    console.log(`  ${((100 * n) / samples).toFixed(1)}%  ${k}`);
  const mean = (name: string) => {
    const sum = (after.get(`${name}_sum`) ?? 0) - (before.get(`${name}_sum`) ?? 0);
    const count = (after.get(`${name}_count`) ?? 0) - (before.get(`${name}_count`) ?? 0);
    return count > 0 ? `${((1000 * sum) / count).toFixed(1)} ms (${count})` : "n/a";
  };
  console.log("\nfrom /metrics, means over the sampled turns:");
  console.log(`  queued (admission commit → claim): ${mean("mooring_task_queue_seconds")}`);
  console.log(`  ran (claim → settlement): ${mean("mooring_task_run_seconds")}`);
  console.log(`  event log flush: ${mean("mooring_event_flush_seconds")}`);
} finally {
  client.close();
  await gateway.stop();
  await sampler.end({ timeout: 1 });
  await databases.dropAll();
}

/** Histogram sums and counts from /metrics, summed over their labels. */
async function scrape(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = line.match(/^([a-z_]+_(?:sum|count))(?:\{[^}]*\})? ([0-9.e+-]+)$/);
    if (m) out.set(m[1], (out.get(m[1]) ?? 0) + Number(m[2]));
  }
  return out;
}
