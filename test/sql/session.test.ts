/**
 * Direct tests of the session operations in src/sql on a real database: session-insert,
 * session-archive, session-lock, session-read and session-busy (session-fork and session-purge
 * have files of their own). Each asserts what the operation
 * promises (idempotency per tenant, derived status, tenant filters, keyset pages, row locks, the
 * ifBusy=reject refusal and its exceptions), so a wrong statement fails here.
 */
import { describe, expect, it } from "vitest";
import { sessionMarkArchived } from "../../src/sql/session-archive.js";
import { sessionInsert, type SessionToInsert } from "../../src/sql/session-insert.js";
import { sessionLock, sessionLockMany } from "../../src/sql/session-lock.js";
import {
  sessionList,
  sessionReadRecentTurns,
  sessionReadSavedConversation,
  sessionRead,
  sessionReadHeads,
  sessionReadMany,
  type SessionListFilter,
} from "../../src/sql/session-read.js";
import { sessionIsBusy, sessionRefuseIfBusy, SESSION_BUSY_SQLSTATE } from "../../src/sql/session-busy.js";
import {
  addSession,
  addTask,
  rowIsFree,
  sqlStateOf,
  tieWithinMillisecond,
  useSqlTestDatabase,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

const newSession = (over: Partial<SessionToInsert> = {}): SessionToInsert => ({
  tenant: "a",
  workspace: "/ws",
  agent: "simulated",
  agentConfig: { model_name: "m" },
  title: "t",
  metadata: { my_key: { nested_key: 1 } },
  idempotencyKey: null,
  ...over,
});

type Status = { id: string; status: string };

describe("sessionInsert", () => {
  it("inserts a session with its fields, json keys as written", async () => {
    const { id, created } = await sessionInsert(t.sql, newSession());
    expect(created).toBe(true);
    const [row] = await t.sql`select * from sessions where id = ${id}`;
    expect(row).toMatchObject({ ...newSession(), archivedAt: null });
  });

  it("answers the earlier session for a repeated key of the same tenant, a new one for another tenant", async () => {
    const foreign = await sessionInsert(t.sql, newSession({ idempotencyKey: "k", tenant: "b" }));
    const first = await sessionInsert(t.sql, newSession({ idempotencyKey: "k" }));
    expect(first.created).toBe(true);
    expect(first.id).not.toBe(foreign.id);
    const again = await sessionInsert(t.sql, newSession({ idempotencyKey: "k", title: "other" }));
    expect(again).toEqual({ id: first.id, created: false });
    const [{ n }] = await t.sql`select count(*)::int as n from sessions`;
    expect(n).toBe(2);
  });

  it("never merges sessions without a key", async () => {
    const one = await sessionInsert(t.sql, newSession());
    const two = await sessionInsert(t.sql, newSession());
    expect(one.id).not.toBe(two.id);
    expect(two.created).toBe(true);
  });

  it("makes one session of racing creates with one key", async () => {
    const results = await Promise.all(
      Array.from({ length: 4 }, () => sessionInsert(t.sql, newSession({ idempotencyKey: "race" }))),
    );
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
  });
});

describe("sessionMarkArchived", () => {
  it("archives an open session and keeps the first archive's time", async () => {
    const id = await addSession(t.sql);
    await sessionMarkArchived(t.sql, id);
    const [first] = await t.sql`select archived_at, updated_at from sessions where id = ${id}`;
    expect(first.archivedAt).toBeInstanceOf(Date);
    await t.sql`update sessions set archived_at = '2020-01-01T00:00:00Z' where id = ${id}`;
    await sessionMarkArchived(t.sql, id);
    const [again] = await t.sql`select archived_at, updated_at from sessions where id = ${id}`;
    expect(again.archivedAt.toISOString()).toBe("2020-01-01T00:00:00.000Z");
    expect(again.updatedAt.getTime()).toBeGreaterThanOrEqual(first.updatedAt.getTime());
  });

  it("touches no other session", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    await sessionMarkArchived(t.sql, id);
    const [row] = await t.sql`select archived_at from sessions where id = ${other}`;
    expect(row.archivedAt).toBeNull();
  });
});

