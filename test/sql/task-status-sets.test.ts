/**
 * Status sets (src/contract/task-status.ts, spliced by src/sql/task-status-sets.ts) reach Postgres as SQL text, not as bind parameters, so
 * the statements are the ones written out by hand before and the planner still proves the partial
 * indexes' predicates: checked on the statements as sent (the claim in a pipelined transaction,
 * the gate's counts), with EXPLAIN under `enable_seqscan = off` (a partial index the predicate
 * does not imply could not be chosen, and the plan would fall back to a scan of the table).
 */
import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type Database, type Sql } from "../../src/db/client.js";
import { applyMigrations } from "../../src/db/migrate.js";
import { pipelined } from "../../src/db/pipeline.js";
import { claimTasks } from "../../src/sql/claim-tasks.js";
import { lockGate } from "../../src/sql/gate-lock.js";
import { countActiveAndQueued } from "../../src/sql/gate-status.js";
import { activeStatuses, taskStatuses, terminalStatuses } from "../../src/contract/task-status.js";
import { ACTIVE, TERMINAL, withSets } from "../../src/sql/task-status-sets.js";
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
    lockGate(q),
    claimTasks(
      q,
      { instanceId: "i", bootId: "00000000-0000-0000-0000-000000000001", leaseMs: 1000 },
      4,
      "{}",
      4,
    ),
  ]);
  await countActiveAndQueued(traced);
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

it("keeps every other value a parameter and reuses one template per spliced statement", async () => {
  sent.length = 0;
  const read = (id: number) => withSets(traced)`select ${id}::int as n where 'running' in ${ACTIVE}`;
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
  withSets(capture)`select 1 where 'x' in ${ACTIVE}`;
  withSets(capture)`select 1 where 'x' in ${ACTIVE}`;
  expect(templates.size).toBe(1);
});
