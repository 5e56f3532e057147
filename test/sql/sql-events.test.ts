/**
 * Direct tests of the event-log operations in src/sql on a real database: append-position,
 * event-writes, prune-events, read-events and notify. Each asserts what the operation promises
 * (gap-free seqs for still-queued tasks only, a flush's commit record, pruning with its head moved
 * in step, pages after a cursor, notifications at commit or never), so a wrong statement fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { connect, type Sql } from "../../src/db/client.js";
import { appendPositionEvents } from "../../src/sql/append-position.js";
import { lockSessionRow } from "../../src/sql/lock-session.js";
import { eventWriteCommitted, pruneEventWrites, recordEventWrite } from "../../src/sql/event-writes.js";
import {
  channels,
  Notifier,
  notifyArchived,
  notifyCancel,
  notifyGate,
  notifyInTransaction,
  notifyPermission,
  notifySessions,
} from "../../src/sql/notify.js";
import { pruneEvents } from "../../src/sql/prune-events.js";
import { readEventPayload, readEventsAfter } from "../../src/sql/read-events.js";
import {
  addSession,
  addTask,
  NOTIFIED,
  someoneWaitsForALock,
  taskById,
  useSqlTestDatabase,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

/** `n` events (seq 1..n) in a session, its head moved to match. */
async function sessionWithEvents(sql: Sql, n: number): Promise<string> {
  const id = await addSession(sql, { lastSeq: n });
  await sql`
    insert into events (session_id, seq, type, data, payload)
    select ${id}, g, 'message.delta', jsonb_build_object('n', g), jsonb_build_object('full', g)
    from generate_series(1, ${n}::int) g`;
  return id;
}

const seqsOf = async (sql: Sql, id: string) =>
  (await sql<{ seq: number }[]>`select seq from events where session_id = ${id} order by seq`).map(
    (e) => e.seq,
  );

describe("appendPositionEvents", () => {
  it("announces positions of still-queued tasks only, at the next seqs in input order", async () => {
    const id = await addSession(t.sql, { lastSeq: 3 });
    const a = await addTask(t.sql, id, { status: "queued" });
    const running = await addTask(t.sql, id, { status: "running" });
    const b = await addTask(t.sql, id, { status: "queued" });
    const foreign = await addTask(t.sql, await addSession(t.sql), { status: "queued" });
    // Input order against id order, so the events' order can only come from the input.
    const [low, high] = [a.id, b.id].sort();
    const stored = await t.sql.begin((tx) =>
      appendPositionEvents(tx, id, [
        { taskId: high, position: 1 },
        { taskId: running.id, position: 2 },
        { taskId: foreign.id, position: 3 },
        { taskId: low, position: 4 },
      ]),
    );
    expect(stored.map((e) => [e.seq, e.taskId, e.type, e.data])).toEqual([
      [4, high, "task.position", { position: 1 }],
      [5, low, "task.position", { position: 4 }],
    ]);
    expect(stored.every((e) => e.sessionId === id && e.at instanceof Date)).toBe(true);
    const [session] = await t.sql`select last_seq from sessions where id = ${id}`;
    expect(session.lastSeq).toBe(5);
    expect(await seqsOf(t.sql, id)).toEqual([4, 5]);
    // Position events leave the tasks' seq ranges alone.
    expect((await taskById(t.sql, a.id)).firstSeq).toBeNull();
    expect(await seqsOf(t.sql, await addSession(t.sql))).toEqual([]);
  });

  it("after the session lock, sees a move out of the queue that committed under that lock", async () => {
    const id = await addSession(t.sql, { lastSeq: 3 });
    const task = await addTask(t.sql, id, { status: "queued" });
    let announce: Promise<unknown> | undefined;
    await t.sql.begin(async (cancel) => {
      // A cancel holds the session row while it moves the task out of the queue.
      await lockSessionRow(cancel, id);
      await cancel`update tasks set status = 'cancelled' where id = ${task.id}`;
      announce = t.sql.begin(async (tx) => {
        await lockSessionRow(tx, id);
        return appendPositionEvents(tx, id, [{ taskId: task.id, position: 1 }]);
      });
      await someoneWaitsForALock(t.sql);
    });
    expect(await announce).toEqual([]);
    expect(await seqsOf(t.sql, id)).toEqual([]);
  });

  it("writes nothing and takes no seq when no task is queued any more", async () => {
    const id = await addSession(t.sql, { lastSeq: 3 });
    const running = await addTask(t.sql, id, { status: "running" });
    expect(
      await t.sql.begin((tx) => appendPositionEvents(tx, id, [{ taskId: running.id, position: 1 }])),
    ).toEqual([]);
    expect(await t.sql.begin((tx) => appendPositionEvents(tx, id, []))).toEqual([]);
    const [session] = await t.sql`select last_seq from sessions where id = ${id}`;
    expect(session.lastSeq).toBe(3);
    expect(await seqsOf(t.sql, id)).toEqual([]);
  });
});

