/**
 * src/sql/session-fork.ts on a real database: which turn a fork is taken at, where the agent's
 * conversation stood, whether the source still stands there, and what a fork copies (the ended
 * turns up to the cut with new ids, their events and the turnless ones renumbered after
 * `session.forked`, the branch's transcript) and what it leaves (turns still open at the cut, the
 * source's own `session.forked`, other conversations, webhook deliveries for the copies).
 */
import { beforeEach, describe, expect, it } from "vitest";
import type { Tx } from "../../src/db/client.js";
import type { Rewind } from "../../src/db/schema.js";
import { eventAppend, type NewEvent } from "../../src/sql/event-append.js";
import {
  type ForkPoint,
  sessionCopyForkHistory,
  sessionCopyTranscript,
  sessionHasTurnAfter,
  sessionInsertFork,
  sessionInsertForkedEvent,
  sessionIsAtSourceHead,
  sessionReadBranchPoint,
  sessionReadForkPoint,
  sessionReadTurns,
} from "../../src/sql/session-fork.js";
import { transcriptInsertChunk, transcriptReadChunks } from "../../src/sql/transcript-chunks.js";
import type { TaskStatus } from "../../src/contract/task-status.js";
import { addSession, addTask, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

beforeEach(async () => {
  await t.sql`truncate webhook_endpoints, webhook_deliveries`;
});

const inTx = <T>(fn: (tx: Tx) => Promise<T>): Promise<T> => t.sql.begin(fn) as Promise<T>;

const ev = (taskId: string | null, type: string, n = 0): NewEvent =>
  ({ taskId, type, data: { n }, payload: { full: n } }) as NewEvent;

/** A turn of `sessionId` in `status`, its agent cursor at `messageId` (of conversation `conv`). */
async function turn(
  sessionId: string,
  status: TaskStatus,
  over: { messageId?: string | null; rolledBack?: boolean } = {},
): Promise<string> {
  const task = await addTask(t.sql, sessionId, { status });
  const cursor =
    over.messageId === undefined ? null : { agentSessionId: "conv", lastAssistantMessageId: over.messageId };
  await t.sql`update tasks set agent_cursor = ${cursor === null ? null : JSON.stringify(cursor)}::text::jsonb,
                               rolled_back_at = ${over.rolledBack ? new Date() : null}
              where id = ${task.id}`;
  return task.id;
}

const rewind = (turnIndex: number): Rewind => ({
  kind: "fork",
  agentSessionId: "conv",
  messageId: "m0",
  turnIndex,
  atSourceHead: false,
});

const forkOf = (sourceId: string, point: ForkPoint, idempotencyKey: string | null = null) =>
  inTx((tx) =>
    sessionInsertFork(tx, {
      sourceId,
      title: "fork",
      metadata: { k: 1 },
      idempotencyKey,
      point,
      rewind: rewind(point.turnIndex),
    }),
  );

const point = (turnIndex: number, lastSeq: number): ForkPoint => ({
  turnIndex,
  lastSeq,
  rolledBack: false,
  status: "completed",
});

describe("sessionReadForkPoint", () => {
  it("answers the last completed, kept turn by default, or the ended turn asked for; never an open one", async () => {
    const id = await addSession(t.sql);
    const t0 = await turn(id, "completed");
    await eventAppend(t.sql, id, [ev(t0, "message.delta"), ev(t0, "message.delta")]);
    const t1 = await turn(id, "failed");
    await eventAppend(t.sql, id, [ev(t1, "message.delta")]);
    const t2 = await turn(id, "completed", { rolledBack: true });
    await eventAppend(t.sql, id, [ev(t2, "message.delta")]);
    await turn(id, "running");
    await turn(id, "queued");
    const read = (atTurn: number | null) => inTx((tx) => sessionReadForkPoint(tx, id, atTurn));
    expect(await read(null)).toEqual({ turnIndex: 0, lastSeq: 2, rolledBack: false, status: "completed" });
    expect(await read(1)).toEqual({ turnIndex: 1, lastSeq: 3, rolledBack: false, status: "failed" });
    expect(await read(2)).toEqual({ turnIndex: 2, lastSeq: 4, rolledBack: true, status: "completed" });
    expect(await read(3)).toBeNull();
    expect(await read(4)).toBeNull();
    expect(await read(9)).toBeNull();
    const empty = await addSession(t.sql);
    expect(await inTx((tx) => sessionReadForkPoint(tx, empty, null))).toBeNull();
    expect(await inTx((tx) => sessionReadForkPoint(tx, empty, 0))).toBeNull();
  });
});

describe("sessionReadBranchPoint", () => {
  it("answers the newest kept turn up to the point that saved an assistant message", async () => {
    const id = await addSession(t.sql);
    await turn(id, "completed", { messageId: "m0" });
    await turn(id, "failed", { messageId: null });
    await turn(id, "completed", { messageId: "m2", rolledBack: true });
    await turn(id, "completed", { messageId: "m3" });
    const read = (upTo: number) => inTx((tx) => sessionReadBranchPoint(tx, id, upTo));
    expect(await read(2)).toEqual({ agentSessionId: "conv", messageId: "m0" });
    expect(await read(3)).toEqual({ agentSessionId: "conv", messageId: "m3" });
    const none = await addSession(t.sql);
    await turn(none, "failed");
    expect(await inTx((tx) => sessionReadBranchPoint(tx, none, 5))).toEqual({
      agentSessionId: null,
      messageId: null,
    });
  });
});

describe("sessionIsAtSourceHead", () => {
  it("is true only with no later turn, no pending rewind and the cursor on the branch's conversation", async () => {
    const id = await addSession(t.sql);
    await t.sql`update sessions set agent_session_id = 'conv' where id = ${id}`;
    await turn(id, "completed", { messageId: "m0" });
    const at = (turnIndex: number, conv: string | null, source = id) =>
      inTx((tx) => sessionIsAtSourceHead(tx, source, turnIndex, conv));
    expect(await at(0, "conv")).toBe(true);
    expect(await at(0, null)).toBe(false);
    expect(await at(0, "other")).toBe(false);
    await t.sql`update sessions set rewind = ${JSON.stringify(rewind(0))}::text::jsonb where id = ${id}`;
    expect(await at(0, "conv")).toBe(false);
    await t.sql`update sessions set rewind = null where id = ${id}`;
    for (const status of ["queued", "failed"] as const) {
      const later = await addSession(t.sql);
      await t.sql`update sessions set agent_session_id = 'conv' where id = ${later}`;
      await turn(later, "completed");
      await turn(later, status, { rolledBack: status === "failed" });
      expect(await at(0, "conv", later)).toBe(false);
      expect(await at(1, "conv", later)).toBe(true);
    }
    expect(await at(0, "conv")).toBe(true);
  });
});

describe("sessionHasTurnAfter", () => {
  it("sees any turn of the source after the point, and no other session's", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    await turn(id, "completed");
    for (let i = 0; i < 3; i++) await turn(other, "completed");
    expect(await sessionHasTurnAfter(t.sql, id, 0)).toBe(false);
    await turn(id, "queued");
    expect(await sessionHasTurnAfter(t.sql, id, 0)).toBe(true);
    expect(await sessionHasTurnAfter(t.sql, id, 1)).toBe(false);
  });
});

