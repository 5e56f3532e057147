/**
 * Turn lifecycle throughput: N turns on the simulated agent, each answering at once with 10 events
 * (task.queued, task.started, 2 × tool.call/tool.result, message.delta, message, usage,
 * task.completed), submitted over HTTP by C concurrent clients, timed from the first submit to the
 * last terminal state. References on the same database in the same run: pgbench running the same
 * lifecycle in SQL (4 commits: insert, SKIP LOCKED claim, 10 events in one statement, complete) at
 * the same concurrency, and graphile-worker adding and running N no-op jobs.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Logger, makeWorkerUtils, runMigrations } from "graphile-worker";
import pg from "pg";
import type { BenchDatabase } from "./lib/db.js";
import { findPgbench } from "./lib/db.js";
import { cpuProfileFlags, gatewayEnv, repoRoot, spawnGateway, track } from "./lib/gateway.js";
import { createSessions, HttpClient } from "./lib/http.js";
import { sleep, wallMs } from "./lib/stats.js";
import { atLeast, type BenchContext, type Benchmark, ratio, type Row, type Sample } from "./lib/types.js";

/** 10 events per turn, counting the task.* ones. */
export const TEN_EVENT_PROMPT = "[tool 10] [tool 10] [tokens 5]";
const CLIENTS = 32;

const quietLogger = new Logger(() => (level, message) => {
  if (level === "error") process.stderr.write(`graphile-worker: ${message}\n`);
});

const size = (ctx: BenchContext) => ({
  turns: ctx.options.quick ? 300 : 3000,
  sessions: ctx.options.quick ? 300 : 1000,
  warmup: ctx.options.quick ? 50 : 300,
});

export const throughput: Benchmark = {
  id: "throughput",
  title: "Turn lifecycle throughput",
  describe: (ctx) => {
    const s = size(ctx);
    return `${s.turns} turns of 10 events over ${s.sessions} sessions, ${CLIENTS} HTTP clients, gate limits raised; pgbench and graphile-worker at the same concurrency`;
  },
  async run(ctx) {
    const s = size(ctx);
    const db = await ctx.databases.create("throughput");
    try {
      await db.sql`checkpoint`;
      const mooring = await runMooring(ctx, db, s);
      await db.sql`checkpoint`;
      const pgbench = await runPgbench(ctx, db, s.turns);
      await db.sql`checkpoint`;
      const graphile = await runGraphileWorker(ctx, db, s.turns);
      ctx.log(
        `  mooring ${mooring.rate.toFixed(0)}/s (${mooring.eventsPerTurn.toFixed(1)} events/turn, ${mooring.failed} not completed), pgbench ${pgbench.toFixed(0)}/s, graphile-worker ${graphile.toFixed(0)}/s`,
      );
      return {
        mooring: mooring.rate,
        pgbench,
        graphile,
        eventsPerTurn: mooring.eventsPerTurn,
        failed: mooring.failed,
        submitP50: mooring.submitP50,
      };
    } finally {
      await ctx.databases.drop(db);
    }
  },
  rows(m: Sample): Row[] {
    const benchmark = "Turn lifecycle throughput";
    const vsPg = ratio(m.mooring, m.pgbench);
    const vsGw = ratio(m.mooring, m.graphile);
    return [
      {
        benchmark,
        figure: "turns/s vs pgbench lifecycle",
        value: m.mooring,
        unit: "turns/s",
        reference: { label: "pgbench, same lifecycle in SQL", value: m.pgbench, unit: "lifecycles/s" },
        ratio: vsPg,
        ...atLeast(vsPg, 0.5, "pgbench"),
      },
      {
        benchmark,
        figure: "turns/s vs graphile-worker",
        value: m.mooring,
        unit: "turns/s",
        reference: { label: "graphile-worker 0.17.3, no-op jobs", value: m.graphile, unit: "jobs/s" },
        ratio: vsGw,
        ...atLeast(vsGw, 1.2, "graphile-worker"),
        note: `events per turn ${m.eventsPerTurn?.toFixed(1)}, turns not completed ${m.failed}`,
      },
    ];
  },
};

