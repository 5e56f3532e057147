/**
 * The event log and resuming from it (docs/api.md, Streaming): gap-free seqs, delta coalescing, one NOTIFY
 * per flush; a client that drops mid-turn resumes with its last seq and misses nothing; a gateway
 * killed with SIGKILL mid-turn loses nothing that was committed, and the restart settles the turn
 * with `task.interrupted` (GATEWAY_RESTART) after every event it had.
 */
import { randomUUID } from "node:crypto";
import { pino } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { connect as connectDb } from "../../src/db/client.js";
import { eventLogOn } from "../support/event-log.js";
import { call, eventually } from "../support/gateway.js";
import { range, seqs, WsClients } from "../support/ws-client.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";
import { useGateway, useProcessGateway } from "../support/use-gateway.js";

const t = useGateway({ workspace: true });
const clients = new WsClients(() => t.url);

interface Row {
  seq: number;
  type: string;
  taskId: string | null;
  data: any;
}

async function rows(sessionId: string): Promise<Row[]> {
  return t.sql<
    Row[]
  >`select seq, type, task_id, data from events where session_id = ${sessionId} order by seq`;
}

afterAll(() => clients.closeAll());

describe("event log", () => {
  it("gives every session gap-free seqs 1..n, with concurrent turns, cancels and queued turns", async () => {
    const sessions = await Promise.all([
      createSession(t.url, t.workspace),
      createSession(t.url, t.workspace),
      createSession(t.url, t.workspace),
    ]);
    const tasks: string[] = [];
    for (const sessionId of sessions) {
      const long = "[deltas 30] [tool 3000] [sleep 20] [deltas 30] [tool 10]";
      tasks.push((await submitPrompt(t.url, sessionId, long)).id);
      tasks.push((await submitPrompt(t.url, sessionId, "[deltas 5] [tool 10]")).id); // queued behind the first
    }
    const hanging = (await submitPrompt(t.url, sessions[0], "[deltas 3] [hang]")).id;
    await call(t.url, "POST", `/v1/tasks/${hanging}/cancel`);
    for (const taskId of [...tasks, hanging]) await waitTask(t.url, taskId);
    for (const sessionId of sessions) {
      const log = await rows(sessionId);
      expect(seqs(log)).toEqual(range(1, log.length));
      const [session] = await t.sql<
        { lastSeq: number }[]
      >`select last_seq from sessions where id = ${sessionId}`;
      expect(session.lastSeq).toBe(log.length);
      // Each task's first/last seq bracket its own events, and its terminal event is its last.
      const own = await t.sql<{ id: string; firstSeq: number; lastSeq: number }[]>`
        select id, first_seq, last_seq from tasks where session_id = ${sessionId}`;
      for (const task of own) {
        const mine = log.filter((e) => e.taskId === task.id && e.type !== "task.position");
        expect(mine[0].seq).toBe(task.firstSeq);
        expect(mine.at(-1)!.seq).toBe(task.lastSeq);
        expect(mine.at(-1)!.type).toMatch(/^task\.(completed|cancelled)$/);
      }
    }
  });

  it("coalesces text deltas within a flush, keeping the text exact", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const taskId = (await submitPrompt(t.url, sessionId, "[deltas 200]")).id;
    const task = await waitTask(t.url, taskId);
    const deltas = (await rows(sessionId)).filter((e) => e.type === "message.delta");
    const expected = range(1, 200)
      .map((i) => `chunk ${i} `)
      .join("");
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.length).toBeLessThan(20);
    expect(deltas.map((e) => e.data.text).join("")).toBe(expected);
    expect(task.result.text).toBe(expected);
  });

  it("sends one NOTIFY per flush, not per event", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const heads: number[] = [];
    const listener = await t.sql.listen("mooring_sessions", (payload) => {
      if (payload === "*") return;
      for (const [id, head] of JSON.parse(payload) as [string, number][])
        if (id === sessionId) heads.push(head);
    });
    try {
      const taskId = (
        await submitPrompt(t.url, sessionId, "[deltas 200] [tool 10] [tool 10] [tool 10] [tool 10] [tool 10]")
      ).id;
      await waitTask(t.url, taskId);
      const log = await rows(sessionId);
      // Wait for the NOTIFY of the last commit to arrive here.
      const deadline = Date.now() + 5000;
      while (heads.at(-1) !== log.length && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 10));
      expect(heads.at(-1)).toBe(log.length);
      // One notification per transaction: each names that transaction's last seq, so they are
      // distinct, and there are far fewer than events (and than agent emissions). They need not
      // arrive in seq order: the admission and the flush notify right after their commits,
      // and a receiver reads up to the highest head it has seen.
      expect(new Set(heads).size).toBe(heads.length);
      expect(log.length).toBeGreaterThan(10);
      expect(heads.length).toBeLessThan(log.length);
      expect(heads.length).toBeLessThanOrEqual(6);
    } finally {
      await listener.unlisten();
    }
  });

  it("flushes a batch of many events for several sessions in one transaction with one NOTIFY", async () => {
    const a = await createSession(t.url, t.workspace);
    const b = await createSession(t.url, t.workspace);
    const notifications: string[] = [];
    // The flush's notification goes out after its commit (docs/architecture.md, Notifications):
    // once it is here, a notification of the test's own for a session nobody has is sent; Postgres
    // delivers a channel's notifications in commit order, so once the marker is here so is any other.
    const marker = randomUUID();
    let markerSeen = false;
    const listener = await t.sql.listen("mooring_sessions", (payload) => {
      if (payload.includes(marker)) markerSeen = true;
      else if (payload.includes(a) || payload.includes(b)) notifications.push(payload);
    });
    const database = connectDb(t.databaseUrl, { max: 2 });
    const published: number[] = [];
    const log = eventLogOn(
      database,
      { flushMs: 60_000, flushMax: 10_000, lanes: 1 },
      pino({ level: "silent" }),
      (events) => published.push(events.length),
    );
    try {
      for (let i = 0; i < 100; i++)
        log.append({ sessionId: a, taskId: null, type: "message.delta", data: { text: `${i},` } });
      log.append({ sessionId: a, taskId: null, type: "session.notice", data: { message: "between" } });
      for (let i = 0; i < 3; i++)
        log.append({ sessionId: a, taskId: null, type: "message.delta", data: { text: `t${i}` } });
      for (let i = 0; i < 50; i++)
        log.append({ sessionId: b, taskId: null, type: "session.notice", data: { message: `n${i}` } });
      await log.flush();
      const inA = await rows(a);
      const inB = await rows(b);
      expect(inA.map((e) => e.type)).toEqual(["message.delta", "session.notice", "message.delta"]);
      expect(inA[0].data.text).toBe(
        range(0, 99)
          .map((i) => `${i},`)
          .join(""),
      );
      expect(inA[2].data.text).toBe("t0t1t2");
      expect(seqs(inB)).toEqual(range(1, 50));
      expect(published).toEqual([53]);
      await eventually(async () => notifications.length > 0, 5000);
      await t.sql`select pg_notify('mooring_sessions', ${JSON.stringify([[marker, 0]])})`;
      await eventually(async () => markerSeen, 5000);
      expect(notifications).toHaveLength(1);
      expect(new Map(JSON.parse(notifications[0]) as [string, number][])).toEqual(
        new Map([
          [a, 3],
          [b, 50],
        ]),
      );
    } finally {
      await listener.unlisten();
      await log.stop();
      await database.close();
    }
  });
});

