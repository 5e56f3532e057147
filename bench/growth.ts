/**
 * Growth: what mooring costs after a year, not after a minute. At each size (10³, 10⁴, 10⁵, 10⁶
 * sessions; --quick stops at 10⁵; BENCH_GROWTH_SIZES=1000,3000 for any list) a fresh database is
 * migrated and seeded in SQL (INSERT … SELECT from generate_series, never through the API): the
 * sessions of four tenants over the past year, 30% of them archived, each with one settled turn of
 * 10 events (gap-free seqs 1..10, the throughput benchmark's turn: queued, started, 2 tool calls and
 * results, delta, message, usage, completed), four long sessions of 200 turns (2000 events, for the
 * replay), and a queue: 100 sessions with a running turn under a live lease of another instance and
 * two turns waiting behind it (200 queued). A real gateway is started on it and each operation is
 * timed from a client, one request at a time: p50 and p99 per size. The figure is each operation's
 * value at the largest size over its value at the smallest: the goal is ≤ 1.5×, an operation that
 * grows with the database is a defect (a missing index, a count over all rows).
 *
 * How each is timed: HTTP round trips from a keep-alive client for submit (`POST
 * /v1/sessions/:id/turns` on an idle session, the turn then awaited untimed), `GET /v1/tasks/:id`
 * (settled turns), a `GET /v1/sessions` page of 50 (the first, and one from a cursor 90% down the
 * tenant's sessions), the session snapshot (`GET /v1/sessions/:id`), the replay of 1000 events after
 * a seq (`GET /v1/sessions/:id/events?afterSeq=&limit=1000`, JSON), `GET /v1/gate` and a queue
 * position (`GET /v1/tasks/:id` of a waiting turn). The claim is the claim statement itself
 * (sql/task-claim.ts) timed from here, on a transaction that holds the gate lock and has inserted
 * one runnable queued turn, rolled back after. The sweep is the lease sweep and the queue expiry
 * (sql/task-orphans.ts, sql/task-expire.ts) timed the same way. The startup reconcile is the
 * "ready" log line's `steps.reconciled - steps.registered` of a gateway started with LOG_LEVEL=info
 * (one sample per size); that gateway's RSS, 3 s after ready with no session in use, is the RSS
 * figure. Sizes: the events table and its indexes per 10⁶ events.
 */
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { connect, type Sql as GatewaySql, type Tx } from "../src/db/client.js";
import { applyMigrations } from "../src/db/migrate.js";
import { taskClaim } from "../src/sql/task-claim.js";
import { taskExpireQueued } from "../src/sql/task-expire.js";
import { gateLock } from "../src/sql/gate-lock.js";
import { taskLockExpiredLeases } from "../src/sql/task-orphans.js";
import type { Sql } from "./lib/db.js";
import { gatewayEnv, type GatewayProcess, spawnGateway } from "./lib/gateway.js";
import { HttpClient } from "./lib/http.js";
import { percentile, sleep } from "./lib/stats.js";
import { type BenchContext, type Benchmark, ratio, type Row, type Sample } from "./lib/types.js";

const TENANTS = ["default", "acme", "globex", "initech"];
const INSTANCE = "bench-growth";
const PEER = "bench-growth-peer";
/** Sessions with a running turn under a peer's live lease, each with QUEUED_PER_BUSY turns waiting. */
const BUSY = 100;
const QUEUED_PER_BUSY = 2;
const LONG_SESSIONS = 4;
const LONG_TURNS = 200;
const MAX_ACTIVE = 1000;
const PAGE = 50;
const REPLAY = 1000;
/** The caller's bearer token: its tenant, `default`, is the one the requests are aimed at. */
const TOKEN = "growth-default";

/** Operations in table order; `heavy` ones take fewer samples. */
const OPS = [
  { id: "submit", label: "submit (POST turns)", heavy: false },
  { id: "claim", label: "claim (claim statement, SQL)", heavy: false },
  { id: "task", label: "GET /v1/tasks/:id", heavy: false },
  { id: "pageFirst", label: "GET /v1/sessions, first page", heavy: true },
  { id: "pageDeep", label: "GET /v1/sessions, deep cursor", heavy: true },
  { id: "snapshot", label: "GET /v1/sessions/:id (snapshot)", heavy: false },
  { id: "replay", label: `replay ${REPLAY} events after a seq`, heavy: true },
  { id: "gate", label: "GET /v1/gate", heavy: false },
  { id: "position", label: "queue position (GET a waiting task)", heavy: false },
  { id: "sweep", label: "sweep (lease sweep + queue expiry, SQL)", heavy: true },
] as const;
type OpId = (typeof OPS)[number]["id"];

