/**
 * A request that provoked a database error logged the failed query with all
 * its parameters (drizzle's message and `params`, Postgres' quoting of the input), so client data
 * went to the log at error level. Errors are now logged with their type, code, a cut message and a
 * short statement identity (src/log-errors.ts); request bodies never.
 */
import postgres from "postgres";
import { expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { safeErrorSerializer } from "../../src/log-errors.js";
import { call } from "../support/gateway.js";

const SECRET = "client-secret-7f3a9";
const t = useGateway({
  gateway: { onLog: (record) => lines.push(JSON.stringify(record)), logLevel: "trace" },
});
const lines: string[] = [];

it("a request that provokes a database error logs none of its body", async () => {
  const big = `${SECRET} ${"x".repeat(50_000)}`;
  const bodies = [
    { workspace: "/tmp", agent: "simulated", title: `${SECRET}\u0000`, metadata: { note: big } },
    { workspace: "/tmp", agent: "simulated", metadata: { note: `${SECRET}\ud800`, more: big } },
  ];
  for (const body of bodies) {
    const res = await call(t.url, "POST", "/v1/sessions", body);
    // Refused, whether by validation (400) or by the database (500): never stored.
    expect([400, 500]).toContain(res.status);
    expect(JSON.stringify(res.body)).not.toContain(SECRET);
  }
  const rpc = await call(t.url, "POST", "/v1/rpc", {
    jsonrpc: "2.0",
    id: 1,
    method: "sessions.create",
    params: bodies[0],
  });
  expect(rpc.status).toBe(200);
  expect(rpc.body.error).toBeDefined();

  expect(lines.length).toBeGreaterThan(0);
  expect(lines.filter((l) => l.includes(SECRET))).toEqual([]);
  // Whatever failed in the database was logged with its code and statement, not its data.
  for (const line of lines.filter(
    (l) => l.includes('"request failed"') || l.includes('"rpc method failed"'),
  )) {
    const record = JSON.parse(line);
    expect(record.err.cause?.code ?? record.err.code).toMatch(/^[0-9A-Z]{5}$/);
    expect(record.err.query ?? record.err.cause?.query).toMatch(/^insert into "sessions"/);
  }
  const [{ n }] = await t.sql`select count(*)::int as n from sessions`;
  expect(n).toBe(0);
});

it("a failed query's error keeps its code and statement, never its parameters or the input Postgres quotes", async () => {
  const sql = postgres(t.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const json = await sql`select ${`{"note": "${SECRET}`}::text::jsonb`.catch((err) => err);
    const uuid = await sql`select ${SECRET}::uuid as id`.catch((err) => err);
    for (const err of [json, uuid]) {
      expect(err.name).toBe("PostgresError");
      // What postgres.js and Postgres keep on the error: the input is there.
      expect(JSON.stringify([err.parameters, err.where, err.message, err.detail])).toContain(SECRET);
      const logged = safeErrorSerializer(err) as Record<string, unknown>;
      expect(JSON.stringify(logged)).not.toContain(SECRET);
      expect(logged).toMatchObject({ type: "PostgresError", code: "22P02" });
      expect(logged.query).toMatch(/^select \$1::/);
    }
    expect(safeErrorSerializer(String(uuid))).toBe('PostgresError: invalid input syntax for type uuid: "…"');
  } finally {
    await sql.end();
  }
});
