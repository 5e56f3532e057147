/**
 * Fixtures for the direct tests of src/sql operations: one migrated database per test file, its
 * tables emptied before every test (so global reads such as "anything queued?" see only that test's
 * rows), and sessions and tasks inserted with plain SQL in whatever state a test needs.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, expect } from "vitest";
import { connect, type Database, type Sql, type Tx } from "../../src/db/client.js";
import { taskOwnerOf, taskRestartSettlement } from "../../src/sql/task-orphans.js";
import { taskSettleOwned } from "../../src/sql/task-settle.js";
import type { OwnerFence } from "../../src/sql/event-append.js";
import type { TaskRow } from "../../src/sql/task-row.js";
import type { InstanceInfo } from "../../src/sql/instance.js";
import type { TaskStatus } from "../../src/contract/task-status.js";
import { claimTestDatabase, type TestDatabase } from "./db.js";

export interface SqlTestDatabase {
  /** The gateway's own pool settings (camelCase columns, json values as written). */
  readonly sql: Sql;
  /** That pool, for the gateway's own classes. */
  readonly database: Database;
  readonly url: string;
}

/**
 * Registers the file's database: claimed (migrated and empty) before all, given back after, and (unless
 * `emptyBeforeEach` is false) emptied before each test.
 */
export function useSqlTestDatabase({ emptyBeforeEach = true } = {}): SqlTestDatabase {
  let testDb: TestDatabase;
  let db: Database;
  beforeAll(async () => {
    // Claimed from the pool: migrated and empty (db.ts).
    testDb = await claimTestDatabase();
    db = connect(testDb.url, { max: 4 });
  });
  beforeEach(async () => {
    if (emptyBeforeEach)
      await db.sql`truncate checkpoints, transcript_chunks, permission_requests, events, tasks, sessions, instances, event_writes`;
  });
  afterAll(async () => {
    await db?.close();
    await testDb?.drop();
  });
  // Read at every use: the pool exists only once beforeAll has run.
  return {
    get sql() {
      return db.sql;
    },
    get database() {
      return db;
    },
    get url() {
      return testDb.url;
    },
  };
}

export interface SessionFixture {
  tenant?: string;
  workspace?: string;
  agent?: string;
  archived?: boolean;
  lastSeq?: number;
  createdAt?: string;
}

export async function addSession(sql: Sql, s: SessionFixture = {}): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into sessions (tenant, workspace, agent, archived_at, last_seq, created_at)
    values (${s.tenant ?? "default"}, ${s.workspace ?? "/ws"}, ${s.agent ?? "simulated"},
            ${s.archived ? new Date() : null}, ${s.lastSeq ?? 0}, coalesce(${s.createdAt ?? null}::timestamptz, now()))
    returning id`;
  return row.id;
}

export interface TaskFixture {
  status?: TaskStatus;
  ownerBoot?: string | null;
  attempt?: number;
  /** Lease end relative to now, in ms (negative: expired); null: no lease. */
  leaseInMs?: number | null;
  /** Queue deadline relative to now, in ms (negative: past). */
  queueDeadlineInMs?: number;
  idempotencyKey?: string | null;
  upstream?: unknown;
  finishedAt?: string | null;
  createdAt?: string;
}

/** A task of `sessionId` (its tenant, the next turn index) in the state asked for. */
export async function addTask(sql: Sql, sessionId: string, t: TaskFixture = {}): Promise<TaskRow> {
  const status = t.status ?? "queued";
  const active = status === "running" || status === "cancelling";
  const ownerBoot = t.ownerBoot === undefined ? (active ? randomUUID() : null) : t.ownerBoot;
  const leaseInMs = t.leaseInMs === undefined ? (active ? 60_000 : null) : t.leaseInMs;
  const [row] = await sql<TaskRow[]>`
    insert into tasks (session_id, tenant, turn_index, status, prompt, idempotency_key, timeout_ms, queue_deadline_at,
                       attempt, owner_boot, lease_expires_at, upstream, finished_at, created_at)
    select s.id, s.tenant,
           (select coalesce(max(turn_index) + 1, 0) from tasks where session_id = s.id),
           ${status}, 'prompt', ${t.idempotencyKey ?? null}, 60000,
           now() + make_interval(secs => ${t.queueDeadlineInMs ?? 60_000} / 1000.0),
           ${t.attempt ?? (ownerBoot ? 1 : 0)}, ${ownerBoot},
           case when ${leaseInMs}::int is null then null
                else now() + make_interval(secs => ${leaseInMs}::int / 1000.0) end,
           ${t.upstream === undefined ? null : JSON.stringify(t.upstream)}::text::jsonb,
           coalesce(${t.finishedAt ?? null}::timestamptz, case when ${status} in ('queued', 'running', 'cancelling')
                                                               then null else now() end),
           coalesce(${t.createdAt ?? null}::timestamptz, now())
    from sessions s where s.id = ${sessionId}
    returning *`;
  return row;
}

export async function taskById(sql: Sql, id: string): Promise<TaskRow> {
  const [row] = await sql<TaskRow[]>`select * from tasks where id = ${id}`;
  return row;
}

/** A task of a fresh session owned by a fresh boot, with the fence its owner writes under. */
export async function addOwnedTask(
  sql: Sql,
  status: TaskStatus = "running",
  attempt = 2,
): Promise<{ row: TaskRow; fence: OwnerFence }> {
  const bootId = randomUUID();
  const row = await addTask(sql, await addSession(sql), { status, ownerBoot: bootId, attempt });
  return { row, fence: { taskId: row.id, bootId, attempt } };
}

/** Runs `fn` while another transaction holds the task row locked (a claim, a flush, a settlement). */
export async function whileTaskHeld<T>(sql: Sql, taskId: string, fn: () => Promise<T>): Promise<T> {
  return (await sql.begin(async (tx) => {
    await tx`select 1 from tasks where id = ${taskId} for update`;
    return fn();
  })) as T;
}

/**
 * Makes two rows created within one millisecond (at `at` plus some microseconds), the lower id the
 * later one: a page ordered by the raw time would put it first, one ordered by (millisecond, id)
 * second. Answers the ids in the (millisecond, id) descending order.
 */
export async function tieWithinMillisecond(
  sql: Sql,
  table: "sessions" | "tasks",
  ids: [string, string],
  at: string,
): Promise<[string, string]> {
  const [low, high] = [...ids].sort();
  await sql`update ${sql(table)} set created_at = ${at}::timestamptz + interval '100 microseconds' where id = ${high}`;
  await sql`update ${sql(table)} set created_at = ${at}::timestamptz + interval '200 microseconds' where id = ${low}`;
  return [high, low];
}

/**
 * How long a test waits for what the database sends on its own (a notification, a lock wait): a
 * bound for a loaded machine, not a measurement.
 */
export const NOTIFIED = { timeout: 15_000 };

/** Resolves once a statement of this database waits for a row lock (another transaction holds it). */
export async function someoneWaitsForALock(sql: Sql): Promise<void> {
  await expect
    .poll(async () => {
      const [{ n }] = await sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock'`;
      return n;
    }, NOTIFIED)
    .toBeGreaterThan(0);
}

