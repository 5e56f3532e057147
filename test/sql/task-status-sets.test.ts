/**
 * Status sets (src/contract/task-status.ts, spliced by src/sql/task-status-sets.ts) reach Postgres as SQL text, not as bind parameters, so
 * the statements are the ones written out by hand before and the planner still proves the partial
 * indexes' predicates: checked on the statements as sent (the claim in a pipelined transaction,
 * the gate's counts), with EXPLAIN under `enable_seqscan = off` (a partial index the predicate
 * does not imply could not be chosen, and the plan would fall back to a scan of the table). The
 * unfinished-turn counts and the session list pages are checked the same way on a small history.
 */
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type Database, type Sql } from "../../src/db/client.js";
import { applyMigrations } from "../../src/db/migrate.js";
import { pipelined } from "../../src/db/pipeline.js";
import { taskClaim } from "../../src/sql/task-claim.js";
import { gateLock } from "../../src/sql/gate-lock.js";
import { gateCountActiveAndQueued, gateCountByTenant } from "../../src/sql/gate-status.js";
import { instanceGroupUsage } from "../../src/sql/instance.js";
import { sessionList } from "../../src/sql/session-read.js";
import { activeStatuses, taskStatuses, terminalStatuses } from "../../src/contract/task-status.js";
import { ACTIVE, TERMINAL, taskWithStatusSets } from "../../src/sql/task-status-sets.js";
import { claimTestDatabase, type TestDatabase } from "../support/db.js";

let testDb: TestDatabase;
let db: Database;
let traced: Sql;
const sent: { text: string; parameters: unknown[] }[] = [];

beforeAll(async () => {
  testDb = await claimTestDatabase();
  db = connect(testDb.url, { max: 2 });
  await applyMigrations(db);
  traced = postgres(testDb.url, {
    max: 1,
    onnotice: () => {},
    transform: { column: { from: postgres.toCamel, to: postgres.fromCamel } },
    debug: (_connection, text, parameters) => sent.push({ text, parameters }),
  }) as unknown as Sql;
});

afterAll(async () => {
  await traced?.end();
  await db?.close();
  await testDb?.drop();
});

