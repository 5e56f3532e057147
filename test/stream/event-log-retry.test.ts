/**
 * A flush whose COMMIT reached Postgres but whose answer was lost looks failed to the writer. The
 * retry must find out that it committed instead of appending the same events a second time.
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type Database } from "../../src/db/client.js";
import { applyMigrations } from "../../src/db/migrate.js";
import { eventLogOn } from "../support/event-log.js";
import { claimTestDatabase, type TestDatabase } from "../support/db.js";
import { eventually } from "../support/gateway.js";

let db: TestDatabase;
let proxy: Server;
let through: Database;
let swallowAnswers = false;
const links = new Set<Socket>();

beforeAll(async () => {
  db = await claimTestDatabase();
  const target = new URL(db.url);
  // A TCP proxy between the event log and Postgres that can stop passing Postgres' answers back.
  proxy = createServer((client) => {
    const server = tcpConnect(Number(target.port), target.hostname);
    links.add(client);
    links.add(server);
    client.on("data", (chunk) => server.write(chunk));
    server.on("data", (chunk) => {
      if (!swallowAnswers) client.write(chunk);
    });
    const close = () => {
      client.destroy();
      server.destroy();
    };
    client.on("error", close).on("close", close);
    server.on("error", close).on("close", close);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const address = proxy.address() as { port: number };
  const url = new URL(db.url);
  url.host = `127.0.0.1:${address.port}`;
  through = connect(url.toString(), { max: 1 });
  await applyMigrations(through);
});

afterAll(async () => {
  await through?.close().catch(() => {});
  for (const link of links) link.destroy();
  proxy?.close();
  await db?.drop();
});

it("does not append a batch twice when the commit's answer was lost", async () => {
  const [session] =
    await db.sql`insert into sessions (workspace, agent) values ('/tmp', 'simulated') returning id`;
  const lines: string[] = [];
  const log = pino({ level: "warn" }, { write: (line: string) => lines.push(line) });
  const eventLog = eventLogOn(through, { flushMs: 1000, flushMax: 1000, lanes: 1 }, log);
  // Warm up: postgres.js waits for Postgres to describe a new statement before it executes it, so
  // the statements must already be prepared on the connection for the commit to go through blind.
  eventLog.append({ sessionId: session.id, taskId: null, type: "session.notice", data: { message: "n0" } });
  await eventLog.flush();
  // The flush's notification goes after its commit, on the one connection: answered before this.
  await through.sql`select 1`;
  for (let i = 1; i <= 3; i++) {
    eventLog.append({
      sessionId: session.id,
      taskId: null,
      type: "session.notice",
      data: { message: `n${i}` },
    });
  }

  swallowAnswers = true;
  const flushed = eventLog.flush();
  // The transaction commits on the server while its answers go nowhere...
  await eventually(async () => {
    const [{ n }] = await db.sql`select count(*)::int as n from events where session_id = ${session.id}`;
    return n === 4;
  });
  // ...then the connection drops, so the writer sees a failure and retries.
  swallowAnswers = false;
  for (const link of links) link.destroy();
  await flushed;

  const rows = await db.sql`select seq, data from events where session_id = ${session.id} order by seq`;
  expect(rows.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
  expect(rows.map((r) => r.data.message)).toEqual(["n0", "n1", "n2", "n3"]);
  const [head] = await db.sql`select last_seq from sessions where id = ${session.id}`;
  expect(head.lastSeq).toBe(4);
  expect(lines.some((l) => l.includes("had committed"))).toBe(true);
});
