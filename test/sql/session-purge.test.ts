/**
 * src/sql/session-purge.ts: which archived sessions are past retention (default and per tenant;
 * idle ones never), and that a purge deletes a session with every row of it, in every table that
 * references a session, counted by table, leaving every other session whole.
 */
import { randomUUID } from "node:crypto";
import { beforeEach, describe, expect, it } from "vitest";
import { connect, type Sql } from "../../src/db/client.js";
import {
  sessionFindExpiredArchived,
  sessionLimitLockWait,
  sessionLockArchivedForPurge,
  sessionPurge,
  sessionTables,
} from "../../src/sql/session-purge.js";
import {
  addSession,
  addTask,
  LOCK_NOT_AVAILABLE,
  rowIsFree,
  sessionRowCounts,
  someoneWaitsForALock,
  sqlStateOf,
  useSqlTestDatabase,
} from "../support/sql-fixtures.js";

const db = useSqlTestDatabase();

beforeEach(async () => {
  await db.sql`truncate webhook_deliveries`;
});

/** Marks `sessionId` archived `daysAgo` days ago (a backdated row, as if archived then). */
async function archivedDaysAgo(sql: Sql, sessionId: string, daysAgo: number): Promise<void> {
  await sql`update sessions set archived_at = now() - make_interval(days => ${daysAgo}) where id = ${sessionId}`;
}

/** A session with rows in every table that holds session rows: 2 tasks, 3 events, 1 permission request, 2 transcript chunks, 1 delivery, 2 checkpoints. */
async function fullSession(sql: Sql, tenant = "default"): Promise<string> {
  const sessionId = await addSession(sql, { tenant, archived: true, lastSeq: 3 });
  const first = await addTask(sql, sessionId, { status: "completed" });
  await addTask(sql, sessionId, { status: "cancelled" });
  for (const seq of [1, 2, 3]) {
    await sql`insert into events (session_id, seq, task_id, type, data)
              values (${sessionId}, ${seq}, ${first.id}, 'message', '{}'::jsonb)`;
  }
  await sql`insert into permission_requests (id, task_id, session_id, tool_call, options, expires_at, resolved_at, resolved_by)
            values (${randomUUID()}, ${first.id}, ${sessionId}, '{}'::jsonb, '[]'::jsonb, now(), now(), 'cancel')`;
  for (const offset of [0, 10]) {
    await sql`insert into transcript_chunks (session_id, agent_session_id, byte_offset, bytes)
              values (${sessionId}, 'conv', ${offset}, ${Buffer.from("0123456789")})`;
  }
  await sql`insert into webhook_deliveries (tenant, url, event_type, session_id, seq, body, status)
            values (${tenant}, 'https://hooks.example.com/x', 'task.completed', ${sessionId}, 3, '{}', 'delivered')`;
  for (const phase of ["before", "after"]) {
    await sql`insert into checkpoints (session_id, name, task_id, turn_index, phase, commit_sha, store, git_dir)
              values (${sessionId}, ${`0/${phase}`}, ${first.id}, 0, ${phase}, ${"a".repeat(40)}, 'shadow', '/nowhere.git')`;
  }
  return sessionId;
}

/** Rows of `sessionId` in each table. */
const rowsOf = sessionRowCounts;

const FULL = {
  sessions: 1,
  tasks: 2,
  events: 3,
  permissionRequests: 1,
  transcriptChunks: 2,
  webhookDeliveries: 1,
  checkpoints: 2,
};
const NONE = {
  sessions: 0,
  tasks: 0,
  events: 0,
  permissionRequests: 0,
  transcriptChunks: 0,
  webhookDeliveries: 0,
  checkpoints: 0,
};

describe("the tables a purge covers", () => {
  it("names every table with a session_id column or a foreign key to sessions or tasks", async () => {
    const withSessionId = await db.sql<{ table: string }[]>`
      select distinct table_name as table from information_schema.columns
      where table_schema = 'public' and column_name = 'session_id'`;
    const referencing = await db.sql<{ table: string }[]>`
      select distinct c.conrelid::regclass::text as table from pg_constraint c
      where c.contype = 'f' and c.confrelid in ('sessions'::regclass, 'tasks'::regclass)`;
    const tables = new Set([...withSessionId, ...referencing].map((r) => r.table.replaceAll('"', "")));
    expect(tables.size).toBeGreaterThanOrEqual(5);
    for (const table of tables) expect(sessionTables).toContain(table);
  });
});

