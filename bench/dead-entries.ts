/**
 * What the gate's transactions pay for turns that passed through the queue since the last vacuum
 * (sql/gate-lock.ts explains it). Seeds a database with `N` settled turns and no vacuum (the
 * partial indexes of running and unfinished turns then hold one dead entry per turn, as between
 * two autovacuums of a busy gateway), 20 running and 20 queued turns, and reads the two counts the
 * gate's hot statements make over those indexes with a bitmap scan and with an index scan, each
 * three times: blocks read and time. A profiling aid, not a benchmark:
 * `npx tsx bench/dead-entries.ts [N]` (default 50,000).
 */
import { connect } from "../src/db/client.js";
import { applyMigrations } from "../src/db/migrate.js";
import { BenchDatabases } from "./lib/db.js";

const settled = Number(process.argv[2] ?? 50_000);

const databases = await BenchDatabases.open((line) => console.log(line));
const bench = await databases.create("dead_entries");
const database = connect(bench.url, { max: 2, applicationName: "bench-dead-entries" });
try {
  await applyMigrations(database);
  const { sql } = bench;
  // No autovacuum during the measurement: the dead entries stay, as between two vacuums.
  await sql`alter table tasks set (autovacuum_enabled = false)`;
  const [{ id: sessionId }] = await sql<{ id: string }[]>`
    insert into sessions (tenant, workspace, agent) values ('default', '/ws', 'simulated') returning id`;
  // Each settled turn went through the queued and running states: two updates leave a dead entry in
  // the partial indexes of queued, running and unfinished turns.
  await sql`
    insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at)
    select ${sessionId}, 'default', i, 'queued', 'p', 60000, now() + interval '1 hour'
    from generate_series(1, ${settled}) i`;
  await sql`update tasks set status = 'running', owner_boot = gen_random_uuid(), attempt = 1,
                             lease_expires_at = now() + interval '1 minute'`;
  await sql`update tasks set status = 'completed', finished_at = now(), owner_boot = null,
                             lease_expires_at = null`;
  // The gate full: 20 running turns of 20 sessions, 20 queued behind them.
  const busy = await sql<{ id: string }[]>`
    insert into sessions (tenant, workspace, agent) select 'default', '/ws', 'simulated' from generate_series(1, 20)
    returning id`;
  let turn = settled + 1;
  for (const { id } of busy) {
    await sql`insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at,
                                 attempt, owner_boot, lease_expires_at)
              values (${id}, 'default', ${turn++}, 'running', 'p', 60000, now() + interval '1 hour', 1,
                      gen_random_uuid(), now() + interval '1 minute')`;
    await sql`insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at)
              values (${id}, 'default', ${turn++}, 'queued', 'p', 60000, now() + interval '1 hour')`;
  }
  await sql`analyze tasks`;
  const [{ dead }] = await sql<{ dead: number }[]>`
    select n_dead_tup::int as dead from pg_stat_user_tables where relname = 'tasks'`;
  console.log(`${settled} settled turns (${dead} dead row versions, no vacuum), 20 running, 20 queued`);

  // The two counts of the gate's hot statements over these indexes, as the claim and the insert
  // send them: running turns per tenant (tasks_tenant_active_idx), a tenant's unfinished turns
  // (tasks_unfinished_idx). Each under EXPLAIN (ANALYZE, BUFFERS), three times per access path:
  // a bitmap scan (what the planner picked in the throughput benchmark), then an index scan, then a
  // bitmap scan again.
  const counts = {
    "running turns per tenant (claim)": `select tenant, count(*) from tasks where status in ('running', 'cancelling') group by tenant`,
    "unfinished turns of a tenant (new turn's position)": `select count(*) from tasks where tenant = 'default' and status in ('queued', 'running', 'cancelling')`,
  };
  const paths = {
    bitmap:
      "set local enable_indexscan = off; set local enable_indexonlyscan = off; set local enable_seqscan = off",
    index: "set local enable_bitmapscan = off; set local enable_seqscan = off",
  };
  for (const [label, query] of Object.entries(counts)) {
    console.log(label);
    for (const path of ["bitmap", "index", "bitmap"] as const) {
      for (let i = 0; i < 3; i++) {
        const plan = await sql.begin(async (tx) => {
          await tx.unsafe(paths[path]);
          return tx.unsafe(`explain (analyze, buffers, format json) ${query}`);
        });
        const top = (
          plan[0] as unknown as { "QUERY PLAN": [{ Plan: Record<string, number>; "Execution Time": number }] }
        )["QUERY PLAN"][0];
        const blocks = top.Plan["Shared Hit Blocks"] + top.Plan["Shared Read Blocks"];
        console.log(
          `  ${path.padEnd(6)} run ${i + 1}: ${String(blocks).padStart(6)} blocks, ${top["Execution Time"].toFixed(3)} ms`,
        );
      }
    }
  }
} finally {
  await database.close();
  await databases.dropAll();
}
