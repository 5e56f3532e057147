/**
 * Unit tests of the event log's pure flush planning (src/stream): `takeBatch` (how many pending
 * events go in one transaction), `groupBySessionAndFence` (one append per session and writer,
 * deltas merged), `planFlush` (the statements of one flush, their order and the row locks) and
 * the notification a flush declares from its answers (`flushChange`).
 * No database: a plan's statements are called with a recording query tag to see what they send.
 */
import { describe, expect, it } from "vitest";
import type { Tx } from "../../src/db/client.js";
import type { OwnerFence } from "../../src/sql/event-append.js";
import { groupBySessionAndFence, takeBatch } from "../../src/stream/event-batch.js";
import { flushChange } from "../../src/domain/committer.js";
import type { StoredEvent } from "../../src/sql/event-append.js";
import { planFlush, type SessionWork } from "../../src/stream/flush-plan.js";
import type { PendingEvent, SessionWrite } from "../../src/stream/event-log.js";

const MAX_EVENTS = 256;
const MAX_BYTES = 8 * 1024 * 1024;
/** What takeBatch counts for an event besides its tool output or input. */
const OVERHEAD = 256;

// Session ids chosen so that their sort order is not their order of appearance.
const S1 = "00000000-0000-4000-8000-000000000001";
const S2 = "00000000-0000-4000-8000-000000000002";
const S3 = "00000000-0000-4000-8000-000000000003";

function fence(taskId: string, attempt = 1): OwnerFence {
  return { taskId, bootId: "boot-1", attempt };
}

function delta(
  sessionId: string,
  taskId: string,
  text: string,
  f: OwnerFence | undefined = fence(taskId),
): PendingEvent {
  return { sessionId, taskId, type: "message.delta", data: { text }, fence: f };
}

function toolResult(sessionId: string, taskId: string, output: unknown): PendingEvent {
  return { sessionId, taskId, type: "tool.result", data: {}, payload: { output }, fence: fence(taskId) };
}

function numbered(n: number): PendingEvent[] {
  return Array.from({ length: n }, (_, i) => delta(S1, "t1", String(i)));
}

describe("takeBatch", () => {
  it("takes nothing from an empty queue", () => {
    const pending: PendingEvent[] = [];
    expect(takeBatch(pending)).toEqual([]);
    expect(pending).toEqual([]);
  });

  it("takes every event of a small queue, oldest first, and leaves the queue empty", () => {
    const pending = numbered(5);
    const all = [...pending];
    expect(takeBatch(pending)).toEqual(all);
    expect(pending).toEqual([]);
  });

  it(`takes at most ${MAX_EVENTS} events, and the rest stay queued in order`, () => {
    const pending = numbered(MAX_EVENTS + 44);
    const all = [...pending];
    const batch = takeBatch(pending);
    expect(batch).toEqual(all.slice(0, MAX_EVENTS));
    expect(pending).toEqual(all.slice(MAX_EVENTS));
    expect(takeBatch(pending)).toEqual(all.slice(MAX_EVENTS));
    expect(pending).toEqual([]);
  });

  it("takes exactly the limit when exactly the limit is queued", () => {
    const pending = numbered(MAX_EVENTS);
    expect(takeBatch(pending)).toHaveLength(MAX_EVENTS);
    expect(pending).toHaveLength(0);
  });

  it("stops before the event that would pass 8 MiB", () => {
    const big = MAX_BYTES / 4; // four of them plus overhead pass the bound; three do not
    const pending = Array.from({ length: 5 }, (_, i) => toolResult(S1, "t1", "x".repeat(big - i)));
    const all = [...pending];
    expect(takeBatch(pending)).toEqual(all.slice(0, 3));
    expect(pending).toEqual(all.slice(3));
  });

  it("takes events that fill the bound exactly", () => {
    const each = MAX_BYTES / 2 - OVERHEAD;
    const pending = [
      toolResult(S1, "t1", "x".repeat(each)),
      toolResult(S1, "t1", "y".repeat(each)),
      delta(S1, "t1", "z"),
    ];
    const batch = takeBatch(pending);
    expect(batch).toHaveLength(2);
    expect(pending).toHaveLength(1);
  });

  it("always takes one event, however large, alone", () => {
    const huge = toolResult(S1, "t1", "x".repeat(MAX_BYTES + 1));
    const small = delta(S1, "t1", "after");
    const pending = [huge, small];
    expect(takeBatch(pending)).toEqual([huge]);
    expect(takeBatch(pending)).toEqual([small]);
  });

  it("a huge event after small ones waits for the next batch", () => {
    const small = delta(S1, "t1", "before");
    const huge = toolResult(S1, "t1", "x".repeat(MAX_BYTES));
    const pending = [small, huge];
    expect(takeBatch(pending)).toEqual([small]);
    expect(pending).toEqual([huge]);
  });

  it("measures a tool's input when it has no output, and counts a non-string payload as small", () => {
    const input = (text: string): PendingEvent => ({
      sessionId: S1,
      taskId: "t1",
      type: "tool.call",
      data: {},
      payload: { input: text },
    });
    const inputs = [input("x".repeat(MAX_BYTES / 2)), input("y".repeat(MAX_BYTES / 2))];
    expect(takeBatch([...inputs])).toHaveLength(1);
    const structured = Array.from({ length: 3 }, () =>
      toolResult(S1, "t1", { lines: ["x".repeat(MAX_BYTES)] }),
    );
    expect(takeBatch([...structured])).toHaveLength(3);
  });
});

