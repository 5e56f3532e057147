/**
 * src/sql/notify.ts on a real database, heard on a second connection that LISTENs (postgres.js
 * keeps one listening connection for every channel, so what it hears across channels is in the
 * order Postgres delivered it). Each send arrives on its channel with its payload; one sent inside
 * a transaction arrives at the commit, not before, and never after a rollback.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { connect, type Queryable, type Tx } from "../../src/db/client.js";
import {
  notifyArchived,
  notifyCancel,
  notifyChannels,
  notifyDrain,
  notifyGate,
  notifyInput,
  notifyInTransaction,
  notifyPermission,
  Notifier,
  notifySessions,
} from "../../src/sql/notify.js";
import { NOTIFIED, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

interface Listening {
  /** Payloads heard on the channel, in order. */
  heard: string[];
  stop(): Promise<void>;
}

/** Listens on `channel` for the test. */
async function listen(channel: string, log?: string[]): Promise<Listening> {
  const heard: string[] = [];
  const l = await t.sql.listen(channel, (payload) => {
    heard.push(payload);
    log?.push(`${channel}:${payload}`);
  });
  return { heard, stop: () => l.unlisten() };
}

/**
 * Everything heard on `channel` up to now: a marker is sent on it from another connection, and once
 * the marker is heard, so is everything committed before it. The payloads without the marker.
 * Only what committed before the marker: a Notifier sends on its own connection after `add`
 * returned, so a test first waits to hear its last send (else the marker can commit first).
 */
async function heardUpTo(channel: string, l: { heard: string[] }): Promise<string[]> {
  const marker = `marker-${randomUUID()}`;
  await t.sql`select pg_notify(${channel}, ${marker})`;
  await expect.poll(() => l.heard.includes(marker), NOTIFIED).toBe(true);
  return l.heard.filter((p) => !p.startsWith("marker-"));
}

/** Runs `fn` in a transaction that rolls back; the error is swallowed. */
async function rolledBack(fn: (tx: Tx) => Promise<unknown>) {
  await t.sql
    .begin(async (tx) => {
      await fn(tx);
      throw new Error("rollback");
    })
    .catch((err: Error) => expect(err.message).toBe("rollback"));
}

describe("notifySessions", () => {
  it("sends session heads at commit, `*` when too many to list, nothing for none or on rollback", async () => {
    const l = await listen(notifyChannels.sessions);
    try {
      await t.sql.begin((tx) => notifySessions(tx, new Map()));
      await rolledBack((tx) => notifySessions(tx, new Map([["rolled-back", 1]])));
      await t.sql.begin((tx) => notifySessions(tx, new Map([["s1", 4]])));
      const many = new Map(Array.from({ length: 300 }, () => [randomUUID(), 1] as [string, number]));
      await t.sql.begin((tx) => notifySessions(tx, many));
      expect(await heardUpTo(notifyChannels.sessions, l)).toEqual([JSON.stringify([["s1", 4]]), "*"]);
    } finally {
      await l.stop();
    }
  });

  it("is not heard before its transaction commits", async () => {
    const l = await listen(notifyChannels.sessions);
    try {
      await t.sql.begin(async (tx) => {
        await notifySessions(tx, new Map([["s2", 3]]));
        // Another connection's notification, sent after this one, arrives while this one waits.
        expect(await heardUpTo(notifyChannels.sessions, l)).toEqual([]);
      });
      expect(await heardUpTo(notifyChannels.sessions, l)).toEqual([JSON.stringify([["s2", 3]])]);
    } finally {
      await l.stop();
    }
  });
});

describe("notifyGate / notifyCancel / notifyPermission / notifyArchived / notifyDrain / notifyInput", () => {
  const sends = [
    { channel: notifyChannels.gate, send: notifyGate, payload: "" },
    { channel: notifyChannels.cancel, send: (q: Queryable) => notifyCancel(q, "task-1"), payload: "task-1" },
    {
      channel: notifyChannels.permissions,
      send: (q: Queryable) => notifyPermission(q, "request-1"),
      payload: "request-1",
    },
    {
      channel: notifyChannels.archived,
      send: (q: Queryable) => notifyArchived(q, "session-1"),
      payload: "session-1",
    },
    { channel: notifyChannels.drain, send: (q: Queryable) => notifyDrain(q, "boot-1"), payload: "boot-1" },
    { channel: notifyChannels.input, send: (q: Queryable) => notifyInput(q, "task-2"), payload: "task-2" },
  ];

  it("sends each hint on its own channel with its payload", async () => {
    const ls = await Promise.all(sends.map((s) => listen(s.channel)));
    try {
      for (const s of sends) await s.send(t.sql);
      for (const [i, s] of sends.entries()) expect(await heardUpTo(s.channel, ls[i])).toEqual([s.payload]);
    } finally {
      await Promise.all(ls.map((l) => l.stop()));
    }
  });

  it("inside a transaction: heard at its commit, not before, never after a rollback", async () => {
    const ls = await Promise.all(sends.map((s) => listen(s.channel)));
    try {
      await rolledBack(async (tx) => {
        for (const s of sends) await s.send(tx);
      });
      await t.sql.begin(async (tx) => {
        for (const s of sends) await s.send(tx);
        for (const [i, s] of sends.entries()) expect(await heardUpTo(s.channel, ls[i])).toEqual([]);
      });
      for (const [i, s] of sends.entries()) expect(await heardUpTo(s.channel, ls[i])).toEqual([s.payload]);
    } finally {
      await Promise.all(ls.map((l) => l.stop()));
    }
  });
});