describe("sessionFindExpiredArchived", () => {
  it("finds archived sessions past the default, oldest first; not yesterday's, not idle ones however old", async () => {
    const old = await addSession(db.sql, { archived: true });
    await archivedDaysAgo(db.sql, old, 40);
    const older = await addSession(db.sql, { archived: true });
    await archivedDaysAgo(db.sql, older, 400);
    const yesterday = await addSession(db.sql, { archived: true });
    await archivedDaysAgo(db.sql, yesterday, 1);
    await addSession(db.sql, { createdAt: new Date(Date.now() - 500 * 86_400_000).toISOString() });
    const rule = { defaultDays: 30, tenants: [] };
    expect(await sessionFindExpiredArchived(db.sql, rule, 10)).toEqual([older, old]);
    expect(await sessionFindExpiredArchived(db.sql, rule, 1)).toEqual([older]);
    expect(await sessionFindExpiredArchived(db.sql, { defaultDays: 0, tenants: [] }, 10)).toEqual([]);
  });

  it("takes a tenant's own figure over the default; 0 keeps its sessions", async () => {
    const keeps = await addSession(db.sql, { tenant: "keeps", archived: true });
    await archivedDaysAgo(db.sql, keeps, 400);
    const short = await addSession(db.sql, { tenant: "short", archived: true });
    await archivedDaysAgo(db.sql, short, 2);
    const other = await addSession(db.sql, { tenant: "other", archived: true });
    await archivedDaysAgo(db.sql, other, 2);
    const rule = {
      defaultDays: 30,
      tenants: [
        { name: "keeps", days: 0 },
        { name: "short", days: 1 },
      ],
    };
    expect(await sessionFindExpiredArchived(db.sql, rule, 10)).toEqual([short]);
    // With the default off, only the tenant with its own figure is swept.
    expect(await sessionFindExpiredArchived(db.sql, { defaultDays: 0, tenants: rule.tenants }, 10)).toEqual([
      short,
    ]);
  });

  it("leaves a session whose turn is still ending (cancelling after the archive) for a later sweep", async () => {
    const ending = await addSession(db.sql, { archived: true });
    await addTask(db.sql, ending, { status: "cancelling" });
    await archivedDaysAgo(db.sql, ending, 40);
    expect(await sessionFindExpiredArchived(db.sql, { defaultDays: 30, tenants: [] }, 10)).toEqual([]);
    expect(await db.sql.begin((tx) => sessionLockArchivedForPurge(tx, ending, false))).toBe("busy");
  });
});

/** Runs `fn` while another transaction holds the session row; answers what `fn` answered. */
async function whileSessionHeld<T>(sessionId: string, fn: () => Promise<T>): Promise<T> {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked: () => void = () => {};
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const holder = db.sql.begin(async (tx) => {
    await tx`select 1 from sessions where id = ${sessionId} for update`;
    locked();
    await released;
  });
  try {
    await isLocked;
    return await fn();
  } finally {
    release();
    await holder;
  }
}