function sizes(ctx: BenchContext): number[] {
  const given = process.env.BENCH_GROWTH_SIZES;
  if (given) {
    const list = given.split(",").map((s) => Number(s.trim()));
    if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 100)) {
      throw new Error("BENCH_GROWTH_SIZES must list session counts of at least 100, e.g. 1000,3000");
    }
    return list;
  }
  return ctx.options.quick ? [1000, 10_000, 100_000] : [1000, 10_000, 100_000, 1_000_000];
}

function samplesPer(heavy: boolean): number {
  const n = Number(process.env.BENCH_GROWTH_SAMPLES ?? 200);
  return heavy ? Math.max(10, Math.round(n / 4)) : n;
}

const sizeLabel = (n: number) =>
  Number.isInteger(Math.log10(n)) ? `10^${Math.log10(n)}` : n.toLocaleString("en-US");

export const growth: Benchmark = {
  id: "growth",
  title: "Growth (a year of sessions)",
  describe: (ctx) =>
    `sessions ${sizes(ctx).join(", ")} (4 tenants, 30% archived, 10 events per turn, ${LONG_SESSIONS} sessions of ${LONG_TURNS} turns, ${BUSY * QUEUED_PER_BUSY} turns queued behind ${BUSY} running); ${samplesPer(false)} samples per operation (${samplesPer(true)} for pages, replay and sweep), one at a time; seeded in SQL; reference: the same operation at ${sizeLabel(sizes(ctx)[0])} sessions`,
  async run(ctx, repetition) {
    // Once, whatever --runs says: a seed of 10^6 sessions takes minutes, and every figure is
    // already a percentile over many samples (the runner's median of one run is that run).
    if (repetition > 0) {
      ctx.log("  (growth runs once)");
      return {};
    }
    const out: Sample = {};
    for (const n of sizes(ctx)) {
      const t0 = Date.now();
      const m = await atSize(ctx, n);
      for (const [key, value] of Object.entries(m)) out[`${key}@${n}`] = value;
      ctx.log(
        `  ${n} sessions (${((Date.now() - t0) / 1000).toFixed(0)} s, seed ${m.seedSeconds.toFixed(0)} s): ` +
          OPS.map((op) => `${op.id} ${m[`${op.id}.p50`].toFixed(2)}/${m[`${op.id}.p99`].toFixed(2)}`).join(
            ", ",
          ) +
          `, reconcile ${m.reconcile.toFixed(0)} ms, RSS ${m.rss.toFixed(0)} MiB`,
      );
    }
    return out;
  },
  rows(m: Sample, ctx): Row[] {
    const list = sizes(ctx);
    const small = list[0];
    const large = list[list.length - 1];
    const benchmark = `Growth, ${sizeLabel(large)} sessions`;
    const target = `≤ 1.5× at ${sizeLabel(small)}'s`;
    const rows: Row[] = [];
    const relative = (figure: string, key: string, unit: string, withTarget: boolean, note?: string) => {
      const value = m[`${key}@${large}`];
      const reference = m[`${key}@${small}`];
      const r = ratio(value, reference);
      rows.push({
        benchmark,
        figure,
        value,
        unit,
        reference: { label: `at ${sizeLabel(small)} sessions`, value: reference, unit },
        ratio: r,
        target: withTarget ? target : null,
        met: withTarget ? r !== null && r <= 1.5 : null,
        note,
      });
    };
    const series = (key: string) =>
      list.map((n) => `${sizeLabel(n)}: ${m[`${key}@${n}`]?.toFixed(2)}`).join(", ");
    for (const op of OPS) {
      relative(`${op.label} p50`, `${op.id}.p50`, "ms", true, `p50 by size (ms) ${series(`${op.id}.p50`)}`);
      relative(`${op.label} p99`, `${op.id}.p99`, "ms", true, `p99 by size (ms) ${series(`${op.id}.p99`)}`);
    }
    relative(
      "startup reconcile (ready's steps)",
      "reconcile",
      "ms",
      true,
      `by size (ms, one start each) ${series("reconcile")}`,
    );
    relative("gateway RSS, idle", "rss", "MiB", false, `by size (MiB) ${series("rss")}`);
    for (const [key, figure] of [
      ["eventsTable", "events table per 10^6 events"],
      ["eventsIndexes", "events indexes per 10^6 events"],
      ["databasePerMillion", "whole database per 10^6 events"],
    ] as const) {
      const value = m[`${key}@${large}`] / 2 ** 20;
      rows.push({
        benchmark,
        figure,
        value,
        unit: "MiB",
        reference: null,
        ratio: null,
        target: null,
        met: null,
      });
    }
    rows[rows.length - 1].note =
      `sessions table + indexes ${(m[`sessionsBytes@${large}`] / 2 ** 20).toFixed(1)} MiB, tasks ${(m[`tasksBytes@${large}`] / 2 ** 20).toFixed(1)} MiB, events ${(m[`eventsBytes@${large}`] / 2 ** 20).toFixed(1)} MiB for ${m[`events@${large}`]} events`;
    return rows;
  },
};