describe("sessionLock / sessionLockMany", () => {
  it("holds the session row until the transaction ends", async () => {
    const id = await addSession(t.sql);
    await t.sql.begin(async (tx) => {
      await sessionLock(tx, id);
      expect(await rowIsFree(t.sql, "sessions", id)).toBe(false);
    });
    expect(await rowIsFree(t.sql, "sessions", id)).toBe(true);
  });

  it("locks exactly the listed session rows", async () => {
    const [a, b, c] = [await addSession(t.sql), await addSession(t.sql), await addSession(t.sql)];
    await t.sql.begin(async (tx) => {
      await sessionLockMany(tx, [a, c]);
      expect(await rowIsFree(t.sql, "sessions", a)).toBe(false);
      expect(await rowIsFree(t.sql, "sessions", c)).toBe(false);
      expect(await rowIsFree(t.sql, "sessions", b)).toBe(true);
    });
  });
});

describe("sessionRead / sessionReadMany (derived status, tenant filter)", () => {
  it("derives idle, busy (queued, running, cancelling) and archived", async () => {
    const idle = await addSession(t.sql);
    await addTask(t.sql, idle, { status: "completed" });
    const busy = await Promise.all(["queued", "running", "cancelling"].map(() => addSession(t.sql)));
    await addTask(t.sql, busy[0], { status: "queued" });
    await addTask(t.sql, busy[1], { status: "running" });
    await addTask(t.sql, busy[2], { status: "cancelling" });
    const archived = await addSession(t.sql, { archived: true });
    await addTask(t.sql, archived, { status: "running" });

    expect((await sessionRead<Status>(t.sql, idle, null))?.status).toBe("idle");
    for (const id of busy) expect((await sessionRead<Status>(t.sql, id, null))?.status).toBe("busy");
    expect((await sessionRead<Status>(t.sql, archived, null))?.status).toBe("archived");
  });

  it("shows a session to its tenant and to null (any), not to another tenant", async () => {
    const id = await addSession(t.sql, { tenant: "a" });
    expect((await sessionRead<Status>(t.sql, id, "a"))?.id).toBe(id);
    expect((await sessionRead<Status>(t.sql, id, null))?.id).toBe(id);
    expect(await sessionRead(t.sql, id, "b")).toBeNull();
    expect(await sessionRead(t.sql, "00000000-0000-4000-8000-000000000000", null)).toBeNull();
  });

  it("reads several sessions with their status; missing ids are absent", async () => {
    const a = await addSession(t.sql);
    const b = await addSession(t.sql);
    await addTask(t.sql, b, { status: "queued" });
    const rows = await sessionReadMany<Status>(t.sql, [a, b, "00000000-0000-4000-8000-000000000000"]);
    expect(rows.map((r) => [r.id, r.status]).sort()).toEqual(
      [
        [a, "idle"],
        [b, "busy"],
      ].sort(),
    );
  });
});

describe("sessionReadRecentTurns", () => {
  it("answers the session's turns newest first, up to the limit", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    for (let i = 0; i < 4; i++) await addTask(t.sql, id, { status: "completed" });
    await addTask(t.sql, other, { status: "completed" });
    const turns = await sessionReadRecentTurns(t.sql, id, 3);
    expect(turns.map((r) => r.turnIndex)).toEqual([3, 2, 1]);
    expect(turns.every((r) => r.sessionId === id)).toBe(true);
  });
});