/** Postgres's answer when a row is locked by another transaction and the reader said NOWAIT. */
export const LOCK_NOT_AVAILABLE = "55P03";

/** Whether another connection could lock the row right now (NOWAIT: it never waits). */
export async function rowIsFree(sql: Sql, table: "sessions" | "tasks", id: string): Promise<boolean> {
  try {
    await sql.begin((tx) => tx`select 1 from ${tx(table)} where id = ${id} for update nowait`);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === LOCK_NOT_AVAILABLE) return false;
    throw err;
  }
}

/** The SQLSTATE a promise rejects with, or null when it resolves. */
export async function sqlStateOf(p: Promise<unknown>): Promise<string | null> {
  try {
    await p;
    return null;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (!code) throw err;
    return code;
  }
}

/**
 * Rows of `sessionId` in every table that holds session rows (src/sql/session-purge.ts,
 * sessionTables), keyed as the purge counts them.
 */
export async function sessionRowCounts(sql: Sql, sessionId: string): Promise<Record<string, number>> {
  const [row] = await sql<Record<string, number>[]>`
    select (select count(*)::int from sessions where id = ${sessionId}) as sessions,
           (select count(*)::int from tasks where session_id = ${sessionId}) as tasks,
           (select count(*)::int from events where session_id = ${sessionId}) as events,
           (select count(*)::int from permission_requests where session_id = ${sessionId}) as permission_requests,
           (select count(*)::int from transcript_chunks where session_id = ${sessionId}) as transcript_chunks,
           (select count(*)::int from webhook_deliveries where session_id = ${sessionId}) as webhook_deliveries,
           (select count(*)::int from checkpoints where session_id = ${sessionId}) as checkpoints`;
  return row;
}

/**
 * What the sweeper does with the orphans a `lock…` of sql/task-orphans.ts found: each settled
 * `interrupted` with its terminal event, fenced by the owner its row names (domain/turn-end.ts).
 * The settled rows.
 */
export async function interruptLocked(q: Tx, locked: Promise<TaskRow[]>): Promise<TaskRow[]> {
  const settled = await Promise.all(
    (await locked).map((row) => taskSettleOwned(q, taskOwnerOf(row), taskRestartSettlement)),
  );
  return settled.flatMap((s) => (s ? [s.row] : []));
}

/** An instance's identity for src/sql/instance.ts (a fresh boot unless given). */
export const instanceInfo = (instanceId: string, bootId = randomUUID()): InstanceInfo => ({
  bootId,
  instanceId,
  host: "host",
  pid: 42,
  version: "1.0.0",
});