/** Seed a fresh database with `n` sessions, then time every operation on a real gateway. */
async function atSize(ctx: BenchContext, n: number): Promise<Record<string, number>> {
  const db = await ctx.databases.create(`growth_${n}`);
  try {
    const database = connect(db.url, { max: 2, applicationName: "bench-growth" });
    try {
      await applyMigrations(database);
      const t0 = Date.now();
      await seed(db.sql, n);
      const seedSeconds = (Date.now() - t0) / 1000;
      if (process.env.BENCH_GROWTH_EXPLAIN) {
        // Every statement the gateways run gets its plan in the server's log (auto_explain).
        for (const setting of [
          "session_preload_libraries = 'auto_explain'",
          "auto_explain.log_min_duration = 0",
          "auto_explain.log_nested_statements = on",
        ]) {
          await db.sql.unsafe(`alter database ${db.name} set ${setting}`);
        }
        ctx.log(`  auto_explain on: plans in the server log under database ${db.name}`);
      }
      const env = gatewayEnv(db.url, {
        MOORING_INSTANCE_ID: INSTANCE,
        MOORING_MAX_ACTIVE: String(MAX_ACTIVE),
        MOORING_MAX_QUEUED: "100000",
        // Tenants with tokens, so that the client is a tenant (not an admin seeing all) and its
        // pages walk its own index, as a tenant's would.
        MOORING_TENANTS: JSON.stringify(
          Object.fromEntries(
            TENANTS.map((name) => [
              name,
              { tokens: [`growth-${name}`], maxActive: MAX_ACTIVE, maxQueued: 100_000 },
            ]),
          ),
        ),
      });

      // First start (LOG_LEVEL=info, for the "ready" line's steps): reconcile and idle RSS.
      const first = await spawnGateway({ env: { ...env, LOG_LEVEL: "info" } });
      let reconcile: number;
      let rss: number;
      try {
        await first.waitReady(600_000, 20);
        reconcile = await reconcileMs(first);
        await sleep(3000);
        rss = first.rss() / 2 ** 20;
      } finally {
        await first.stop();
      }

      // Second start (LOG_LEVEL=warn, as every benchmark gateway): the operations.
      const gateway = await spawnGateway({ env });
      try {
        await gateway.waitReady(600_000, 20);
        const ops = await measure(db.sql, database.sql, gateway);
        const sizes = await tableSizes(db.sql);
        return { seedSeconds, reconcile, rss, ...ops, ...sizes };
      } finally {
        await gateway.stop();
      }
    } finally {
      await database.close();
    }
  } finally {
    await ctx.databases.drop(db);
  }
}

async function reconcileMs(gateway: GatewayProcess): Promise<number> {
  // The gateway answers /readyz before its logger has written the "ready" line (a 10^6 run once
  // read the log between the two), so wait for the line, a while at most.
  const deadline = Date.now() + 10_000;
  while (!gateway.output().includes('"ready"') && Date.now() < deadline) {
    await Promise.race([once(gateway.child.stdout!, "data"), sleep(500)]);
  }
  for (const line of gateway.output().split("\n")) {
    if (!line.includes('"ready"')) continue;
    try {
      const entry = JSON.parse(line) as { msg?: string; steps?: Record<string, number> };
      if (entry.msg === "ready" && entry.steps) return entry.steps.reconciled - entry.steps.registered;
    } catch {
      // not a JSON line
    }
  }
  throw new Error(`no "ready" line with steps in the gateway's log:\n${gateway.output().slice(-2000)}`);
}