describe("groupBySessionAndFence", () => {
  it("merges a run of one task's deltas into one event, in order", () => {
    const groups = groupBySessionAndFence([delta(S1, "t1", "a"), delta(S1, "t1", "b"), delta(S1, "t1", "c")]);
    expect(groups).toHaveLength(1);
    expect(groups[0].events).toEqual([
      { taskId: "t1", type: "message.delta", data: { text: "abc" }, payload: undefined },
    ]);
  });

  it("does not merge across another event type, and keeps each session's order", () => {
    const tool = toolResult(S1, "t1", "out");
    const groups = groupBySessionAndFence([
      delta(S1, "t1", "a"),
      tool,
      delta(S1, "t1", "b"),
      delta(S1, "t1", "c"),
    ]);
    expect(groups.map((g) => g.events.map((e) => [e.type, e.data]))).toEqual([
      [
        ["message.delta", { text: "a" }],
        ["tool.result", {}],
        ["message.delta", { text: "bc" }],
      ],
    ]);
  });

  it("keeps one group per session and writer (fence), in order of first appearance", () => {
    const groups = groupBySessionAndFence([
      delta(S2, "t2", "x"),
      delta(S1, "t1", "y"),
      delta(S1, "t1b", "z", fence("t1b")),
      delta(S1, "t1", "w", fence("t1", 2)),
      { sessionId: S1, taskId: null, type: "session.notice", data: { text: "n" } },
      delta(S2, "t2", "v"),
    ]);
    expect(
      groups.map((g) => [
        g.sessionId,
        g.fence ? `${g.fence.taskId}:${g.fence.attempt}` : null,
        g.events.length,
      ]),
    ).toEqual([
      [S2, "t2:1", 1],
      [S1, "t1:1", 1],
      [S1, "t1b:1", 1],
      [S1, "t1:2", 1],
      [S1, null, 1],
    ]);
    expect(groups[0].events[0].data).toEqual({ text: "xv" });
  });
});

/** A query tag that records each statement's text and values and answers with no rows. */
function recordingTx(): { tx: Tx; sent: { text: string; values: unknown[] }[] } {
  const sent: { text: string; values: unknown[] }[] = [];
  const tag = (strings: TemplateStringsArray, ...values: unknown[]) => {
    sent.push({ text: strings.join("$"), values });
    return Promise.resolve([]);
  };
  return { tx: tag as unknown as Tx, sent };
}

const noop = () => {};

function settle(sessionId: string, f: OwnerFence): SessionWork {
  return {
    kind: "settle",
    request: { sessionId, fence: f, settlement: { status: "completed" } } as never,
    after: 0,
    done: noop,
  };
}

function write(w: SessionWrite): SessionWork {
  return { kind: "write", write: w, after: 0, done: noop };
}