/** The throughput of mooring alone on `db` (fresh: every task in it counts); `env` is added to the gateway's. */
export async function runMooring(
  _ctx: BenchContext,
  db: BenchDatabase,
  s: { turns: number; sessions: number; warmup: number },
  env: Record<string, string> = {},
) {
  const gateway = await spawnGateway({
    env: gatewayEnv(db.url, {
      MOORING_MAX_ACTIVE: "100000",
      MOORING_MAX_QUEUED: "1000000",
      MOORING_INSTANCE_ID: "bench-throughput",
      ...env,
    }),
    nodeFlags: cpuProfileFlags(),
  });
  const client = new HttpClient(gateway.url, CLIENTS * 2);
  try {
    await gateway.waitReady();
    const sessions = await createSessions(client, s.sessions);
    // Warm up (JIT, connections, conversations) on the same sessions, then wait for it to drain.
    await submitAll(client, sessions, s.warmup);
    await waitTerminal(db, s.warmup);
    await db.sql`checkpoint`;
    const { first, latencies } = await submitAll(client, sessions, s.turns);
    const total = s.warmup + s.turns;
    await waitTerminal(db, total);
    const [row] = await db.sql<{ last: number; completed: number; events: number }[]>`
      select extract(epoch from max(finished_at)) * 1000 as last,
             count(*) filter (where status = 'completed')::int as completed,
             (select count(*)::int from events where task_id is not null) as events
      from tasks`;
    const seconds = (Number(row.last) - first) / 1000;
    latencies.sort((a, b) => a - b);
    return {
      rate: s.turns / seconds,
      eventsPerTurn: row.events / total,
      failed: total - row.completed,
      submitP50: latencies[Math.floor(latencies.length / 2)],
    };
  } finally {
    client.close();
    await gateway.stop();
  }
}

async function submitAll(client: HttpClient, sessions: string[], n: number) {
  let next = 0;
  let first = Number.POSITIVE_INFINITY;
  const latencies: number[] = [];
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const t0 = wallMs();
      if (t0 < first) first = t0;
      const answer = await client.request("POST", `/v1/sessions/${sessions[i % sessions.length]}/turns`, {
        prompt: TEN_EVENT_PROMPT,
      });
      if (answer.status !== 202)
        throw new Error(`submit answered ${answer.status}: ${JSON.stringify(answer.body)}`);
      latencies.push(wallMs() - t0);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, worker));
  return { first, latencies };
}

async function waitTerminal(db: BenchDatabase, total: number, timeoutMs = 300_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [{ n }] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from tasks where status in ('completed', 'failed', 'cancelled', 'expired', 'interrupted')`;
    if (n >= total) return;
    if (Date.now() > deadline) throw new Error(`only ${n} of ${total} turns finished in ${timeoutMs} ms`);
    await sleep(20);
  }
}

const PGBENCH_SCHEMA = `
create schema pgbench_ref;
create table pgbench_ref.tasks (
  id bigserial primary key, session_id int not null, status text not null, prompt text not null,
  attempt int not null default 0, created_at timestamptz not null default now(),
  started_at timestamptz, finished_at timestamptz, result jsonb);
create index tasks_queued_idx on pgbench_ref.tasks (id) where status = 'queued';
create table pgbench_ref.events (
  task_id bigint not null, seq int not null, type text not null, at timestamptz not null default now(),
  data jsonb not null, primary key (task_id, seq));
`;

/** One lifecycle per pgbench transaction; each statement commits on its own (autocommit), 4 commits. */
const PGBENCH_SCRIPT = `\\set sid random(1, 1000)
insert into pgbench_ref.tasks (session_id, status, prompt) values (:sid, 'queued', '${TEN_EVENT_PROMPT}');
\\set claimed 0
with c as (select id from pgbench_ref.tasks where status = 'queued' order by id limit 1 for update skip locked)
update pgbench_ref.tasks t set status = 'running', attempt = t.attempt + 1, started_at = now()
from c where t.id = c.id returning t.id as claimed \\aset
insert into pgbench_ref.events (task_id, seq, type, data)
select :claimed, g, 'event', '{"text": "chunk"}'::jsonb from generate_series(1, 10) g where :claimed > 0;
update pgbench_ref.tasks set status = 'completed', finished_at = now(), result = '{"text": "done"}'::jsonb where id = :claimed;
`;

async function runPgbench(ctx: BenchContext, db: BenchDatabase, turns: number): Promise<number> {
  const pgbench = findPgbench();
  if (!pgbench) {
    ctx.log("  pgbench not found (set PGBENCH): reference skipped");
    return Number.NaN;
  }
  await db.sql.unsafe(PGBENCH_SCHEMA);
  const dir = await mkdtemp(join(tmpdir(), "mooring-bench-pgbench-"));
  try {
    const script = join(dir, "lifecycle.sql");
    writeFileSync(script, PGBENCH_SCRIPT);
    const url = new URL(db.url);
    const perClient = Math.ceil(turns / CLIENTS);
    const run = async (transactions: number) => {
      const args = [
        "-n",
        "-M",
        "prepared",
        "-c",
        String(CLIENTS),
        "-j",
        "2",
        "-t",
        String(transactions),
        "-f",
        script,
        "-h",
        url.hostname,
        "-p",
        url.port || "5432",
        "-U",
        decodeURIComponent(url.username || "postgres"),
        url.pathname.slice(1),
      ];
      const out = await exec(
        pgbench,
        args,
        url.password ? { PGPASSWORD: decodeURIComponent(url.password) } : {},
      );
      const match = out.match(/tps = ([\d.]+) \(without initial connection time\)/);
      if (!match) throw new Error(`pgbench output not understood:\n${out}`);
      return Number(match[1]);
    };
    await run(Math.max(2, Math.ceil(perClient / 10))); // warm-up, like the gateway's
    await db.sql`checkpoint`;
    return await run(perClient);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function exec(cmd: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (c) => (out += c));
    child.stderr.on("data", (c) => (out += c));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}:\n${out}`)),
    );
  });
}