/**
 * The year of data, in SQL. Session g of n was created (365 days × (1 − g/n) + 3 days) ago, in
 * tenant g mod 4; 30% archived two days after creation. Ids are md5-derived so the statements can
 * refer to each other's rows without reading them back. The outbox trigger (migrations/0010) is
 * off while seeding (session_replication_role = replica): there are no webhook endpoints, and a
 * past year's deliveries would long be sent.
 */
export async function seed(sql: Sql, n: number): Promise<void> {
  const peerBoot = randomUUID();
  const tenants = `{${TENANTS.join(",")}}`;
  await sql.begin(async (tx) => {
    await tx`set local session_replication_role = replica`;
    await tx`
      insert into sessions (id, tenant, workspace, agent, title, metadata, archived_at, agent_session_id, turn_count,
                            last_assistant_message_id, context_usage, last_seq, next_turn_index, version,
                            created_at, updated_at, last_activity_at)
      select md5('s' || g)::uuid, (${tenants}::text[])[1 + g % 4], '/tmp', 'simulated', 'session ' || g,
             jsonb_build_object('ticket', 'T-' || g), case when g % 10 < 3 then c + interval '2 days' end,
             md5('a' || g)::uuid::text, 1, 'msg_' || g,
             '{"inputTokens": 1200, "contextWindow": 200000, "percent": 0.6}'::jsonb, 10, 1, 1,
             c, c + interval '20 seconds', c + interval '20 seconds'
      from (select g, now() - interval '3 days' - interval '365 days' * (1 - g::float8 / ${n}) as c
            from generate_series(1, ${n}) g) x`;
    await tx`
      insert into sessions (id, tenant, workspace, agent, title, agent_session_id, turn_count, last_seq,
                            next_turn_index, version, created_at, updated_at, last_activity_at)
      select md5('long' || g)::uuid, (${tenants}::text[])[1 + g % 4], '/tmp', 'simulated', 'long session ' || g,
             md5('along' || g)::uuid::text, ${LONG_TURNS}, ${LONG_TURNS * 10}, ${LONG_TURNS}, ${LONG_TURNS},
             now() - interval '30 days', now() - interval '1 day', now() - interval '1 day'
      from generate_series(0, ${LONG_SESSIONS - 1}) g`;
    // Every settled turn: turn k of a session has seqs 10k+1 .. 10k+10.
    await tx`
      insert into tasks (id, session_id, tenant, turn_index, status, prompt, timeout_ms, created_at, queue_deadline_at,
                         started_at, deadline_at, finished_at, attempt, owner_instance, owner_boot, result,
                         first_seq, last_seq, version)
      select md5('t' || s.id || ':' || k)::uuid, s.id, s.tenant, k, 'completed', '[tool 10] [tool 10] [tokens 5]', 600000,
             s.created_at + k * interval '1 minute' + interval '1 second',
             s.created_at + k * interval '1 minute' + interval '10 minutes',
             s.created_at + k * interval '1 minute' + interval '1.2 seconds',
             s.created_at + k * interval '1 minute' + interval '10 minutes 1.2 seconds',
             s.created_at + k * interval '1 minute' + interval '20 seconds', 1, ${PEER}, ${peerBoot}::uuid,
             '{"text": "Done.", "stopReason": "end_turn", "usage": {"inputTokens": 1200, "outputTokens": 40}, "contextPercent": 0.6}'::jsonb,
             10 * k + 1, 10 * k + 10, 2
      from sessions s cross join lateral generate_series(0, s.next_turn_index - 1) k`;
    await tx`
      insert into events (session_id, seq, task_id, type, at, data)
      select t.session_id, t.first_seq + e - 1, t.id,
             (array['task.queued', 'task.started', 'tool.call', 'tool.result', 'tool.call', 'tool.result',
                    'message.delta', 'message', 'usage', 'task.completed'])[e],
             t.created_at + e * interval '1 second',
             case e
               when 1 then jsonb_build_object('position', 1, 'turnIndex', t.turn_index, 'continuesTaskId', null)
               when 2 then jsonb_build_object('attempt', 1, 'deadlineAt', to_char(t.deadline_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
               when 3 then '{"id": "tool_1", "name": "simulated_command", "input": {"command": "produce 10 bytes"}}'::jsonb
               when 4 then '{"id": "tool_1", "isError": false, "preview": "xxxxxxxxxx", "bytes": 10, "truncated": false}'::jsonb
               when 5 then '{"id": "tool_2", "name": "simulated_command", "input": {"command": "produce 10 bytes"}}'::jsonb
               when 6 then '{"id": "tool_2", "isError": false, "preview": "xxxxxxxxxx", "bytes": 10, "truncated": false}'::jsonb
               when 7 then '{"text": "Done."}'::jsonb
               when 8 then '{"text": "Done."}'::jsonb
               when 9 then '{"inputTokens": 1200, "outputTokens": 40, "cacheCreationInputTokens": 0, "cacheReadInputTokens": 0, "contextWindow": 200000, "contextPercent": 0.6}'::jsonb
               else jsonb_build_object('status', 'completed', 'result', t.result, 'error', null)
             end
      from tasks t cross join generate_series(1, 10) e`;
    // The queue: a peer instance runs one turn of each busy session (its lease a day long, so the
    // sweep leaves it), and two turns of each wait behind it, in admission order.
    await tx`
      insert into instances (boot_id, instance_id, host, pid, version)
      values (${peerBoot}::uuid, ${PEER}, 'peer-host', 4242, 'bench')`;
    await tx`
      create temporary table busy on commit drop as
      select id, tenant from sessions where archived_at is null and turn_count = 1 order by md5(id::text) limit ${BUSY}`;
    for (let k = 1; k <= 1 + QUEUED_PER_BUSY; k++) {
      const running = k === 1;
      const first = running ? 11 : 11 + k;
      await tx`
        insert into tasks (id, session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at,
                           started_at, deadline_at, attempt, owner_instance, owner_boot, lease_expires_at,
                           first_seq, last_seq, created_at)
        select md5('q' || b.id || ':' || ${k}::int)::uuid, b.id, b.tenant, ${k}::int, ${running ? "running" : "queued"},
               '[tool 10] [tool 10] [tokens 5]', 600000, now() + interval '1 day',
               ${running ? sql`now()` : sql`null`}, ${running ? sql`now() + interval '1 day'` : sql`null`},
               ${running ? 1 : 0}, ${running ? PEER : null}, ${running ? peerBoot : null}::uuid,
               ${running ? sql`now() + interval '1 day'` : sql`null`},
               ${first}::int, ${running ? 12 : first}::int, now() - interval '1 minute'
        from busy b order by b.id`;
    }
    await tx`
      insert into events (session_id, seq, task_id, type, data)
      select t.session_id, t.first_seq, t.id, 'task.queued', jsonb_build_object('position', 1, 'turnIndex', t.turn_index, 'continuesTaskId', null)
      from tasks t where t.status in ('running', 'queued')
      union all
      select t.session_id, t.last_seq, t.id, 'task.started', jsonb_build_object('attempt', 1, 'deadlineAt', null)
      from tasks t where t.status = 'running'`;
    await tx`
      update sessions s set last_seq = ${11 + QUEUED_PER_BUSY + 1}, next_turn_index = ${2 + QUEUED_PER_BUSY},
        turn_count = 2, last_activity_at = now() - interval '1 minute'
      where s.id in (select id from busy)`;
  });
  await sql`vacuum analyze`;
  await sql`checkpoint`;
}