function cursor(turnCount: number) {
  return {
    agentSessionId: `agent-${turnCount}`,
    turnCount,
    lastAssistantMessageId: null,
    pastAgentSessionIds: [],
  };
}

function usage(inputTokens: number) {
  return { inputTokens, contextWindow: 1000, percent: inputTokens / 10 };
}

/** The plan's steps in a compact form: kind, and session (or item indexes) where it helps. */
function shape(plan: ReturnType<typeof planFlush>): string[] {
  return plan.steps.map((step) => {
    if (step.kind === "append")
      return `append ${step.group.sessionId.slice(-1)}:${step.group.fence?.taskId ?? "-"}`;
    if (step.kind === "write") return `write ${step.items.join(",")}`;
    if (step.kind === "settle") return `settle ${step.item}`;
    return "lock";
  });
}

describe("planFlush", () => {
  it("plans nothing for an empty flush", () => {
    const plan = planFlush([], []);
    expect(plan).toEqual({ steps: [], statements: [] });
  });

  it("goes through sessions in id order, whatever order they came in, one statement per step", () => {
    const groups = groupBySessionAndFence([delta(S3, "t3", "a"), delta(S1, "t1", "b"), delta(S2, "t2", "c")]);
    const plan = planFlush(groups, []);
    expect(shape(plan)).toEqual(["append 1:t1", "append 2:t2", "append 3:t3"]);
    expect(plan.statements).toHaveLength(plan.steps.length);
  });

  it("orders one session's statements: events, then session writes, then settlements", () => {
    const groups = groupBySessionAndFence([delta(S1, "t1", "a")]);
    const items = [settle(S1, fence("t1")), write({ sessionId: S1, fence: fence("t1"), cursor: cursor(1) })];
    expect(shape(planFlush(groups, items))).toEqual(["append 1:t1", "write 1", "settle 0"]);
  });

  it("locks the session row before a settlement with no events of its turn in the flush", () => {
    const plan = planFlush([], [settle(S1, fence("t1"))]);
    expect(shape(plan)).toEqual(["lock", "settle 0"]);
    const { tx, sent } = recordingTx();
    void plan.statements[0](tx);
    expect(sent[0].text).toMatch(/from sessions where id = \$ for update/);
    expect(sent[0].values).toEqual([S1]);
  });

  it("does not lock again when the settled turn's own events (same task and attempt) are appended first", () => {
    const groups = groupBySessionAndFence([delta(S1, "t1", "a")]);
    expect(shape(planFlush(groups, [settle(S1, fence("t1"))]))).toEqual(["append 1:t1", "settle 0"]);
  });

  it("does not lock again when gateway-level events (no fence) of the session are appended first", () => {
    const groups = groupBySessionAndFence([
      { sessionId: S1, taskId: null, type: "session.notice", data: {} },
    ]);
    expect(shape(planFlush(groups, [settle(S1, fence("t1"))]))).toEqual(["append 1:-", "settle 0"]);
  });

  it("locks when the session's appended events belong to another turn or another attempt", () => {
    const otherTask = groupBySessionAndFence([delta(S1, "t2", "a")]);
    expect(shape(planFlush(otherTask, [settle(S1, fence("t1"))]))).toEqual([
      "lock",
      "append 1:t2",
      "settle 0",
    ]);
    const otherAttempt = groupBySessionAndFence([delta(S1, "t1", "a", fence("t1", 2))]);
    expect(shape(planFlush(otherAttempt, [settle(S1, fence("t1", 1))]))).toEqual([
      "lock",
      "append 1:t1",
      "settle 0",
    ]);
  });

  it("locks once for several settlements of one session, and keeps them in the order they came", () => {
    const plan = planFlush([], [settle(S1, fence("t2")), settle(S1, fence("t1"))]);
    expect(shape(plan)).toEqual(["lock", "settle 0", "settle 1"]);
  });

  it("writes each turn once per flush, with its latest cursor and latest usage", () => {
    const f = fence("t1");
    const items = [
      write({ sessionId: S1, fence: f, cursor: cursor(1), contextUsage: usage(10) }),
      write({ sessionId: S1, fence: f, contextUsage: usage(20) }),
      write({ sessionId: S1, fence: f, cursor: cursor(2) }),
      write({ sessionId: S1, fence: f }),
    ];
    const plan = planFlush([], items);
    expect(shape(plan)).toEqual(["write 0,1,2,3"]);
    const { tx, sent } = recordingTx();
    void plan.statements[0](tx);
    expect(sent).toHaveLength(1);
    const values = sent[0].values;
    expect(values).toContain("agent-2"); // the latest cursor
    expect(values).not.toContain("agent-1");
    expect(values).toContain(JSON.stringify(usage(20))); // the latest usage, though an older write came later
    expect(values).toContain(S1);
    expect(values).toContain("t1");
  });

  it("keeps the writes of different turns (or attempts) of one session apart", () => {
    const items = [
      write({ sessionId: S1, fence: fence("t1"), cursor: cursor(1) }),
      write({ sessionId: S1, fence: fence("t2"), cursor: cursor(2) }),
      write({ sessionId: S1, fence: fence("t1", 2), cursor: cursor(3) }),
      write({ sessionId: S1, fence: fence("t1"), cursor: cursor(4) }),
    ];
    expect(shape(planFlush([], items))).toEqual(["write 0,3", "write 1", "write 2"]);
  });

  it("plans a mixed flush session by session, each complete before the next", () => {
    const groups = groupBySessionAndFence([delta(S2, "t2", "a"), delta(S1, "t1", "b"), delta(S2, "t2", "c")]);
    const items = [
      settle(S2, fence("t2")),
      write({ sessionId: S3, fence: fence("t3"), contextUsage: usage(5) }),
      settle(S3, fence("t3")),
      write({ sessionId: S1, fence: fence("t1"), cursor: cursor(1) }),
    ];
    const plan = planFlush(groups, items);
    expect(shape(plan)).toEqual([
      "append 1:t1",
      "write 3",
      "append 2:t2",
      "settle 0",
      "lock",
      "write 1",
      "settle 2",
    ]);
    expect(plan.statements).toHaveLength(plan.steps.length);
  });
});

