/**
 * What the database does for one turn: runs the throughput benchmark's turn (10 events on the
 * simulated agent, submitted over HTTP by 32 clients) N times and prints, per turn, the commits
 * (pg_stat_database) and every statement's calls and execution time (pg_stat_statements, when the
 * server preloads it). A profiling aid, not a benchmark: `npx tsx bench/statements-per-turn.ts [N]`.
 *
 * pg_stat_statements needs `shared_preload_libraries = 'pg_stat_statements'` and a restart; without
 * it only the commit and row counts are printed. BENCH_CPU_PROF=<dir> profiles the gateway (V8 CPU
 * profile; `npx tsx bench/profile-summary.ts <file>` sums it by package and function).
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { BenchDatabases } from "./lib/db.js";
import { cpuProfileFlags, gatewayEnv, spawnGateway } from "./lib/gateway.js";
import { createSessions, HttpClient } from "./lib/http.js";
import { sleep } from "./lib/stats.js";
import { TEN_EVENT_PROMPT } from "./throughput.js";

const turns = Number(process.argv[2] ?? 1000);

/** CPU seconds (user + system) of a process, from /proc. */
function cpuOf(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** CPU seconds of every live `postgres` process (the gateway's pooled backends live through the run). */
function postgresCpu(): number {
  let total = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === "postgres") total += cpuOf(Number(entry));
    } catch {}
  }
  return total;
}

function selfCpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}
const CLIENTS = 32;