interface Picks {
  idle: string[];
  tasks: string[];
  snapshots: string[];
  waiting: string[];
  long: { id: string; lastSeq: number }[];
  deepCursor: string;
}

/** Rows of the caller's tenant (`default`, by its token) to aim the requests at, picked at random. */
async function pick(sql: Sql): Promise<Picks> {
  const count = samplesPer(false);
  const idle = await sql<{ id: string }[]>`
    select id from sessions s where tenant = 'default' and archived_at is null and turn_count = 1
      and not exists (select 1 from tasks t where t.session_id = s.id and t.status in ('queued', 'running', 'cancelling'))
    order by random() limit ${count}`;
  const tasks = await sql<{ id: string }[]>`
    select id from tasks where tenant = 'default' and status = 'completed' order by random() limit ${count}`;
  const snapshots = await sql<{ id: string }[]>`
    select id from sessions where tenant = 'default' and turn_count = 1 order by random() limit ${count}`;
  const waiting = await sql<
    { id: string }[]
  >`select id from tasks where tenant = 'default' and status = 'queued'`;
  const long = await sql<{ id: string; last_seq: number }[]>`
    select id, last_seq from sessions where tenant = 'default' and turn_count = ${LONG_TURNS}`;
  // The cursor of the session 90% down the tenant's list, as the gateway writes cursors
  // (domain/page-cursor.ts: the millisecond time and the id of the last item of a page).
  // (At 10^3 the tenant has ~250 sessions: the cursor then stays a full page from the end.)
  const [{ tenantSessions }] = await sql<{ tenantSessions: number }[]>`
    select count(*)::int as "tenantSessions" from sessions where tenant = 'default'`;
  const depth = Math.max(0, Math.min(Math.floor(tenantSessions * 0.9), tenantSessions - PAGE - 1));
  const [deep] = await sql<{ at: Date; id: string }[]>`
    select date_trunc('milliseconds', created_at) as at, id from sessions where tenant = 'default'
    order by created_at desc, id desc offset ${depth} limit 1`;
  if (idle.length < 20 || waiting.length === 0 || long.length === 0 || !deep) {
    throw new Error(`the seeded database has too few rows to aim at (${idle.length} idle sessions)`);
  }
  return {
    idle: idle.map((r) => r.id),
    tasks: tasks.map((r) => r.id),
    snapshots: snapshots.map((r) => r.id),
    waiting: waiting.map((r) => r.id),
    long: long.map((r) => ({ id: r.id, lastSeq: r.last_seq })),
    deepCursor: Buffer.from(JSON.stringify([deep.at.toISOString(), deep.id])).toString("base64url"),
  };
}