describe("sessionLockArchivedForPurge", () => {
  it("locks an archived session with no active turn until the transaction ends; a queued or ended turn does not hold it", async () => {
    const id = await addSession(db.sql, { archived: true });
    await addTask(db.sql, id, { status: "completed" });
    await addTask(db.sql, id, { status: "queued" });
    for (const wait of [true, false]) {
      await db.sql.begin(async (tx) => {
        expect(await sessionLockArchivedForPurge(tx, id, wait)).toBe("locked");
        expect(await rowIsFree(db.sql, "sessions", id)).toBe(false);
      });
      expect(await rowIsFree(db.sql, "sessions", id)).toBe(true);
    }
  });

  it("answers busy while a turn of it runs or is ending", async () => {
    for (const status of ["running", "cancelling"] as const) {
      const id = await addSession(db.sql, { archived: true });
      await addTask(db.sql, id, { status });
      expect(await db.sql.begin((tx) => sessionLockArchivedForPurge(tx, id, true))).toBe("busy");
      expect(await db.sql.begin((tx) => sessionLockArchivedForPurge(tx, id, false))).toBe("busy");
    }
  });

  it("answers missing for a session that is gone or not archived", async () => {
    const open = await addSession(db.sql);
    for (const id of [open, randomUUID()])
      for (const wait of [true, false])
        expect(await db.sql.begin((tx) => sessionLockArchivedForPurge(tx, id, wait))).toBe("missing");
  });

  it("without wait, skips a session another transaction holds; with wait, takes it once released", async () => {
    const id = await addSession(db.sql, { archived: true });
    let waiting: Promise<string> | undefined;
    await whileSessionHeld(id, async () => {
      expect(await db.sql.begin((tx) => sessionLockArchivedForPurge(tx, id, false))).toBe("skipped");
      waiting = db.sql.begin((tx) => sessionLockArchivedForPurge(tx, id, true));
      await someoneWaitsForALock(db.sql);
    });
    expect(await waiting).toBe("locked");
  });

  it("with wait, answers missing when the holder un-archived the session meanwhile", async () => {
    const id = await addSession(db.sql, { archived: true });
    let waiting: Promise<string> | undefined;
    await db.sql.begin(async (tx) => {
      await tx`update sessions set archived_at = null where id = ${id}`;
      waiting = db.sql.begin((t2) => sessionLockArchivedForPurge(t2, id, true));
      await someoneWaitsForALock(db.sql);
    });
    expect(await waiting).toBe("missing");
  });
});

describe("sessionLimitLockWait", () => {
  it("makes the transaction give up on a held row after the limit", async () => {
    const id = await addSession(db.sql, { archived: true });
    await whileSessionHeld(id, async () => {
      expect(
        await sqlStateOf(
          db.sql.begin(async (tx) => {
            await sessionLimitLockWait(tx, 50);
            return sessionLockArchivedForPurge(tx, id, true);
          }),
        ),
      ).toBe(LOCK_NOT_AVAILABLE);
    });
  });

  it("sets at least one millisecond, in whole milliseconds, for that transaction only", async () => {
    // One connection, so the read after the commit is on the connection the transaction ran on.
    const one = connect(db.url, { max: 1 });
    try {
      const shown = await one.sql.begin(async (tx) => {
        const seen: string[] = [];
        for (const ms of [0, 2.7, 1500]) {
          await sessionLimitLockWait(tx, ms);
          const [row] = await tx<{ lockTimeout: string }[]>`show lock_timeout`;
          seen.push(row.lockTimeout);
        }
        return seen;
      });
      expect(shown).toEqual(["1ms", "2ms", "1500ms"]);
      const [after] = await one.sql<{ lockTimeout: string }[]>`show lock_timeout`;
      expect(after.lockTimeout).toBe("0");
    } finally {
      await one.close();
    }
  });
});

describe("sessionPurge", () => {
  it("deletes the session and every row of it, counted by table; another session stays whole", async () => {
    const gone = await fullSession(db.sql);
    const kept = await fullSession(db.sql);
    expect(await rowsOf(db.sql, gone)).toEqual(FULL);
    const counted = await db.sql.begin(async (tx) => {
      expect(await sessionLockArchivedForPurge(tx, gone, true)).toBe("locked");
      return sessionPurge(tx, gone);
    });
    expect(counted).toEqual(FULL);
    expect(await rowsOf(db.sql, gone)).toEqual(NONE);
    expect(await rowsOf(db.sql, kept)).toEqual(FULL);
  });

  it("never locks an idle session: it is missing to a purge", async () => {
    const idle = await addSession(db.sql);
    expect(await db.sql.begin((tx) => sessionLockArchivedForPurge(tx, idle, true))).toBe("missing");
    expect(await db.sql.begin((tx) => sessionLockArchivedForPurge(tx, idle, false))).toBe("missing");
    expect((await rowsOf(db.sql, idle)).sessions).toBe(1);
  });

  it("the sweep passes over a session whose row another transaction holds", async () => {
    const held = await fullSession(db.sql);
    const answer = await whileSessionHeld(held, () =>
      db.sql.begin((tx) => sessionLockArchivedForPurge(tx, held, false)),
    );
    expect(answer).toBe("skipped");
    expect(await rowsOf(db.sql, held)).toEqual(FULL);
  });
});