describe("sessionInsertFork", () => {
  it("makes the fork's row from the source's tenant, group, workspace, agent and config, turn indexes going on", async () => {
    const source = await addSession(t.sql, {
      tenant: "a",
      workspace: "/src",
      agent: "claude-code",
      lastSeq: 9,
    });
    await t.sql`update sessions set instance_group = 'g1', agent_config = '{"model":"m"}'::jsonb, title = 'source',
                  agent_session_id = 'conv', metadata = '{"src":true}'::jsonb, archived_at = now()
                where id = ${source}`;
    const { id, created } = await forkOf(source, point(3, 9));
    expect(created).toBe(true);
    const [row] = await t.sql`select * from sessions where id = ${id}`;
    expect(row).toMatchObject({
      tenant: "a",
      instanceGroup: "g1",
      workspace: "/src",
      agent: "claude-code",
      agentConfig: { model: "m" },
      title: "fork",
      metadata: { k: 1 },
      forkedFrom: { sessionId: source, turnIndex: 3 },
      rewind: rewind(3),
      turnCount: 4,
      nextTurnIndex: 4,
      // Not the source's: its own log, conversation and state.
      lastSeq: 0,
      agentSessionId: null,
      archivedAt: null,
    });
  });

  it("answers the first fork for a repeated key of the source's tenant, a new one in another tenant", async () => {
    const a = await addSession(t.sql, { tenant: "a" });
    const b = await addSession(t.sql, { tenant: "b" });
    const first = await forkOf(a, point(0, 1), "k");
    expect(await forkOf(a, point(5, 7), "k")).toEqual({ id: first.id, created: false });
    const other = await forkOf(b, point(0, 1), "k");
    expect(other.created).toBe(true);
    expect(other.id).not.toBe(first.id);
    const [{ n }] = await t.sql<
      { n: number }[]
    >`select count(*)::int as n from sessions where forked_from is not null`;
    expect(n).toBe(2);
  });
});