async function measure(
  sql: Sql,
  gatewaySql: GatewaySql,
  gateway: GatewayProcess,
): Promise<Record<string, number>> {
  const picks = await pick(sql);
  const client = new HttpClient(gateway.url, 4, { authorization: `Bearer ${TOKEN}` });
  const out: Record<string, number> = {};
  const record = (id: OpId, times: number[]) => {
    out[`${id}.p50`] = percentile(times, 50);
    out[`${id}.p99`] = percentile(times, 99);
  };
  /** `count` timed calls of `fn(i)`, after a few untimed ones (connections, prepared statements). */
  const timeIt = async (count: number, fn: (i: number) => Promise<void>, warmup = 5): Promise<number[]> => {
    for (let i = 0; i < warmup; i++) await fn(count + i);
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      await fn(i);
      times.push(performance.now() - t0);
    }
    return times;
  };
  const get = async (path: string, check?: (body: any) => boolean, headers: Record<string, string> = {}) => {
    const answer = await client.request("GET", path, undefined, headers);
    if (answer.status !== 200 || (check && !check(answer.body))) {
      throw new Error(`GET ${path} answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`);
    }
  };
  try {
    const light = samplesPer(false);
    const heavy = samplesPer(true);
    const at = <T>(list: T[], i: number) => list[i % list.length];

    // Submit: on idle sessions in turn (at 10^3 there are fewer than the samples); the turn (the
    // simulated agent's 10 events) is awaited untimed before the next, so every submit meets an
    // idle gateway and an idle session.
    const submits: number[] = [];
    for (let i = 0; i < light; i++) {
      const t0 = performance.now();
      const task = await client.json<{ id: string }>("POST", `/v1/sessions/${at(picks.idle, i)}/turns`, {
        prompt: "[tool 10] [tool 10] [tokens 5]",
      });
      submits.push(performance.now() - t0);
      for (let status = ""; !terminal.includes(status); ) {
        status = (await client.json<{ status: string }>("GET", `/v1/tasks/${task.id}?waitMs=10000`)).status;
      }
    }
    record("submit", submits);

    record("claim", await claimTimes(gatewaySql, picks, light));
    record(
      "task",
      await timeIt(light, (i) => get(`/v1/tasks/${at(picks.tasks, i)}`, (b) => b.status === "completed")),
    );
    record(
      "pageFirst",
      await timeIt(heavy, () => get(`/v1/sessions?limit=${PAGE}`, (b) => b.items.length === PAGE)),
    );
    record(
      "pageDeep",
      await timeIt(heavy, () =>
        get(`/v1/sessions?limit=${PAGE}&cursor=${picks.deepCursor}`, (b) => b.items.length === PAGE),
      ),
    );
    record(
      "snapshot",
      await timeIt(light, (i) =>
        get(`/v1/sessions/${at(picks.snapshots, i)}`, (b) => Array.isArray(b.turns)),
      ),
    );
    record(
      "replay",
      await timeIt(heavy, (i) => {
        const long = at(picks.long, i);
        const afterSeq = (i * 37) % (long.lastSeq - REPLAY);
        return get(
          `/v1/sessions/${long.id}/events?afterSeq=${afterSeq}&limit=${REPLAY}`,
          (b) => b.items.length === REPLAY,
          { accept: "application/json" },
        );
      }),
    );
    record("gate", await timeIt(light, () => get("/v1/gate", (b) => b.queued === BUSY * QUEUED_PER_BUSY)));
    record(
      "position",
      await timeIt(light, (i) =>
        get(`/v1/tasks/${at(picks.waiting, i)}`, (b) => typeof b.position === "number"),
      ),
    );
    record("sweep", await sweepTimes(gatewaySql, heavy));
    return out;
  } finally {
    client.close();
  }
}