describe("flushChange's notification", () => {
  const stored = (sessionId: string, seq: number, type = "message.delta"): StoredEvent => ({
    sessionId,
    seq,
    taskId: "t",
    type,
    at: new Date(0),
    data: {},
  });

  it("declares, after the commit, each session's head as its appends and settlements answered, and the gate when a turn settled", () => {
    const groups = groupBySessionAndFence([delta(S2, "t2", "a"), delta(S1, "t1", "b")]);
    const plan = planFlush(groups, [settle(S2, fence("t2"))]);
    expect(shape(plan)).toEqual(["append 1:t1", "append 2:t2", "settle 0"]);
    const answers = [
      [stored(S1, 4), stored(S1, 5)],
      [stored(S2, 7)],
      { row: {}, event: stored(S2, 8, "task.completed") },
    ];
    const { effects } = flushChange(plan, "w").outcome({ steps: answers });
    expect(effects.notify).toEqual({
      when: "afterCommit",
      heads: new Map([
        [S1, 5],
        [S2, 8],
      ]),
      gate: true,
    });
    expect(effects.events?.map((e) => [e.sessionId, e.seq])).toEqual([
      [S1, 4],
      [S1, 5],
      [S2, 7],
      [S2, 8],
    ]);
  });

  it("notifies no gate for a settlement the fence refused or that found input pending, nothing for a flush that grew no log", () => {
    const groups = groupBySessionAndFence([delta(S1, "t1", "a")]);
    const plan = planFlush(groups, [settle(S1, fence("t1")), settle(S1, fence("t2"))]);
    expect(shape(plan)).toEqual(["lock", "append 1:t1", "settle 0", "settle 1"]);
    const { effects } = flushChange(plan, "w").outcome({
      steps: [null, [stored(S1, 3)], "input-pending", null],
    });
    expect(effects.notify).toEqual({ when: "afterCommit", heads: new Map([[S1, 3]]), gate: false });
    const writes = planFlush([], [write({ sessionId: S1, fence: fence("t1"), cursor: cursor(1) })]);
    expect(flushChange(writes, "w").outcome({ steps: [null] }).effects.notify).toBeUndefined();
  });
});