describe("sessionCopyForkHistory / sessionInsertForkedEvent / sessionReadTurns", () => {
  /**
   * A source (itself a fork) whose turn 1 is the fork point (cut at seq 7):
   * 1 session.forked · 2-3 turn 0 · 4 task.position of turn 2 (queued then) · 5 turnless ·
   * 6-7 turn 1 · 8 turn 2 (ended after the cut).
   */
  async function source() {
    const id = await addSession(t.sql, { tenant: "a" });
    await eventAppend(t.sql, id, [ev(null, "session.forked")]);
    const t0 = await turn(id, "completed", { messageId: "m0" });
    const t1 = await turn(id, "failed");
    const t2 = await turn(id, "completed");
    await t.sql`update tasks set result = '{"r":0}'::jsonb, trace_context = 'trace' where id = ${t0}`;
    await eventAppend(t.sql, id, [ev(t0, "message.delta", 2), ev(t0, "task.completed", 3)]);
    await eventAppend(t.sql, id, [{ taskId: t2, type: "task.position", data: { position: 1 } }]);
    await eventAppend(t.sql, id, [ev(null, "session.reverted", 5)]);
    await eventAppend(t.sql, id, [ev(t1, "message.delta", 6), ev(t1, "task.failed", 7)]);
    await eventAppend(t.sql, id, [ev(t2, "task.completed", 8)]);
    // Webhooks subscribed to the tenant's completions: copies must not announce them again.
    await t.sql`insert into webhook_endpoints (id, tenant, url, events)
                values ('e1', 'a', 'https://hooks.example.com/a', '{task.completed,task.failed}')`;
    await t.sql`truncate webhook_deliveries`;
    return { id, t0, t1, t2 };
  }

  it("copies the ended turns up to the cut with new ids, and their events and the turnless ones renumbered after seq 1", async () => {
    const src = await source();
    const cut = point(1, 7);
    const { id: fork } = await forkOf(src.id, cut);
    const { carried, forked, copying } = await inTx(async (tx) => {
      const carried = await sessionCopyForkHistory(tx, fork, src.id, cut);
      const forked = await sessionInsertForkedEvent(
        tx,
        fork,
        { sessionId: src.id, turnIndex: 1, carriedTurns: carried.turns },
        carried.events,
      );
      const [{ copying }] = await tx<
        { copying: string }[]
      >`select current_setting('mooring.copying', true) as copying`;
      return { carried, forked, copying };
    });
    expect(carried).toEqual({ turns: 2, events: 5 });
    expect(forked.seq).toBe(1);
    expect(forked.at).toBeInstanceOf(Date);
    expect(copying).toBe("off");

    const turns = await inTx((tx) => sessionReadTurns(tx, fork));
    expect(turns.map((r) => [r.turnIndex, r.status, r.firstSeq, r.lastSeq, r.sessionId, r.tenant])).toEqual([
      [0, "completed", 2, 3, fork, "a"],
      [1, "failed", 5, 6, fork, "a"],
    ]);
    expect(turns.map((r) => r.id)).not.toContain(src.t0);
    expect(turns.map((r) => r.id)).not.toContain(src.t1);
    expect(turns[0]).toMatchObject({
      result: { r: 0 },
      agentCursor: { agentSessionId: "conv", lastAssistantMessageId: "m0" },
      continuesTaskId: null,
    });
    const [srcTurn0] = await t.sql`select * from tasks where id = ${src.t0}`;
    expect(turns[0].createdAt).toEqual(srcTurn0.createdAt);
    expect(turns[0].finishedAt).toEqual(srcTurn0.finishedAt);

    const events =
      await t.sql`select seq, task_id, type, data, payload, at from events where session_id = ${fork} order by seq`;
    expect(events.map((e) => [e.seq, e.taskId, e.type, e.data])).toEqual([
      [1, null, "session.forked", { sessionId: src.id, turnIndex: 1, carriedTurns: 2 }],
      [2, turns[0].id, "message.delta", { n: 2 }],
      [3, turns[0].id, "task.completed", { n: 3 }],
      [4, null, "session.reverted", { n: 5 }],
      [5, turns[1].id, "message.delta", { n: 6 }],
      [6, turns[1].id, "task.failed", { n: 7 }],
    ]);
    expect(events[1].payload).toEqual({ full: 2 });
    const [srcEvent2] = await t.sql`select at from events where session_id = ${src.id} and seq = 2`;
    expect(events[1].at).toEqual(srcEvent2.at);
    const [session] = await t.sql`select last_seq from sessions where id = ${fork}`;
    expect(session.lastSeq).toBe(6);

    // The copies announced nothing; the fork's own events after them do.
    expect(await t.sql`select 1 from webhook_deliveries`).toHaveLength(0);
    const [forkTurn] = await t.sql<{ id: string }[]>`
      insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at)
      values (${fork}, 'a', 2, 'completed', 'p', 60000, now()) returning id`;
    await eventAppend(t.sql, fork, [ev(forkTurn.id, "task.completed")]);
    const deliveries = await t.sql`select session_id, seq from webhook_deliveries`;
    expect(deliveries).toEqual([{ sessionId: fork, seq: 7 }]);

    // The source is as it was.
    const [srcSession] = await t.sql`select last_seq from sessions where id = ${src.id}`;
    expect(srcSession.lastSeq).toBe(8);
    expect((await inTx((tx) => sessionReadTurns(tx, src.id))).map((r) => r.id)).toEqual([
      src.t0,
      src.t1,
      src.t2,
    ]);
  });

  it("copies only the turns that had ended by the cut, never the source's own session.forked", async () => {
    const src = await source();
    const cut = point(0, 1);
    const { id: fork } = await forkOf(src.id, cut);
    const carried = await inTx((tx) => sessionCopyForkHistory(tx, fork, src.id, cut));
    // Seq 1 is the source's own session.forked: not carried.
    expect(carried).toEqual({ turns: 0, events: 0 });
    const cut2 = point(2, 5);
    const { id: fork2 } = await forkOf(src.id, cut2);
    expect(await inTx((tx) => sessionCopyForkHistory(tx, fork2, src.id, cut2))).toEqual({
      turns: 1,
      events: 3,
    });
    expect((await inTx((tx) => sessionReadTurns(tx, fork2))).map((r) => r.turnIndex)).toEqual([0]);
  });
});

