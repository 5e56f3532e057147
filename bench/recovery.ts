/**
 * Recovery after `kill -9`: a gateway is killed, then the database is seeded as if it had owned
 * many tasks (sessions, running tasks with live leases owned by the dead boot of the same
 * MOORING_INSTANCE_ID, queued tasks, their events). A new gateway process with the same instance id
 * is started and timed from spawn to /readyz 200 and to the moment no task of the dead boot is
 * still running (every orphan settled `interrupted`). Reference in the same run: a bare
 * `node` process that connects to the same database, runs one query and exits. Timed with the
 * production build (`node dist/main.js`, target ≤ 2 s) and with the dev launcher (tsx), whose
 * TypeScript loading alone costs about two seconds on this machine.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { productionBuild } from "./lib/build.js";
import { gatewayEnv, repoRoot, spawnGateway } from "./lib/gateway.js";
import { median, sleep, wallMs } from "./lib/stats.js";
import { type BenchContext, type Benchmark, ratio, type Row, type Sample } from "./lib/types.js";

const INSTANCE = "bench-recovery";

const size = (ctx: BenchContext) => ({
  sessions: ctx.options.quick ? 1000 : 10_000,
  tasks: ctx.options.quick ? 100 : 1000,
  /** Of the tasks, this share is running (orphans); the rest is queued. */
  runningShare: 0.6,
});

export const recovery: Benchmark = {
  id: "recovery",
  title: "Recovery after kill -9",
  describe: (ctx) => {
    const s = size(ctx);
    return `${s.sessions} sessions, ${s.tasks} tasks (${Math.round(s.tasks * s.runningShare)} running with live leases of the killed boot, the rest queued); default gate and sweep settings; reference: node + postgres.js connect + one query`;
  },
  async run(ctx) {
    const s = size(ctx);
    const dist = await productionBuild();
    const production = await scenario(ctx, s, { cwd: dist, command: [process.execPath, "dist/main.js"] });
    const dev = await scenario(ctx, s, {});
    const db = await ctx.databases.create("recovery_ref");
    const baseline = await bareQuery(db.url).finally(() => ctx.databases.drop(db));
    ctx.log(
      `  node dist/main.js: ready ${production.ready.toFixed(0)} ms, orphans settled ${production.settled.toFixed(0)} ms (${production.interrupted}/${production.running} interrupted, ${production.leftAtReady} left at ready); tsx: ready ${dev.ready.toFixed(0)} ms; bare node + query ${baseline.toFixed(0)} ms`,
    );
    return {
      ready: production.ready,
      settled: production.settled,
      leftAtReady: production.leftAtReady,
      interrupted: production.interrupted,
      running: production.running,
      devReady: dev.ready,
      devSettled: dev.settled,
      devLeftAtReady: dev.leftAtReady,
      baseline,
    };
  },
  rows(m: Sample, ctx): Row[] {
    const s = size(ctx);
    const benchmark = `Recovery, ${s.sessions} sessions / ${s.tasks} tasks`;
    const reference = { label: "node + postgres.js + 1 query", value: m.baseline, unit: "ms" };
    return [
      {
        benchmark,
        figure: "spawn → /readyz 200 (node dist/main.js)",
        value: m.ready,
        unit: "ms",
        reference,
        ratio: ratio(m.ready, m.baseline),
        target: "≤ 2000 ms",
        met: m.ready <= 2000,
      },
      {
        benchmark,
        figure: "spawn → every orphan settled (dist)",
        value: m.settled,
        unit: "ms",
        reference,
        ratio: ratio(m.settled, m.baseline),
        target: "within one sweep",
        met: m.leftAtReady === 0 && m.interrupted === m.running,
        note: `${m.interrupted} of ${m.running} orphans interrupted; ${m.leftAtReady} still running at ready (0 = settled by the startup sweep)`,
      },
      {
        benchmark,
        figure: "spawn → /readyz 200 (node --import tsx)",
        value: m.devReady,
        unit: "ms",
        reference,
        ratio: ratio(m.devReady, m.baseline),
        target: null,
        met: null,
        note: `dev launcher (TypeScript loaded through tsx); orphans settled at ${m.devSettled?.toFixed(0)} ms, ${m.devLeftAtReady} left at ready`,
      },
    ];
  },
};

interface Launcher {
  cwd?: string;
  command?: string[];
}