describe("notifyInTransaction", () => {
  const channels = [
    notifyChannels.sessions,
    notifyChannels.gate,
    notifyChannels.cancel,
    notifyChannels.archived,
    notifyChannels.permissions,
    notifyChannels.drain,
    notifyChannels.input,
  ];

  it("sends a change's notifications inside its transaction: every channel at commit, in the listed order; none on rollback", async () => {
    const log: string[] = [];
    const ls = await Promise.all(channels.map((c) => listen(c, log)));
    try {
      // Given in another order than the channels are listed: the order heard is the listed one.
      const all = {
        input: ["task-10"],
        drain: ["boot-9"],
        permissions: ["request-9"],
        archived: ["session-9"],
        cancel: ["task-9", "task-8"],
        gate: true,
        heads: new Map([["s9", 7]]),
      };
      await rolledBack((tx) => notifyInTransaction(tx, { ...all, cancel: ["rolled-back"] }));
      await t.sql.begin(async (tx) => {
        await notifyInTransaction(tx, all);
        expect(await heardUpTo(notifyChannels.gate, ls[1])).toEqual([]);
      });
      for (const [i, c] of channels.entries()) await heardUpTo(c, ls[i]);
      expect(log.filter((p) => !p.includes(":marker-"))).toEqual([
        `${notifyChannels.sessions}:${JSON.stringify([["s9", 7]])}`,
        `${notifyChannels.gate}:`,
        `${notifyChannels.cancel}:task-9`,
        `${notifyChannels.cancel}:task-8`,
        `${notifyChannels.archived}:session-9`,
        `${notifyChannels.permissions}:request-9`,
        `${notifyChannels.drain}:boot-9`,
        `${notifyChannels.input}:task-10`,
      ]);
    } finally {
      await Promise.all(ls.map((l) => l.stop()));
    }
  });

  it("sends nothing for an empty change, and no gate hint when gate is false", async () => {
    const log: string[] = [];
    const ls = await Promise.all(channels.map((c) => listen(c, log)));
    try {
      await t.sql.begin((tx) => notifyInTransaction(tx, {}));
      await t.sql.begin((tx) => notifyInTransaction(tx, { gate: false, heads: new Map(), cancel: [] }));
      for (const [i, c] of channels.entries()) await heardUpTo(c, ls[i]);
      expect(log.filter((p) => !p.includes(":marker-"))).toEqual([]);
    } finally {
      await Promise.all(ls.map((l) => l.stop()));
    }
  });
});

describe("Notifier", () => {
  it("sends a head without a new event (-1), `*` for too many heads, and sets synchronous_commit for its own transaction only", async () => {
    const l = await listen(notifyChannels.sessions);
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
      // Its send is on its own connection: heard before the marker is sent, or the marker (sent on
      // another connection) may commit first and the `*` be missing (seen in CI under load).
      await expect.poll(() => l.heard.length, NOTIFIED).toBe(2);
      expect(await heardUpTo(notifyChannels.sessions, l)).toEqual([JSON.stringify([["s-1", -1]]), "*"]);
      expect(errors).toEqual([]);
      // The same connection: the setting ended with the notification's transaction.
      const [setting] = await one.sql<{ synchronousCommit: string }[]>`show synchronous_commit`;
      expect(setting).toEqual({ synchronousCommit: "on" });
    } finally {
      await one.close();
      await l.stop();
    }
  });

  it("sends cancel, archive, permission, drain and input hints after the commit too, each once", async () => {
    const ls = await Promise.all(
      [
        notifyChannels.cancel,
        notifyChannels.archived,
        notifyChannels.permissions,
        notifyChannels.drain,
        notifyChannels.input,
      ].map((c) => listen(c)),
    );
    try {
      const errors: unknown[] = [];
      const notifier = new Notifier(
        () => t.sql,
        (err) => errors.push(err),
      );
      notifier.add({ permissions: ["request-7"] });
      notifier.add({
        cancel: ["task-7", "task-8"],
        archived: ["session-7"],
        drain: ["boot-7"],
        input: ["task-6"],
      });
      await expect.poll(() => [ls[0].heard.length, errors.map(String)], NOTIFIED).toEqual([2, []]);
      expect(await heardUpTo(notifyChannels.cancel, ls[0])).toEqual(["task-7", "task-8"]);
      expect(await heardUpTo(notifyChannels.archived, ls[1])).toEqual(["session-7"]);
      expect(await heardUpTo(notifyChannels.permissions, ls[2])).toEqual(["request-7"]);
      expect(await heardUpTo(notifyChannels.drain, ls[3])).toEqual(["boot-7"]);
      expect(await heardUpTo(notifyChannels.input, ls[4])).toEqual(["task-6"]);
      expect(errors).toEqual([]);
    } finally {
      await Promise.all(ls.map((l) => l.stop()));
    }
  });

  it("coalesces heads (the highest seq of each session) and the gate hint", async () => {
    const sessions = await listen(notifyChannels.sessions);
    const gate = await listen(notifyChannels.gate);
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
      expect(await heardUpTo(notifyChannels.sessions, sessions)).toEqual([
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