describe("sessionCopyTranscript", () => {
  it("copies the branch conversation's chunks under the fork, not the source's other conversations, keeping what the fork has", async () => {
    const source = await addSession(t.sql);
    const fork = await addSession(t.sql);
    const other = await addSession(t.sql);
    await transcriptInsertChunk(t.sql, source, "conv", 0, Buffer.from("abc"));
    await transcriptInsertChunk(t.sql, source, "conv", 3, Buffer.from("def"));
    await transcriptInsertChunk(t.sql, source, "older", 0, Buffer.from("zzz"));
    await transcriptInsertChunk(t.sql, other, "conv", 6, Buffer.from("ghi"));
    await transcriptInsertChunk(t.sql, fork, "conv", 3, Buffer.from("DEF"));
    await inTx((tx) => sessionCopyTranscript(tx, fork, source, "conv"));
    const chunks = (s: string, conv: string) =>
      transcriptReadChunks(t.sql, s, conv).then((rows) =>
        rows.map((c) => [c.byteOffset, c.bytes.toString()]),
      );
    expect(await chunks(fork, "conv")).toEqual([
      [0, "abc"],
      [3, "DEF"],
    ]);
    expect(await chunks(fork, "older")).toEqual([]);
    expect(await chunks(source, "conv")).toHaveLength(2);
  });
});