const databases = await BenchDatabases.open((line) => console.log(line));
const db = await databases.create("statements");
const gateway = await spawnGateway({
  env: gatewayEnv(db.url, { MOORING_MAX_ACTIVE: "100000", MOORING_MAX_QUEUED: "1000000" }),
  nodeFlags: cpuProfileFlags(),
});
const client = new HttpClient(gateway.url, CLIENTS * 2);
try {
  await gateway.waitReady();
  const sessions = await createSessions(client, Math.min(turns, 500));
  const run = async (n: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < n) {
          const i = next++;
          await client.json("POST", `/v1/sessions/${sessions[i % sessions.length]}/turns`, {
            prompt: TEN_EVENT_PROMPT,
          });
        }
      }),
    );
    for (;;) {
      const [{ n: open }] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from tasks where status in ('queued', 'running', 'cancelling')`;
      if (open === 0) return;
      await sleep(20);
    }
  };
  /**
   * With webhooks on (BENCH_GATEWAY_ENV with MOORING_WEBHOOKS): until the outbox is sent, so the
   * deliveries counted are exactly the turns' own (a backlog left by the warm-up would otherwise be
   * counted in the run, and the run's own left out).
   */
  const drained = async () => {
    for (;;) {
      const [{ n }] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from webhook_deliveries where status = 'pending'`;
      if (n === 0) return;
      await sleep(20);
    }
  };
  await run(Math.min(200, turns));
  await drained();
  // Only when the server preloads the module: the extension can be created without it, but not used.
  const statements = await db.sql`create extension if not exists pg_stat_statements`
    .then(() => db.sql`select pg_stat_statements_reset()`)
    .then(
      () => true,
      () => false,
    );
  const counters = async () => {
    // Backends report their counters when idle, at most once a second.
    await sleep(1500);
    const [row] = await db.sql<{ commits: number; inserted: number; updated: number; deleted: number }[]>`
      select xact_commit::int as commits, tup_inserted::int as inserted, tup_updated::int as updated,
             tup_deleted::int as deleted
      from pg_stat_database where datname = current_database()`;
    return row;
  };
  /** Transactions of the after-commit Notifier so far (they commit without a WAL flush wait). */
  const notificationTransactions = async () => {
    const text = await (await fetch(`${gateway.url}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith("mooring_notification_transactions_total "));
    return line ? Number(line.split(" ")[1]) : 0;
  };
  const before = await counters();
  const notifiedBefore = await notificationTransactions();
  // With STRACE=1: count the gateway's system calls during the timed run (strace -c).
  const strace = process.env.STRACE
    ? spawn("strace", ["-c", "-f", "-p", String(gateway.pid), "-o", "/tmp/mooring-strace.txt"], {
        stdio: "ignore",
      })
    : null;
  if (strace) await sleep(500);
  const cpuBefore = { gateway: cpuOf(gateway.pid), postgres: postgresCpu(), client: selfCpu() };
  const started = performance.now();
  await run(turns);
  const seconds = (performance.now() - started) / 1000;
  await drained();
  if (strace) {
    strace.kill("SIGINT");
    await new Promise((resolve) => strace.once("exit", resolve));
    console.log(readFileSync("/tmp/mooring-strace.txt", "utf8").split("\n").slice(0, 14).join("\n"));
  }
  const cpu = {
    gateway: cpuOf(gateway.pid) - cpuBefore.gateway,
    postgres: postgresCpu() - cpuBefore.postgres,
    client: selfCpu() - cpuBefore.client,
  };
  const after = await counters();
  const notified = (await notificationTransactions()) - notifiedBefore;
  const per = (k: keyof typeof before) => ((after[k] - before[k]) / turns).toFixed(2);
  console.log(`${turns} turns in ${seconds.toFixed(1)} s (${(turns / seconds).toFixed(0)}/s)`);
  const ms = (v: number) => ((v / turns) * 1000).toFixed(2);
  console.log(
    `CPU per turn: gateway ${ms(cpu.gateway)} ms, postgres ${ms(cpu.postgres)} ms, this client ${ms(cpu.client)} ms`,
  );
  console.log(
    `per turn: commits ${per("commits")}, rows inserted ${per("inserted")}, updated ${per("updated")}, deleted ${per("deleted")}`,
  );
  // The guard "commits per turn must not rise" is about commits that wait for the WAL: the
  // Notifier's own transactions (docs/architecture.md, Notifications) are counted apart.
  const commits = after.commits - before.commits;
  console.log(
    `per turn: durable commits ${((commits - notified) / turns).toFixed(2)}, notification-only transactions ${(notified / turns).toFixed(2)}`,
  );
  const [timing] = await db.sql<{ waited: number; ran: number; p90: number }[]>`
    select avg(extract(epoch from started_at - created_at) * 1000)::float as waited,
           avg(extract(epoch from finished_at - started_at) * 1000)::float as ran,
           percentile_cont(0.9) within group (order by extract(epoch from finished_at - started_at) * 1000)::float as p90
    from tasks`;
  console.log(
    `per turn: queued ${timing.waited.toFixed(1)} ms, ran ${timing.ran.toFixed(1)} ms (p90 ${timing.p90.toFixed(1)} ms)`,
  );
  const tables = await db.sql<{ relname: string; upd: number; hot: number }[]>`
    select relname, n_tup_upd::int as upd, n_tup_hot_upd::int as hot from pg_stat_user_tables
    where relname in ('tasks', 'sessions', 'events', 'webhook_deliveries') order by relname`;
  console.log(
    `updates (HOT share): ${tables.map((t) => `${t.relname} ${t.upd} (${t.upd ? Math.round((100 * t.hot) / t.upd) : 0}%)`).join(", ")}`,
  );
  if (statements) {
    const rows = await db.sql<{ calls: number; ms: number; blocks: number; query: string }[]>`
      select calls::int, total_exec_time as ms, (shared_blks_hit + shared_blks_read)::float as blocks,
             regexp_replace(query, '\\s+', ' ', 'g') as query
      from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
      order by total_exec_time desc`;
    const totalMs = rows.reduce((a, r) => a + r.ms, 0);
    const totalCalls = rows.reduce((a, r) => a + r.calls, 0);
    console.log(
      `statements per turn ${(totalCalls / turns).toFixed(1)}, execution ${((totalMs / turns) * 1000).toFixed(0)} µs per turn`,
    );
    for (const r of rows.slice(0, 25)) {
      console.log(
        `${(r.calls / turns).toFixed(2).padStart(6)}/turn ${((r.ms / turns) * 1000).toFixed(0).padStart(5)} µs/turn ${(r.blocks / Math.max(r.calls, 1)).toFixed(0).padStart(5)} blocks/call  ${r.query.slice(0, 130)}`,
      );
    }
  }
} finally {
  client.close();
  await gateway.stop();
  await databases.dropAll();
}
