/**
 * A poisoned flush never stops a lane. Events written straight to the event log (the
 * driver boundary's sanitizing is bypassed) that Postgres refuses for their content: `\u0000` in a
 * jsonb string (22P05) and a value JSON cannot encode (a BigInt: the statement cannot be built).
 * Retrying those failed forever and froze the lane. Now the flush is split to find them; the first
 * is stored with its text made storable, the second is replaced by a notice saying what was
 * dropped and why; seqs stay gap-free, the settlement and the session write of the same flush still
 * happen with the terminal event last, other sessions' events land, and the lane goes on.
 */
import { randomUUID } from "node:crypto";
import { pino } from "pino";
import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { EventType } from "../../src/contract/events.js";
import { connect, type Database } from "../../src/db/client.js";
import { applyMigrations } from "../../src/db/migrate.js";
import { eventLogOn } from "../support/event-log.js";
import { isPoisonedFlush } from "../../src/stream/flush-failure.js";
import { claimTestDatabase, type TestDatabase } from "../support/db.js";

let db: TestDatabase;
let database: Database;

beforeAll(async () => {
  db = await claimTestDatabase();
  database = connect(db.url, { max: 2 });
  await applyMigrations(database);
});

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

async function newSession(): Promise<string> {
  const [row] =
    await db.sql`insert into sessions (workspace, agent) values ('/tmp', 'simulated') returning id`;
  return row.id;
}

it("isolates what Postgres refuses, stores it in a safe form, and the lane goes on", async () => {
  const lines: Record<string, any>[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
  // One lane, and nothing flushes before the test asks: everything below is one flush.
  const eventLog = eventLogOn(database, { flushMs: 60_000, flushMax: 1000, lanes: 1 }, log);
  const a = await newSession();
  const b = await newSession();
  const bootId = randomUUID();
  const [task] = await db.sql`
    insert into tasks (session_id, turn_index, status, prompt, timeout_ms, queue_deadline_at, owner_boot,
                       owner_instance, attempt, lease_expires_at, started_at)
    values (${a}, 0, 'running', 'p', 60000, now() + interval '1 hour', ${bootId}, 'test', 1,
            now() + interval '1 hour', now())
    returning id`;
  const fence = { taskId: task.id, bootId, attempt: 1 };
  const agentEvent = (type: EventType, data: unknown) =>
    eventLog.append({ sessionId: a, taskId: task.id, type, data, fence });

  agentEvent("message", { text: "before" });
  agentEvent("tool.result", { id: "t1", preview: "a\u0000b", bytes: 3, isError: false, truncated: false });
  eventLog.append({ sessionId: b, taskId: null, type: "session.notice", data: { message: "other session" } });
  agentEvent("tool.call", { id: "t2", name: "count", input: { n: 10n } });
  agentEvent("message", { text: "after" });
  const written = eventLog.writeSession({
    sessionId: a,
    fence,
    cursor: {
      agentSessionId: "agent-1",
      turnCount: 1,
      lastAssistantMessageId: "m1",
      pastAgentSessionIds: [],
    },
  });
  const settled = eventLog.settle({
    sessionId: a,
    fence,
    settlement: {
      status: "completed",
      result: { text: "done", stopReason: "end_turn", usage: null, contextPercent: null },
    },
  });

  expect(await written).toBe(true);
  const outcome = await settled;
  expect(outcome.kind).toBe("settled");

  const events = await db.sql<{ seq: number; type: string; data: any }[]>`
    select seq, type, data from events where session_id = ${a} order by seq`;
  expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
  expect(events.map((e) => e.type)).toEqual([
    "message",
    "tool.result",
    "session.notice",
    "message",
    "task.completed",
  ]);
  expect(events[1].data.preview).toBe("a\uFFFDb");
  expect(events[2].data.message).toMatch(
    /An agent event \(tool\.call\) could not be stored and was dropped: .*BigInt/,
  );
  expect(events[3].data.text).toBe("after");

  const [row] = await db.sql`select status, first_seq, last_seq from tasks where id = ${task.id}`;
  expect(row).toMatchObject({ status: "completed", firstSeq: 1, lastSeq: 5 });
  const [session] = await db.sql`select last_seq, agent_session_id, turn_count from sessions where id = ${a}`;
  expect(session).toMatchObject({ lastSeq: 5, agentSessionId: "agent-1", turnCount: 1 });
  const others = await db.sql`select seq, data from events where session_id = ${b} order by seq`;
  expect(others.map((e) => e.data.message)).toEqual(["other session"]);

  expect(
    lines.some((l) => l.msg === "event log flush refused by the database; isolating what it refuses"),
  ).toBe(true);
  expect(lines.filter((l) => l.msg === "event log flush failed; retrying")).toEqual([]);

  // The lane goes on.
  eventLog.append({ sessionId: b, taskId: null, type: "session.notice", data: { message: "later" } });
  await eventLog.flush();
  const later = await db.sql`select seq, data from events where session_id = ${b} order by seq`;
  expect(later.map((e) => e.data.message)).toEqual(["other session", "later"]);
});

it("retries what may pass later (connection, timeout) and isolates only what its content causes", async () => {
  const sql = postgres(db.url, { max: 1, onnotice: () => {} });
  const away = postgres("postgres://nobody@127.0.0.1:1/none", { max: 1, connect_timeout: 2 });
  try {
    const nul = await sql`select ${'{"a": "\\u0000"}'}::text::jsonb`.catch((err) => err);
    const json = await sql`select ${"{not json"}::text::jsonb`.catch((err) => err);
    const timeout = await sql
      .begin(async (tx) => {
        await tx`set local statement_timeout = 10`;
        await tx`select pg_sleep(1)`;
      })
      .catch((err) => err);
    const refused = await away`select 1`.catch((err) => err);
    expect([nul.code, json.code, timeout.code, refused.code]).toEqual([
      "22P05",
      "22P02",
      "57014",
      "ECONNREFUSED",
    ]);
    expect(isPoisonedFlush(nul)).toBe(true);
    expect(isPoisonedFlush(json)).toBe(true);
    expect(isPoisonedFlush(new TypeError("Do not know how to serialize a BigInt"))).toBe(true);
    expect(isPoisonedFlush(timeout)).toBe(false);
    expect(isPoisonedFlush(refused)).toBe(false);
  } finally {
    await Promise.all([sql.end(), away.end()]);
  }
});