describe("taskWithStatusSets", () => {
  /** The plan of a statement as it was sent, with its parameters, no sequential scan allowed. */
  async function planOf(statement: { text: string; parameters: unknown[] }): Promise<string> {
    return await db.sql.begin(async (tx) => {
      await tx.unsafe("set local enable_seqscan = off");
      const rows = await tx.unsafe(
        `explain ${statement.text}`,
        statement.parameters as postgres.ParameterOrJSON<never>[],
      );
      return rows.map((r) => Object.values(r)[0]).join("\n");
    });
  }

  function sentWith(fragment: string): { text: string; parameters: unknown[] } {
    const found = sent.filter((s) => s.text.includes(fragment));
    expect(found).toHaveLength(1);
    return found[0];
  }

  it("names every status once and the sets from them", () => {
    expect(taskStatuses).toHaveLength(8);
    for (const s of [...activeStatuses, ...terminalStatuses]) expect(taskStatuses).toContain(s);
    expect(ACTIVE.text).toBe("('running', 'cancelling')");
    expect(TERMINAL.text).toBe("('completed', 'failed', 'cancelled', 'expired', 'interrupted')");
  });

  it("sends the claim and the gate's counts with the sets as text, and their plans use the partial indexes", async () => {
    sent.length = 0;
    await pipelined(traced, (q) => [
      gateLock(q),
      taskClaim(
        q,
        { instanceId: "i", bootId: "00000000-0000-0000-0000-000000000001", leaseMs: 1000 },
        4,
        "{}",
        4,
      ),
    ]);
    await gateCountActiveAndQueued(traced);
    const claim = sentWith("with recursive active as");
    const gate = sentWith("as active");
    for (const statement of [claim, gate]) {
      expect(statement.text).toContain("status in ('running', 'cancelling')");
      expect(statement.parameters).not.toContain("running");
    }
    const claimPlan = await planOf(claim);
    // Every partial index on the active statuses qualifies; which one wins is the planner's choice.
    expect(claimPlan).toMatch(/tasks_(tenant_active|active|lease)_idx/);
    expect(claimPlan).toMatch(/tasks_(session_|tenant_)?queued_idx/);
    const gatePlan = await planOf(gate);
    expect(gatePlan).toMatch(/tasks_(tenant_active|active|lease)_idx/);
    expect(gatePlan).toMatch(/tasks_(session_|tenant_)?queued_idx/);
    expect(`${claimPlan}\n${gatePlan}`).not.toContain("Seq Scan on tasks");
  });

  /** A history the planner can weigh: 2000 sessions with a finished turn each, 5 turns queued. */
  async function seedHistory(): Promise<void> {
    const [{ n }] = await db.sql<{ n: number }[]>`select count(*)::int as n from sessions`;
    if (n > 0) return;
    await db.sql`
      insert into sessions (id, tenant, workspace, agent, created_at)
      select md5('s' || g)::uuid, (array['default', 'other'])[1 + g % 2], '/w', 'simulated', now() - g * interval '1 minute'
      from generate_series(1, 2000) g`;
    await db.sql`
      insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at)
      select id, tenant, 0, case when row_number() over (order by id) <= 5 then 'queued' else 'completed' end, 'p', 1000, now()
      from sessions`;
    await db.sql`analyze sessions`;
    await db.sql`analyze tasks`;
  }

  it("counts unfinished turns (the gate's per-tenant and per-group figures) from tasks_unfinished_idx", async () => {
    await seedHistory();
    sent.length = 0;
    await gateCountByTenant(traced, ["default"]);
    await instanceGroupUsage(traced, 30_000);
    for (const statement of [sentWith("group by tenant"), sentWith("group by instance_group")]) {
      expect(statement.text).toContain("status in ('queued', 'running', 'cancelling')");
      const plan = await planOf(statement);
      expect(plan).toContain("tasks_unfinished_idx");
      expect(plan).not.toContain("Seq Scan on tasks");
    }
  });

  it("reads a page of sessions as a walk of a page index, never a sort of all sessions", async () => {
    await seedHistory();
    // Halfway down the history: a cursor older than every session leaves nothing to walk, and
    // then either index is as good as the other.
    const after = {
      createdAt: new Date(Date.now() - 1000 * 60_000).toISOString(),
      id: "00000000-0000-4000-8000-000000000000",
    };
    const pages = [
      { tenant: "default", after: null, index: "sessions_tenant_page_idx" },
      { tenant: "default", after, index: "sessions_tenant_page_idx" },
      { tenant: null, after: null, index: "sessions_page_idx" },
      { tenant: null, after, index: "sessions_page_idx" },
    ];
    for (const page of pages) {
      sent.length = 0;
      await sessionList(traced, {
        tenant: page.tenant,
        workspace: null,
        status: null,
        after: page.after,
        limit: 50,
      });
      const plan = await planOf(sentWith("from sessions s"));
      expect(plan).toContain(`Index Scan Backward using ${page.index}`);
      expect(plan).not.toMatch(/Sort|Seq Scan on sessions/);
    }
  });

  it("starts a tenant's deep page at its cursor, not at the tenant's newest session", async () => {
    // 20000 sessions of one tenant (about 110 pages of sessions_tenant_page_idx) and a cursor 90%
    // down: a walk from the tenant's newest entry passes ~100 index pages before the first row
    // of the page; a walk from the cursor reads a few index pages and the page's heap pages.
    await db.sql`
      insert into sessions (id, tenant, workspace, agent, created_at)
      select md5('deep' || g)::uuid, 'deep', '/w', 'simulated', now() - g * interval '1 second'
      from generate_series(1, 20000) g`;
    try {
      await db.sql`analyze sessions`;
      const [cursor] = await db.sql<{ createdAt: Date; id: string }[]>`
        select created_at, id from sessions where tenant = 'deep' order by created_at desc, id desc offset 18000 limit 1`;
      const after = { createdAt: cursor.createdAt.toISOString(), id: cursor.id };
      sent.length = 0;
      const rows = await sessionList<{ id: string }>(traced, {
        tenant: "deep",
        workspace: null,
        status: null,
        after,
        limit: 51,
      });
      expect(rows).toHaveLength(51);
      const statement = sentWith("from sessions s");
      for (const mode of ["force_custom_plan", "force_generic_plan"]) {
        // Prepared and EXECUTEd, as the gateway's prepared statements are: a parameterised EXPLAIN
        // is planned with its values (a custom plan) whatever plan_cache_mode says.
        const plan = await db.sql.begin(async (tx) => {
          await tx.unsafe(`set local plan_cache_mode = ${mode}`);
          await tx.unsafe(`prepare deep_page as ${statement.text}`).simple();
          const [{ types }] = await tx.unsafe<{ types: string[] }[]>(
            "select parameter_types::text[] as types from pg_prepared_statements where name = 'deep_page'",
          );
          const literal = (v: unknown) => `'${String(v).replaceAll("'", "''")}'`;
          const args = types.map((type, i) => `${literal(statement.parameters[i])}::${type}`).join(", ");
          const [row] = await tx.unsafe(`explain (analyze, buffers, format json) execute deep_page(${args})`);
          await tx.unsafe("deallocate deep_page");
          return (Object.values(row)[0] as { Plan: PlanNode }[])[0].Plan;
        });
        const scan = findNode(plan, (n) => n["Node Type"] === "Index Scan");
        expect(scan?.["Index Name"], mode).toBe("sessions_tenant_page_idx");
        // The scan's own pages: its figures include those of the status column's subplan.
        const blocks = (n: PlanNode) => (n["Shared Hit Blocks"] ?? 0) + (n["Shared Read Blocks"] ?? 0);
        const own = scan ? blocks(scan) - (scan.Plans ?? []).reduce((sum, n) => sum + blocks(n), 0) : -1;
        expect(own, mode).toBeGreaterThan(0);
        expect(own, mode).toBeLessThan(30);
      }
    } finally {
      await db.sql`delete from sessions where tenant = 'deep'`;
    }
  });

  it("keeps every other value a parameter and reuses one template per spliced statement", async () => {
    sent.length = 0;
    const read = (id: number) =>
      taskWithStatusSets(traced)`select ${id}::int as n where 'running' in ${ACTIVE}`;
    expect(await read(7)).toEqual([{ n: 7 }]);
    expect(await read(8)).toEqual([{ n: 8 }]);
    expect(sent.map((s) => s.text)).toEqual([
      "select $1::int as n where 'running' in ('running', 'cancelling')",
      "select $1::int as n where 'running' in ('running', 'cancelling')",
    ]);
    expect(sent.map((s) => s.parameters)).toEqual([["7"], ["8"]]);
    const templates = new Set<unknown>();
    const capture = new Proxy(traced, {
      apply: (_target, _self, [strings]) => {
        templates.add(strings);
        return [];
      },
    });
    taskWithStatusSets(capture)`select 1 where 'x' in ${ACTIVE}`;
    taskWithStatusSets(capture)`select 1 where 'x' in ${ACTIVE}`;
    expect(templates.size).toBe(1);
  });
});

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}

function findNode(node: PlanNode, test: (n: PlanNode) => boolean): PlanNode | undefined {
  if (test(node)) return node;
  for (const child of node.Plans ?? []) {
    const found = findNode(child, test);
    if (found) return found;
  }
  return undefined;
}