describe("event-writes", () => {
  it("remembers a flush that committed, not one that rolled back", async () => {
    const committed = randomUUID();
    const rolledBack = randomUUID();
    await t.sql.begin((tx) => recordEventWrite(tx, committed));
    await t.sql
      .begin(async (tx) => {
        await recordEventWrite(tx, rolledBack);
        throw new Error("flush failed");
      })
      .catch(() => {});
    expect(await eventWriteCommitted(t.sql, committed)).toBe(true);
    expect(await eventWriteCommitted(t.sql, rolledBack)).toBe(false);
    expect(await eventWriteCommitted(t.sql, randomUUID())).toBe(false);
  });

  it("prunes records older than an hour and keeps recent ones", async () => {
    const old = randomUUID();
    const recent = randomUUID();
    await recordEventWrite(t.sql, old);
    await recordEventWrite(t.sql, recent);
    await t.sql`update event_writes set at = now() - interval '61 minutes' where write_id = ${old}`;
    await t.sql`update event_writes set at = now() - interval '59 minutes' where write_id = ${recent}`;
    await pruneEventWrites(t.sql);
    expect(await eventWriteCommitted(t.sql, old)).toBe(false);
    expect(await eventWriteCommitted(t.sql, recent)).toBe(true);
  });
});

describe("pruneEvents", () => {
  it("keeps the last `keep` events of each longer session and moves pruned_seq with the delete", async () => {
    const long = await sessionWithEvents(t.sql, 10);
    const short = await sessionWithEvents(t.sql, 3);
    expect(await pruneEvents(t.sql, 4)).toBe(6);
    expect(await seqsOf(t.sql, long)).toEqual([7, 8, 9, 10]);
    expect(await seqsOf(t.sql, short)).toEqual([1, 2, 3]);
    const heads = await t.sql`select id, pruned_seq from sessions order by last_seq`;
    expect(heads.map((h) => [h.id, h.prunedSeq])).toEqual([
      [short, 0],
      [long, 6],
    ]);
    // Nothing more to do until the log grows past `keep` again.
    expect(await pruneEvents(t.sql, 4)).toBe(0);
  });

  it("never leaves an event at or below pruned_seq when a flush commits while it runs", async () => {
    const id = await sessionWithEvents(t.sql, 10);
    let prune: Promise<number> | undefined;
    await t.sql.begin(async (flush) => {
      // A flush of six more events holds the session row; the sweep starts and waits for it.
      await flush`update sessions set last_seq = 16 where id = ${id}`;
      await flush`insert into events (session_id, seq, type, data)
        select ${id}, g, 'message.delta', '{}'::jsonb from generate_series(11, 16) g`;
      prune = pruneEvents(t.sql, 4);
      await someoneWaitsForALock(t.sql);
    });
    expect(await prune).toBe(6);
    const [session] = await t.sql`select pruned_seq from sessions where id = ${id}`;
    expect(session.prunedSeq).toBe(6);
    expect(await seqsOf(t.sql, id)).toEqual([7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
  });

  it("touches at most `maxSessions` sessions per call", async () => {
    await sessionWithEvents(t.sql, 5);
    await sessionWithEvents(t.sql, 5);
    expect(await pruneEvents(t.sql, 2, 1)).toBe(3);
    const pruned = await t.sql`select pruned_seq from sessions order by pruned_seq`;
    expect(pruned.map((p) => p.prunedSeq)).toEqual([0, 3]);
    expect(await pruneEvents(t.sql, 2, 1)).toBe(3);
  });
});

describe("read-events", () => {
  it("reads one page of a session's events after a cursor, in seq order", async () => {
    const id = await sessionWithEvents(t.sql, 6);
    await sessionWithEvents(t.sql, 6);
    const page = await readEventsAfter(t.sql, id, 2, 3);
    expect(page.map((e) => [e.sessionId, e.seq, e.type, e.data])).toEqual([
      [id, 3, "message.delta", { n: 3 }],
      [id, 4, "message.delta", { n: 4 }],
      [id, 5, "message.delta", { n: 5 }],
    ]);
    expect(page[0]).not.toHaveProperty("payload");
    expect((await readEventsAfter(t.sql, id, 5, 10)).map((e) => e.seq)).toEqual([6]);
    expect(await readEventsAfter(t.sql, id, 6, 10)).toEqual([]);
  });

  it("reads one event's whole payload, null for a missing one", async () => {
    const id = await sessionWithEvents(t.sql, 2);
    expect(await readEventPayload(t.sql, id, 2)).toEqual({
      type: "message.delta",
      data: { n: 2 },
      payload: { full: 2 },
    });
    expect(await readEventPayload(t.sql, id, 3)).toBeNull();
  });
});

describe("notify", () => {
  /** Listens on `channel` for the test; every payload heard, in order. */
  async function listen(channel: string): Promise<{ heard: string[]; stop(): Promise<void> }> {
    const heard: string[] = [];
    const l = await t.sql.listen(channel, (payload) => heard.push(payload));
    return { heard, stop: () => l.unlisten() };
  }
  /** A payload sent after everything before it: once it is heard, so is all that was committed. */
  async function heardUpTo(channel: string, l: { heard: string[] }): Promise<string[]> {
    const marker = `marker-${randomUUID()}`;
    await t.sql`select pg_notify(${channel}, ${marker})`;
    await expect.poll(() => l.heard.includes(marker), NOTIFIED).toBe(true);
    return l.heard.filter((p) => p !== marker);
  }

  it("sends session heads at commit, `*` when too many to list, nothing for none or on rollback", async () => {
    const l = await listen(channels.sessions);
    try {
      await t.sql.begin((tx) => notifySessions(tx, new Map()));
      await t.sql
        .begin(async (tx) => {
          await notifySessions(tx, new Map([["rolled-back", 1]]));
          throw new Error("rollback");
        })
        .catch(() => {});
      await t.sql.begin((tx) => notifySessions(tx, new Map([["s1", 4]])));
      const many = new Map(Array.from({ length: 300 }, () => [randomUUID(), 1] as [string, number]));
      await t.sql.begin((tx) => notifySessions(tx, many));
      expect(await heardUpTo(channels.sessions, l)).toEqual([JSON.stringify([["s1", 4]]), "*"]);
    } finally {
      await l.stop();
    }
  });

  it("sends the gate, cancel, permission and archive hints on their channels", async () => {
    const ls = await Promise.all(
      [channels.gate, channels.cancel, channels.permissions, channels.archived].map((c) => listen(c)),
    );
    try {
      await notifyGate(t.sql);
      await notifyCancel(t.sql, "task-1");
      await notifyPermission(t.sql, "request-1");
      await notifyArchived(t.sql, "session-1");
      expect(await heardUpTo(channels.gate, ls[0])).toEqual([""]);
      expect(await heardUpTo(channels.cancel, ls[1])).toEqual(["task-1"]);
      expect(await heardUpTo(channels.permissions, ls[2])).toEqual(["request-1"]);
      expect(await heardUpTo(channels.archived, ls[3])).toEqual(["session-1"]);
    } finally {
      await Promise.all(ls.map((l) => l.stop()));
    }
  });

  it("sends a change's notifications inside its transaction: every channel at commit, none on rollback", async () => {
    const ls = await Promise.all(
      [channels.sessions, channels.gate, channels.cancel, channels.archived, channels.permissions].map((c) =>
        listen(c),
      ),
    );
    try {
      const all = {
        heads: new Map([["s9", 7]]),
        gate: true,
        cancel: ["task-9"],
        archived: ["session-9"],
        permissions: ["request-9"],
      };
      await t.sql
        .begin(async (tx) => {
          await notifyInTransaction(tx, { ...all, cancel: ["rolled-back"] });
          throw new Error("rollback");
        })
        .catch(() => {});
      await t.sql.begin((tx) => notifyInTransaction(tx, all));
      expect(await heardUpTo(channels.sessions, ls[0])).toEqual([JSON.stringify([["s9", 7]])]);
      expect(await heardUpTo(channels.gate, ls[1])).toEqual([""]);
      expect(await heardUpTo(channels.cancel, ls[2])).toEqual(["task-9"]);
      expect(await heardUpTo(channels.archived, ls[3])).toEqual(["session-9"]);
      expect(await heardUpTo(channels.permissions, ls[4])).toEqual(["request-9"]);
    } finally {
      await Promise.all(ls.map((l) => l.stop()));
    }
  });

  it("Notifier sends cancel, archive and permission hints after the commit too, each once", async () => {
    const ls = await Promise.all(
      [channels.cancel, channels.archived, channels.permissions].map((c) => listen(c)),
    );
    try {
      const errors: unknown[] = [];
      const notifier = new Notifier(
        () => t.sql,
        (err) => errors.push(err),
      );
      notifier.add({ permissions: ["request-7"] });
      notifier.add({ cancel: ["task-7", "task-8"], archived: ["session-7"] });
      await expect.poll(() => [ls[0].heard.length, errors.map(String)], NOTIFIED).toEqual([2, []]);
      expect(await heardUpTo(channels.cancel, ls[0])).toEqual(["task-7", "task-8"]);
      expect(await heardUpTo(channels.archived, ls[1])).toEqual(["session-7"]);
      expect(await heardUpTo(channels.permissions, ls[2])).toEqual(["request-7"]);
      expect(errors).toEqual([]);
    } finally {
      await Promise.all(ls.map((l) => l.stop()));
    }
  });

  it("Notifier sends a head without a new event (-1), `*` for too many heads, and sets synchronous_commit for its own transaction only", async () => {
    const l = await listen(channels.sessions);
    const one = connect(t.url, { max: 1 });
    try {
      const errors: unknown[] = [];
      const notifier = new Notifier(
        () => one.sql,
        (err) => errors.push(err),
      );
      notifier.add({ heads: new Map([["s-1", -1]]) });
      await expect.poll(() => l.heard.length, NOTIFIED).toBe(1);
      notifier.add({
        heads: new Map(Array.from({ length: 300 }, () => [randomUUID(), 1] as [string, number])),
      });
      expect(await heardUpTo(channels.sessions, l)).toEqual([JSON.stringify([["s-1", -1]]), "*"]);
      expect(errors).toEqual([]);
      // The same connection: the setting ended with the notification's transaction.
      const [setting] = await one.sql<{ synchronousCommit: string }[]>`show synchronous_commit`;
      expect(setting).toEqual({ synchronousCommit: "on" });
    } finally {
      await one.close();
      await l.stop();
    }
  });

  it("Notifier coalesces heads (the highest seq of each session) and the gate hint", async () => {
    const sessions = await listen(channels.sessions);
    const gate = await listen(channels.gate);
    try {
      const errors: unknown[] = [];
      const notifier = new Notifier(
        () => t.sql,
        (err) => errors.push(err),
      );
      // The first request is sent at once; the next ones pile up behind it and go out as one.
      notifier.add({ heads: new Map([["s0", 1]]) });
      notifier.add({
        heads: new Map([
          ["s1", 5],
          ["s2", 1],
        ]),
        gate: true,
      });
      notifier.add({ heads: new Map([["s1", 2]]) });
      await expect.poll(() => gate.heard.length, NOTIFIED).toBe(1);
      expect(await heardUpTo(channels.sessions, sessions)).toEqual([
        JSON.stringify([["s0", 1]]),
        JSON.stringify([
          ["s1", 5],
          ["s2", 1],
        ]),
      ]);
      expect(errors).toEqual([]);
    } finally {
      await sessions.stop();
      await gate.stop();
    }
  });
});