/** Kill -9 a gateway, seed its orphans, start another with the same instance id and time it. */
async function scenario(ctx: BenchContext, s: ReturnType<typeof size>, launcher: Launcher) {
  const db = await ctx.databases.create("recovery");
  try {
    const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: INSTANCE });
    const first = await spawnGateway({ env, ...launcher });
    await first.waitReady();
    const deadBoot = ((await (await fetch(`${first.url}/readyz`)).json()) as { bootId: string }).bootId;
    await first.kill9();
    const running = Math.round(s.tasks * s.runningShare);
    await seed(db.sql, deadBoot, s.sessions, s.tasks, running);
    await db.sql`checkpoint`;

    const second = await spawnGateway({ env, ...launcher });
    let settledAt = 0;
    let abandoned = false;
    const orphansLeft = async () => {
      const [{ n }] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from tasks where owner_boot = ${deadBoot} and status in ('running', 'cancelling')`;
      return n;
    };
    const polling = (async () => {
      while (!abandoned) {
        if ((await orphansLeft()) === 0) {
          settledAt = wallMs();
          return;
        }
        if (wallMs() - second.spawnedAt > 120_000) throw new Error("orphans still running after 120 s");
        await sleep(5);
      }
    })();
    polling.catch(() => {});
    try {
      const readyAt = await second.waitReady(120_000, 5);
      const leftAtReady = await orphansLeft();
      await polling;
      const [{ interrupted }] = await db.sql<{ interrupted: number }[]>`
        select count(*)::int as interrupted from tasks where owner_boot = ${deadBoot} and status = 'interrupted'`;
      return {
        ready: readyAt - second.spawnedAt,
        settled: settledAt - second.spawnedAt,
        leftAtReady,
        interrupted,
        running,
      };
    } finally {
      abandoned = true;
      await second.stop();
    }
  } finally {
    await ctx.databases.drop(db);
  }
}

async function seed(
  sql: import("./lib/db.js").Sql,
  deadBoot: string,
  sessions: number,
  tasks: number,
  running: number,
) {
  await sql`
    insert into sessions (workspace, agent, title)
    select '/tmp', 'simulated', 'seeded ' || g from generate_series(1, ${sessions}) g`;
  await sql`
    with picked as (
      select id, row_number() over (order by created_at, id) as n from sessions
    )
    insert into tasks (session_id, turn_index, status, prompt, timeout_ms, queue_deadline_at, started_at, deadline_at,
                       attempt, owner_instance, owner_boot, lease_expires_at, first_seq, last_seq)
    select p.id, 0, case when p.n <= ${running} then 'running' else 'queued' end, '[tool 10] [tokens 5]', 600000,
           now() + interval '10 minutes',
           case when p.n <= ${running} then now() end,
           case when p.n <= ${running} then now() + interval '10 minutes' end,
           case when p.n <= ${running} then 1 else 0 end,
           case when p.n <= ${running} then ${INSTANCE} end,
           case when p.n <= ${running} then ${deadBoot}::uuid end,
           case when p.n <= ${running} then now() + interval '30 seconds' end,
           1, case when p.n <= ${running} then 2 else 1 end
    from picked p where p.n <= ${tasks}`;
  await sql`
    insert into events (session_id, seq, task_id, type, data)
    select t.session_id, 1, t.id, 'task.queued', '{"position": null, "turnIndex": 0}'::jsonb from tasks t
    union all
    select t.session_id, 2, t.id, 'task.started', '{"attempt": 1}'::jsonb from tasks t where t.status = 'running'`;
  await sql`
    update sessions s set next_turn_index = 1, last_seq = t.last_seq, last_activity_at = now()
    from tasks t where t.session_id = s.id`;
  await sql`analyze`;
}

/** Node start + import postgres.js + connect + `select 1` + exit, median of 3. */
async function bareQuery(url: string): Promise<number> {
  const script = `import postgres from "postgres"; const sql = postgres(process.env.URL); await sql\`select 1\`; await sql.end();`;
  const times: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = wallMs();
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      cwd: repoRoot,
      env: { ...process.env, URL: url },
      stdio: "ignore",
    });
    const [code] = await once(child, "exit");
    if (code !== 0) throw new Error(`bare query process exited ${code}`);
    times.push(wallMs() - t0);
  }
  return median(times);
}
