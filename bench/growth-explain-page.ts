/**
 * The plans of `GET /v1/sessions` for the growth benchmark's caller (tenant `default`): the first
 * page and the page from a cursor 90% down the tenant's sessions, as sql/session-read.ts sends
 * them, under `EXPLAIN (ANALYZE, BUFFERS)` in a custom and a generic plan (a prepared statement
 * gets either). On a database from bench/growth-seed.ts:
 * `npx tsx bench/growth-explain-page.ts <database>`.
 */
import postgres from "postgres";
import type { Sql as GatewaySql } from "../src/db/client.js";
import { sessionList } from "../src/sql/session-read.js";

const name = process.argv[2];
if (!name) {
  console.error("usage: npx tsx bench/growth-explain-page.ts <database>");
  process.exit(2);
}
const url = new URL(process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
url.pathname = `/${name}`;
const sent: { text: string; parameters: unknown[] }[] = [];
const traced = postgres(url.toString(), {
  max: 1,
  onnotice: () => {},
  transform: { column: { from: postgres.toCamel, to: postgres.fromCamel } },
  debug: (_connection, text, parameters) => sent.push({ text, parameters }),
});
const sql = postgres(url.toString(), { max: 1, onnotice: () => {} });
try {
  // The cursor as bench/growth.ts picks it (and the gateway writes it: the millisecond time, the id).
  const [{ n }] = await sql<
    { n: number }[]
  >`select count(*)::int as n from sessions where tenant = 'default'`;
  const depth = Math.max(0, Math.min(Math.floor(n * 0.9), n - 51));
  const [deep] = await sql<{ at: Date; id: string }[]>`
    select date_trunc('milliseconds', created_at) as at, id from sessions where tenant = 'default'
    order by created_at desc, id desc offset ${depth} limit 1`;
  const pages = {
    first: null,
    [`deep cursor (${depth} of ${n} down)`]: { createdAt: deep.at.toISOString(), id: deep.id },
  };
  for (const [label, after] of Object.entries(pages)) {
    sent.length = 0;
    const filter = { tenant: "default", workspace: null, status: null, after, limit: 51 };
    await sessionList(traced as unknown as GatewaySql, filter);
    const statement = sent[sent.length - 1];
    for (const mode of ["force_custom_plan", "force_generic_plan"]) {
      // As a prepared statement, EXECUTEd: a parameterised EXPLAIN is planned with its values,
      // a custom plan whatever plan_cache_mode says.
      const plan = await sql.begin(async (tx) => {
        await tx.unsafe(`set local plan_cache_mode = ${mode}`);
        // Simple protocol: over the extended one the $n in the text would be the PREPARE's own.
        await tx.unsafe(`prepare page as ${statement.text}`).simple();
        const [{ types }] = await tx.unsafe<{ types: string[] }[]>(
          "select parameter_types::text[] as types from pg_prepared_statements where name = 'page'",
        );
        // The values as literals: EXECUTE's arguments cannot be bind parameters of the EXPLAIN.
        const literal = (v: unknown) => `'${String(v).replaceAll("'", "''")}'`;
        const args = types.map((type, i) => `${literal(statement.parameters[i])}::${type}`).join(", ");
        const rows = await tx.unsafe(`explain (analyze, buffers, costs off) execute page(${args})`);
        await tx.unsafe("deallocate page");
        return rows.map((r) => Object.values(r)[0]).join("\n");
      });
      console.log(`== ${label}, ${mode}\n${plan}\n`);
    }
  }
} finally {
  await traced.end();
  await sql.end();
}