const terminal = ["completed", "failed", "cancelled", "expired", "interrupted"];

/** Thrown to roll a measuring transaction back. */
class Rollback extends Error {}

async function rolledBack(sql: GatewaySql, fn: (tx: Tx) => Promise<void>): Promise<void> {
  try {
    await sql.begin(async (tx) => {
      await fn(tx as unknown as Tx);
      throw new Rollback();
    });
  } catch (err) {
    if (!(err instanceof Rollback)) throw err;
  }
}

/**
 * The claim statement with the gate lock held, as the gateway runs it, on a transaction that has
 * just queued one turn on an idle session (the seeded queue is all behind busy sessions, so that
 * turn is the one claimed). Rolled back: nothing stays.
 */
async function claimTimes(sql: GatewaySql, picks: Picks, count: number): Promise<number[]> {
  const times: number[] = [];
  const sessions = picks.idle;
  for (let i = -5; i < count; i++) {
    const sessionId = sessions[(i + 5) % sessions.length];
    await rolledBack(sql, async (tx) => {
      await gateLock(tx);
      await tx`
        insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at)
        select id, tenant, next_turn_index, 'queued', '[tokens 5]', 600000, now() + interval '10 minutes'
        from sessions where id = ${sessionId}`;
      const t0 = performance.now();
      const claimed = await taskClaim(
        tx,
        { instanceId: `${INSTANCE}-claim`, bootId: randomUUID(), leaseMs: 30_000 },
        MAX_ACTIVE,
        "{}",
        8,
      );
      const spent = performance.now() - t0;
      if (claimed.length !== 1) throw new Error(`the claim took ${claimed.length} turns, not the 1 queued`);
      if (i >= 0) times.push(spent);
    });
  }
  return times;
}

/** The sweeper's periodic statements (domain/sweeper.ts): the lease sweep and the queue expiry. */
async function sweepTimes(sql: GatewaySql, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = -3; i < count; i++) {
    await rolledBack(sql, async (tx) => {
      const t0 = performance.now();
      const interrupted = await taskLockExpiredLeases(tx, randomUUID(), "default");
      const expired = await taskExpireQueued(tx);
      const spent = performance.now() - t0;
      if (interrupted.length + expired.length !== 0) throw new Error("the sweep settled seeded turns");
      if (i >= 0) times.push(spent);
    });
  }
  return times;
}

async function tableSizes(sql: Sql): Promise<Record<string, number>> {
  const [row] = await sql<
    {
      events: number;
      events_table: number;
      events_indexes: number;
      sessions: number;
      tasks: number;
      database: number;
      events_total: number;
    }[]
  >`
    select (select count(*) from events)::int8 as events,
           pg_table_size('events') as events_table, pg_indexes_size('events') as events_indexes,
           pg_total_relation_size('events') as events_total,
           pg_total_relation_size('sessions') as sessions, pg_total_relation_size('tasks') as tasks,
           pg_database_size(current_database()) as database`;
  const perMillion = (bytes: number) => (bytes * 1e6) / row.events;
  return {
    events: row.events,
    eventsTable: perMillion(row.events_table),
    eventsIndexes: perMillion(row.events_indexes),
    databasePerMillion: perMillion(row.database),
    eventsBytes: row.events_total,
    sessionsBytes: row.sessions,
    tasksBytes: row.tasks,
  };
}