describe("sessionList", () => {
  const filter = (f: Partial<SessionListFilter>): SessionListFilter => ({
    tenant: null,
    workspace: null,
    status: null,
    after: null,
    limit: 100,
    ...f,
  });

  const at = (m: number) => `2026-01-01T00:0${m}:00Z`;
  /** Five sessions a minute apart (s[0] oldest), the last two created together. */
  async function fiveSessions() {
    const ids = [
      await addSession(t.sql, { tenant: "a", workspace: "/w1", createdAt: at(0) }),
      await addSession(t.sql, { tenant: "b", workspace: "/w1", createdAt: at(1) }),
      await addSession(t.sql, { tenant: "a", workspace: "/w2", createdAt: at(2) }),
      await addSession(t.sql, { tenant: "a", workspace: "/w1", createdAt: at(3) }),
      await addSession(t.sql, { tenant: "a", workspace: "/w1", createdAt: at(3) }),
    ];
    return ids;
  }
  const ids = (rows: Status[]) => rows.map((r) => r.id);

  it("pages newest first, ties within a millisecond by id, through the cursor", async () => {
    const s = await fiveSessions();
    const [tieHigh, tieLow] = await tieWithinMillisecond(t.sql, "sessions", [s[3], s[4]], at(3));
    const all = ids(await sessionList<Status>(t.sql, filter({})));
    expect(all).toEqual([tieHigh, tieLow, s[2], s[1], s[0]]);

    const page1 = await sessionList<Status & { createdAt: Date }>(t.sql, filter({ limit: 2 }));
    expect(ids(page1)).toEqual([tieHigh, tieLow]);
    const last = page1[1];
    const page2 = await sessionList<Status>(
      t.sql,
      filter({ limit: 2, after: { createdAt: last.createdAt.toISOString(), id: last.id } }),
    );
    expect(ids(page2)).toEqual([s[2], s[1]]);
  });

  it("pages a tenant's sessions through the cursor, with and without the other filters", async () => {
    const s = await fiveSessions();
    const [tieHigh, tieLow] = await tieWithinMillisecond(t.sql, "sessions", [s[3], s[4]], at(3));
    const page1 = await sessionList<Status & { createdAt: Date }>(t.sql, filter({ tenant: "a", limit: 1 }));
    expect(ids(page1)).toEqual([tieHigh]);
    const cursorOf = (row: Status & { createdAt: Date }) => ({
      createdAt: row.createdAt.toISOString(),
      id: row.id,
    });
    const page2 = await sessionList<Status & { createdAt: Date }>(
      t.sql,
      filter({ tenant: "a", limit: 2, after: cursorOf(page1[0]) }),
    );
    // The other row of the same millisecond comes next (the cursor's tie is broken by id), and
    // tenant b's session between them in time is not on a's pages.
    expect(ids(page2)).toEqual([tieLow, s[2]]);
    expect(ids(await sessionList<Status>(t.sql, filter({ tenant: "a", after: cursorOf(page2[1]) })))).toEqual(
      [s[0]],
    );
    expect(
      ids(
        await sessionList<Status>(
          t.sql,
          filter({ tenant: "a", workspace: "/w1", after: cursorOf(page1[0]) }),
        ),
      ),
    ).toEqual([tieLow, s[0]]);
    await t.sql`update sessions set archived_at = now() where id = ${s[0]}`;
    expect(
      ids(
        await sessionList<Status>(
          t.sql,
          filter({ tenant: "a", status: "archived", after: cursorOf(page1[0]) }),
        ),
      ),
    ).toEqual([s[0]]);
    expect(ids(await sessionList<Status>(t.sql, filter({ tenant: "c" })))).toEqual([]);
  });

  it("filters by tenant, workspace and derived status", async () => {
    const s = await fiveSessions();
    await addTask(t.sql, s[0], { status: "running" });
    await t.sql`update sessions set archived_at = now() where id = ${s[2]}`;
    expect(ids(await sessionList<Status>(t.sql, filter({ tenant: "b" })))).toEqual([s[1]]);
    expect(ids(await sessionList<Status>(t.sql, filter({ tenant: "a", workspace: "/w2" })))).toEqual([s[2]]);
    expect(ids(await sessionList<Status>(t.sql, filter({ status: "busy" })))).toEqual([s[0]]);
    expect(ids(await sessionList<Status>(t.sql, filter({ status: "archived" })))).toEqual([s[2]]);
    expect(ids(await sessionList<Status>(t.sql, filter({ tenant: "a", status: "idle" }))).sort()).toEqual(
      [s[3], s[4]].sort(),
    );
  });
});