/**
 * A pg pool that outlives graphile-worker's use of it. graphile-worker ends the pools it creates
 * without waiting and removes its error handlers at once, so a socket still closing when the
 * benchmark drops the database (`with (force)` terminates it) raised an unhandled 'error' and
 * crashed the run. Our pool keeps its handlers for good and is ended, awaited, by us.
 */
function referencePool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  const ignore = () => {};
  pool.on("error", ignore);
  pool.on("connect", (client) => client.on("error", ignore));
  return pool;
}

async function runGraphileWorker(_ctx: BenchContext, db: BenchDatabase, jobs: number): Promise<number> {
  const pool = referencePool(db.url, CLIENTS);
  try {
    return await timeGraphileWorker(db, pool, jobs);
  } finally {
    await pool.end();
  }
}

async function timeGraphileWorker(db: BenchDatabase, pool: pg.Pool, jobs: number): Promise<number> {
  await runMigrations({ pgPool: pool, logger: quietLogger });
  const concurrency = Number(process.env.BENCH_GW_CONCURRENCY ?? CLIENTS);
  const warmup = Math.max(20, Math.floor(jobs / 10));
  const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger });
  const child = track(
    spawn(process.execPath, ["--import", "tsx", "bench/graphile-worker-child.ts"], {
      cwd: repoRoot,
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        JOBS: String(warmup + jobs),
        CONCURRENCY: String(concurrency),
      },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  let out = "";
  const lines: string[] = [];
  let waiter: (() => void) | null = null;
  child.stdout!.on("data", (c: Buffer) => {
    out += c;
    const parts = out.split("\n");
    out = parts.pop() ?? "";
    lines.push(...parts);
    waiter?.();
  });
  let errors = "";
  child.stderr!.on("data", (c: Buffer) => (errors += c));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const line = async (prefix: string, timeoutMs = 300_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = lines.find((l) => l.startsWith(prefix));
      if (found) return found;
      if (child.exitCode !== null) throw new Error(`graphile-worker child exited:\n${errors}`);
      if (Date.now() > deadline)
        throw new Error(`graphile-worker: no "${prefix}" in ${timeoutMs} ms:\n${errors}`);
      await new Promise<void>((resolve) => {
        waiter = resolve;
        setTimeout(resolve, 200);
      });
    }
  };
  try {
    await line("ready");
    const add = async (n: number) => {
      let next = 0;
      let first = Number.POSITIVE_INFINITY;
      const worker = async () => {
        while (next < n) {
          next++;
          const t0 = wallMs();
          if (t0 < first) first = t0;
          await utils.addJob("noop", {});
        }
      };
      await Promise.all(Array.from({ length: CLIENTS }, worker));
      return first;
    };
    await add(warmup);
    // Let the warm-up drain before timing.
    for (;;) {
      const [{ n }] = await db.sql<
        { n: number }[]
      >`select count(*)::int as n from graphile_worker._private_jobs`;
      if (n === 0) break;
      await sleep(20);
    }
    const first = await add(jobs);
    const done = Number((await line("done")).split(" ")[1]);
    return jobs / ((done - first) / 1000);
  } finally {
    child.kill("SIGTERM");
    await Promise.race([exited, sleep(5000)]);
    if (child.exitCode === null) child.kill("SIGKILL");
    await utils.release();
  }
}
