/**
 * Direct tests of the event-log operations in src/sql on a real database: event-append,
 * event-append-positions, event-writes, event-prune and event-read. Each asserts what the operation
 * promises (gap-free seqs under the owner fence, task seq ranges, positions for still-queued tasks
 * only, a flush's commit record, pruning with its head moved in step, pages after a cursor), so a
 * wrong statement fails here. The notifications are test/sql/notify.test.ts's.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Sql } from "../../src/db/client.js";
import { eventAppend, type NewEvent } from "../../src/sql/event-append.js";
import { eventAppendPositions } from "../../src/sql/event-append-positions.js";
import { sessionLock } from "../../src/sql/session-lock.js";
import { eventWriteCommitted, eventWritePrune, eventWriteRecord } from "../../src/sql/event-writes.js";
import { eventPrune } from "../../src/sql/event-prune.js";
import { eventReadPayload, eventReadAfter } from "../../src/sql/event-read.js";
import {
  addOwnedTask,
  addSession,
  addTask,
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

describe("eventAppendPositions", () => {
  it("announces positions of still-queued tasks only, at the next seqs in input order", async () => {
    const id = await addSession(t.sql, { lastSeq: 3 });
    const a = await addTask(t.sql, id, { status: "queued" });
    const running = await addTask(t.sql, id, { status: "running" });
    const b = await addTask(t.sql, id, { status: "queued" });
    const foreign = await addTask(t.sql, await addSession(t.sql), { status: "queued" });
    // Input order against id order, so the events' order can only come from the input.
    const [low, high] = [a.id, b.id].sort();
    const stored = await t.sql.begin((tx) =>
      eventAppendPositions(tx, id, [
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
      await sessionLock(cancel, id);
      await cancel`update tasks set status = 'cancelled' where id = ${task.id}`;
      announce = t.sql.begin(async (tx) => {
        await sessionLock(tx, id);
        return eventAppendPositions(tx, id, [{ taskId: task.id, position: 1 }]);
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
      await t.sql.begin((tx) => eventAppendPositions(tx, id, [{ taskId: running.id, position: 1 }])),
    ).toEqual([]);
    expect(await t.sql.begin((tx) => eventAppendPositions(tx, id, []))).toEqual([]);
    const [session] = await t.sql`select last_seq from sessions where id = ${id}`;
    expect(session.lastSeq).toBe(3);
    expect(await seqsOf(t.sql, id)).toEqual([]);
  });
});

describe("eventAppend", () => {
  const delta = (taskId: string | null, n: number, payload?: unknown): NewEvent => ({
    taskId,
    type: "message.delta",
    data: { n },
    payload,
  });
  const headOf = async (id: string) =>
    (await t.sql<{ lastSeq: number }[]>`select last_seq from sessions where id = ${id}`)[0].lastSeq;

  it("appends after the head, gap-free and in input order, and moves the head and the task's seq range", async () => {
    const id = await addSession(t.sql, { lastSeq: 4 });
    const task = await addTask(t.sql, id, { status: "running" });
    const other = await addSession(t.sql, { lastSeq: 1 });
    await t.sql`update sessions set last_activity_at = '2020-01-01T00:00:00Z' where id = ${id}`;
    const stored = await t.sql.begin((tx) =>
      eventAppend(tx, id, [delta(task.id, 1, { full: 1 }), delta(null, 2), delta(task.id, 3)]),
    );
    expect(stored.map((e) => [e.sessionId, e.seq, e.taskId, e.type, e.data])).toEqual([
      [id, 5, task.id, "message.delta", { n: 1 }],
      [id, 6, null, "message.delta", { n: 2 }],
      [id, 7, task.id, "message.delta", { n: 3 }],
    ]);
    expect(stored[0].at).toBeInstanceOf(Date);
    expect(await headOf(id)).toBe(7);
    expect(await headOf(other)).toBe(1);
    const [session] = await t.sql`select last_activity_at from sessions where id = ${id}`;
    expect(session.lastActivityAt.getFullYear()).toBeGreaterThan(2020);
    expect(await eventReadPayload(t.sql, id, 5)).toMatchObject({ payload: { full: 1 } });
    expect(await eventReadPayload(t.sql, id, 6)).toMatchObject({ payload: null });
    expect(await taskById(t.sql, task.id)).toMatchObject({ firstSeq: 5, lastSeq: 7 });

    // A later flush keeps the task's first seq and moves its last.
    await t.sql.begin((tx) => eventAppend(tx, id, [delta(task.id, 4)]));
    expect(await taskById(t.sql, task.id)).toMatchObject({ firstSeq: 5, lastSeq: 8 });
    expect(await seqsOf(t.sql, id)).toEqual([5, 6, 7, 8]);
  });

  it("leaves the task row alone for a task.position event", async () => {
    const id = await addSession(t.sql);
    const queued = await addTask(t.sql, id, { status: "queued" });
    const stored = await eventAppend(t.sql, id, [
      { taskId: queued.id, type: "task.position", data: { position: 1 } },
    ]);
    expect(stored.map((e) => e.seq)).toEqual([1]);
    expect(await taskById(t.sql, queued.id)).toMatchObject({ firstSeq: null, lastSeq: null });
  });

  it("with a fence, appends only for the task's current owner while it is active", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "running", 2);
    const id = row.sessionId;
    const refused = [
      { ...fence, bootId: randomUUID() },
      { ...fence, attempt: 1 },
      { ...fence, taskId: (await addOwnedTask(t.sql)).row.id },
    ];
    for (const f of refused) expect(await eventAppend(t.sql, id, [delta(row.id, 1)], f)).toEqual([]);
    expect(await headOf(id)).toBe(0);
    expect(await seqsOf(t.sql, id)).toEqual([]);

    expect((await eventAppend(t.sql, id, [delta(row.id, 1)], fence)).map((e) => e.seq)).toEqual([1]);
    await t.sql`update tasks set status = 'cancelling' where id = ${row.id}`;
    expect((await eventAppend(t.sql, id, [delta(row.id, 2)], fence)).map((e) => e.seq)).toEqual([2]);
    // Ended: the owner's late events are dropped.
    await t.sql`update tasks set status = 'completed', finished_at = now() where id = ${row.id}`;
    expect(await eventAppend(t.sql, id, [delta(row.id, 3)], fence)).toEqual([]);
    expect(await headOf(id)).toBe(2);
    expect(await taskById(t.sql, row.id)).toMatchObject({ firstSeq: 1, lastSeq: 2 });
  });

  it("leaves no gap after a rolled-back append, and serializes concurrent writers of one session", async () => {
    const id = await addSession(t.sql);
    await t.sql
      .begin(async (tx) => {
        await eventAppend(tx, id, [delta(null, 1), delta(null, 2)]);
        throw new Error("flush failed");
      })
      .catch(() => {});
    expect(await headOf(id)).toBe(0);
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        t.sql.begin((tx) => eventAppend(tx, id, [delta(null, i), delta(null, i)])),
      ),
    );
    expect(await seqsOf(t.sql, id)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(await headOf(id)).toBe(12);
  });

  it("writes nothing and takes no seq for no events", async () => {
    const id = await addSession(t.sql, { lastSeq: 3 });
    expect(await eventAppend(t.sql, id, [])).toEqual([]);
    expect(await headOf(id)).toBe(3);
  });
});

describe("eventWriteRecord / eventWriteCommitted / eventWritePrune", () => {
  it("remembers a flush that committed, not one that rolled back", async () => {
    const committed = randomUUID();
    const rolledBack = randomUUID();
    await t.sql.begin((tx) => eventWriteRecord(tx, committed));
    await t.sql
      .begin(async (tx) => {
        await eventWriteRecord(tx, rolledBack);
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
    await eventWriteRecord(t.sql, old);
    await eventWriteRecord(t.sql, recent);
    await t.sql`update event_writes set at = now() - interval '61 minutes' where write_id = ${old}`;
    await t.sql`update event_writes set at = now() - interval '59 minutes' where write_id = ${recent}`;
    await eventWritePrune(t.sql);
    expect(await eventWriteCommitted(t.sql, old)).toBe(false);
    expect(await eventWriteCommitted(t.sql, recent)).toBe(true);
  });
});

describe("eventPrune", () => {
  it("keeps the last `keep` events of each longer session and moves pruned_seq with the delete", async () => {
    const long = await sessionWithEvents(t.sql, 10);
    const short = await sessionWithEvents(t.sql, 3);
    expect(await eventPrune(t.sql, 4)).toBe(6);
    expect(await seqsOf(t.sql, long)).toEqual([7, 8, 9, 10]);
    expect(await seqsOf(t.sql, short)).toEqual([1, 2, 3]);
    const heads = await t.sql`select id, pruned_seq from sessions order by last_seq`;
    expect(heads.map((h) => [h.id, h.prunedSeq])).toEqual([
      [short, 0],
      [long, 6],
    ]);
    // Nothing more to do until the log grows past `keep` again.
    expect(await eventPrune(t.sql, 4)).toBe(0);
  });

  it("never leaves an event at or below pruned_seq when a flush commits while it runs", async () => {
    const id = await sessionWithEvents(t.sql, 10);
    let prune: Promise<number> | undefined;
    await t.sql.begin(async (flush) => {
      // A flush of six more events holds the session row; the sweep starts and waits for it.
      await flush`update sessions set last_seq = 16 where id = ${id}`;
      await flush`insert into events (session_id, seq, type, data)
        select ${id}, g, 'message.delta', '{}'::jsonb from generate_series(11, 16) g`;
      prune = eventPrune(t.sql, 4);
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
    expect(await eventPrune(t.sql, 2, 1)).toBe(3);
    const pruned = await t.sql`select pruned_seq from sessions order by pruned_seq`;
    expect(pruned.map((p) => p.prunedSeq)).toEqual([0, 3]);
    expect(await eventPrune(t.sql, 2, 1)).toBe(3);
  });
});

describe("eventReadAfter", () => {
  it("reads one page of a session's events after a cursor, in seq order", async () => {
    const id = await sessionWithEvents(t.sql, 6);
    await sessionWithEvents(t.sql, 6);
    const page = await eventReadAfter(t.sql, id, 2, 3);
    expect(page.map((e) => [e.sessionId, e.seq, e.type, e.data])).toEqual([
      [id, 3, "message.delta", { n: 3 }],
      [id, 4, "message.delta", { n: 4 }],
      [id, 5, "message.delta", { n: 5 }],
    ]);
    expect(page[0]).not.toHaveProperty("payload");
    expect((await eventReadAfter(t.sql, id, 5, 10)).map((e) => e.seq)).toEqual([6]);
    expect(await eventReadAfter(t.sql, id, 6, 10)).toEqual([]);
  });
});

describe("eventReadPayload", () => {
  it("reads one event's whole payload, null for a missing one", async () => {
    const id = await sessionWithEvents(t.sql, 2);
    expect(await eventReadPayload(t.sql, id, 2)).toEqual({
      type: "message.delta",
      data: { n: 2 },
      payload: { full: 2 },
    });
    expect(await eventReadPayload(t.sql, id, 3)).toBeNull();
  });
});