describe("sessionReadHeads / sessionReadSavedConversation", () => {
  it("reads the heads of the sessions asked for", async () => {
    const a = await addSession(t.sql, { lastSeq: 7 });
    const b = await addSession(t.sql, { lastSeq: 0 });
    await addSession(t.sql, { lastSeq: 9 });
    const heads = await sessionReadHeads(t.sql, [a, b]);
    expect(heads.sort((x, y) => x.lastSeq - y.lastSeq)).toEqual([
      { id: b, lastSeq: 0 },
      { id: a, lastSeq: 7 },
    ]);
  });

  it("reads the saved conversation of a session, null for a missing one", async () => {
    const id = await addSession(t.sql, { archived: true });
    await t.sql`update sessions set agent_session_id = 'conv', last_assistant_message_id = 'msg' where id = ${id}`;
    const saved = await sessionReadSavedConversation(t.sql, id);
    expect(saved).toMatchObject({ agentSessionId: "conv", lastAssistantMessageId: "msg" });
    expect(saved?.archivedAt).toBeInstanceOf(Date);
    expect(await sessionReadSavedConversation(t.sql, "00000000-0000-4000-8000-000000000000")).toBeNull();
  });
});

describe("sessionRefuseIfBusy", () => {
  const check = (id: string, key: string | null = null, tenant: string | null = null) =>
    sqlStateOf(t.sql.begin((tx) => sessionRefuseIfBusy(tx, id, key, tenant)));

  it("lets an idle session through (ended tasks do not count)", async () => {
    const id = await addSession(t.sql);
    expect(await check(id)).toBeNull();
    await addTask(t.sql, id, { status: "completed" });
    await addTask(t.sql, id, { status: "interrupted" });
    expect(await check(id)).toBeNull();
  });

  it("refuses a session with a queued, running or cancelling task", async () => {
    for (const status of ["queued", "running", "cancelling"] as const) {
      const id = await addSession(t.sql);
      await addTask(t.sql, id, { status });
      expect(await check(id)).toBe(SESSION_BUSY_SQLSTATE);
    }
    const id = await addSession(t.sql);
    await addTask(t.sql, id, { status: "running" });
    const err = await t.sql.begin((tx) => sessionRefuseIfBusy(tx, id, null, null)).catch((e) => e);
    expect(sessionIsBusy(err)).toBe(true);
    expect(sessionIsBusy(new Error("other"))).toBe(false);
  });

  it("lets a repeat through when the key is already taken, refuses a new key", async () => {
    const id = await addSession(t.sql);
    await addTask(t.sql, id, { status: "running", idempotencyKey: "k" });
    expect(await check(id, "k")).toBeNull();
    expect(await check(id, "other")).toBe(SESSION_BUSY_SQLSTATE);
  });

  it("lets an archived session through (the admission answers archived instead)", async () => {
    const id = await addSession(t.sql, { archived: true });
    await addTask(t.sql, id, { status: "running" });
    expect(await check(id)).toBeNull();
  });

  it("never refuses for another tenant's busy session (existence does not leak)", async () => {
    const id = await addSession(t.sql, { tenant: "a" });
    await addTask(t.sql, id, { status: "running" });
    expect(await check(id, null, "b")).toBeNull();
    expect(await check(id, null, "a")).toBe(SESSION_BUSY_SQLSTATE);
    expect(await check(id, null, null)).toBe(SESSION_BUSY_SQLSTATE);
  });
});

describe("sessionIsBusy", () => {
  it("recognizes the busy refusal and nothing else: other database errors, plain errors, no error", async () => {
    const id = await addSession(t.sql);
    await addTask(t.sql, id, { status: "queued" });
    const busy = await t.sql.begin((tx) => sessionRefuseIfBusy(tx, id, null, null)).catch((e) => e);
    expect(sessionIsBusy(busy)).toBe(true);
    const other = await t.sql`select 1/0`.catch((e) => e);
    expect(other.code).toBe("22012");
    expect(sessionIsBusy(other)).toBe(false);
    for (const notBusy of [new Error(SESSION_BUSY_SQLSTATE), null, undefined, "MG409"])
      expect(sessionIsBusy(notBusy)).toBe(false);
  });
});