describe("resume after a disconnect", () => {
  it("a client that drops mid-turn resubscribes with its last seq and gets exactly the rest, then live", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const first = await clients.connect();
    await first.call("events.subscribe", { sessionId });
    const taskId = (
      await submitPrompt(
        t.url,
        sessionId,
        "[deltas 10] [tool 500] [sleep 150] [deltas 10] [tool 500] [sleep 150] [deltas 10] [tool 500] [sleep 300] [deltas 10]",
      )
    ).id;
    // Drop the connection (no close handshake) once part of the turn has arrived.
    await first.waitForEvent(sessionId, (e) => e.type === "tool.result");
    await first.close();
    const seen = first.eventsOf(sessionId);
    const last = seen.at(-1)!.seq;
    expect(seqs(seen)).toEqual(range(1, last));

    const second = await clients.connect();
    const answer = await second.call("events.subscribe", { sessionId, afterSeq: last });
    expect(answer.headSeq).toBeGreaterThanOrEqual(last);
    const terminal = await second.waitForTerminal(sessionId, taskId);
    expect(terminal.type).toBe("task.completed");
    const log = await rows(sessionId);
    const resumed = second.eventsOf(sessionId);
    // Exactly the missing events, in order, ending with the terminal one; together with what the
    // first connection had, the whole log once.
    expect(seqs(resumed)).toEqual(range(last + 1, log.length));
    expect(resumed.at(-1)!.seq).toBe(terminal.seq);
    expect([...seen, ...resumed].map((e) => [e.seq, e.type])).toEqual(log.map((e) => [e.seq, e.type]));
    // The turn was still running when the second subscription started: some events came live.
    expect(log.length).toBeGreaterThan(answer.headSeq);
  });
});

describe("gateway killed with SIGKILL mid-turn", () => {
  // A database of its own; the test's processes are stopped when it ends (the leak guard checks).
  const k = useProcessGateway();

  it("keeps every committed event once, in order, and the restart appends task.interrupted", async () => {
    const env = { LOG_LEVEL: "info", MOORING_INSTANCE_ID: `resume-kill-${process.pid}` };
    const before = await k.spawn(env);
    await before.waitReady();
    const sessionId = await createSession(before.url, t.workspace);
    const watcher = await clients.connect(before.url);
    await watcher.call("events.subscribe", { sessionId });
    const taskId = (
      await submitPrompt(before.url, sessionId, "[deltas 50] [tool 4000] [sleep 5000] [deltas 50] [tool 10]")
    ).id;
    await watcher.waitForEvent(sessionId, (e) => e.type === "tool.result" && e.taskId === taskId);
    before.kill("SIGKILL");
    await before.exited;
    await watcher.closed;
    const seenBefore = watcher.eventsOf(sessionId);
    const committed = await k.sql<{ seq: number; type: string }[]>`
      select seq, type from events where session_id = ${sessionId} order by seq`;
    // What the watcher saw was committed (and is a prefix of the log).
    expect(committed.slice(0, seenBefore.length).map((e) => e.seq)).toEqual(seqs(seenBefore));

    const after = await k.spawn(env);
    await after.waitReady();
    const client = await clients.connect(after.url);
    await client.call("events.subscribe", { sessionId, afterSeq: 0 });
    const terminal = await client.waitForTerminal(sessionId, taskId);
    const got = client.eventsOf(sessionId);
    expect(seqs(got)).toEqual(range(1, got.length));
    // Everything committed before the crash, once, in order, then the interruption.
    expect(got.slice(0, committed.length).map((e) => [e.seq, e.type])).toEqual(
      committed.map((e) => [e.seq, e.type]),
    );
    expect(got.map((e) => e.type)).toEqual([...committed.map((e) => e.type), "task.interrupted"]);
    expect(terminal.type).toBe("task.interrupted");
    expect(terminal.data.error.code).toBe("GATEWAY_RESTART");
    expect(got.filter((e) => e.type.startsWith("message.delta")).length).toBeGreaterThan(0);
    expect((await waitTask(after.url, taskId)).status).toBe("interrupted");
  });
});
