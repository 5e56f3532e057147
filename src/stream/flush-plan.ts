/**
 * What goes in one flush of an event lane (stream/event-lane.ts), and what its answers mean. The
 * statements go out in session id order (every writer of session rows locks them in that order, so
 * concurrent transactions never deadlock), and per session: events, session writes, settlements.
 */
import type { Tx } from "../db/client.js";
import { eventAppend, type OwnerFence, type StoredEvent } from "../sql/event-append.js";
import { sessionLock } from "../sql/session-lock.js";
import { taskSettleOwned } from "../sql/task-settle.js";
import { taskSaveTurnState } from "../sql/task-turn-state.js";
import type { Group } from "./event-batch.js";
import type { SessionWrite, SettleOutcome, SettleRequest } from "./event-types.js";

/** A session write or a settlement waiting for a flush. */
export type SessionWork =
  | { kind: "write"; write: SessionWrite; after: number; done: (written: boolean) => void }
  | { kind: "settle"; request: SettleRequest; after: number; done: (outcome: SettleOutcome) => void };

/** What one flush committed, per work item (null: given up at shutdown). */
export type SessionWorkResult = boolean | SettleOutcome;

/** One statement of a flush and what its answer means. */
export type Step =
  | { kind: "lock" }
  | { kind: "append"; group: Group }
  | { kind: "write"; items: number[] }
  | { kind: "settle"; item: number };

export interface FlushPlan {
  steps: Step[];
  statements: ((q: Tx) => Promise<unknown>)[];
}

/**
 * The flush's statements in session id order. Per session: its row lock when a settlement follows
 * that no earlier statement is sure to have locked it for (the settlement reads the session's last
 * seq, which the lock keeps still; an append locks the row unless its fence fails, and a fence that
 * fails the append fails the settlement of the same turn too), its event groups, one write per turn
 * with only the latest cursor and usage, then its settlements in the order they came.
 */
export function planFlush(groups: Group[], items: SessionWork[]): FlushPlan {
  const bySession = new Map<string, { groups: Group[]; writes: Map<string, number[]>; settles: number[] }>();
  const entry = (sessionId: string) => {
    const known = bySession.get(sessionId);
    if (known) return known;
    const created = { groups: [] as Group[], writes: new Map<string, number[]>(), settles: [] as number[] };
    bySession.set(sessionId, created);
    return created;
  };
  for (const group of groups) entry(group.sessionId).groups.push(group);
  for (const [i, item] of items.entries()) {
    if (item.kind === "settle") {
      entry(item.request.sessionId).settles.push(i);
    } else {
      const { writes } = entry(item.write.sessionId);
      const turn = `${item.write.fence.taskId}:${item.write.fence.attempt}`;
      writes.set(turn, [...(writes.get(turn) ?? []), i]);
    }
  }
  const plan: FlushPlan = { steps: [], statements: [] };
  const add = (step: Step, statement: (q: Tx) => Promise<unknown>) => {
    plan.steps.push(step);
    plan.statements.push(statement);
  };
  for (const sessionId of [...bySession.keys()].sort()) {
    const session = bySession.get(sessionId)!;
    const lockedByAppend = (fence: OwnerFence) =>
      session.groups.some(
        (g) => !g.fence || (g.fence.taskId === fence.taskId && g.fence.attempt === fence.attempt),
      );
    const settleFences = session.settles.map(
      (i) => (items[i] as Extract<SessionWork, { kind: "settle" }>).request.fence,
    );
    if (settleFences.some((fence) => !lockedByAppend(fence))) {
      add({ kind: "lock" }, (q) => sessionLock(q, sessionId));
    }
    for (const group of session.groups) {
      add({ kind: "append" as const, group }, (q) =>
        eventAppend(q, group.sessionId, group.events, group.fence),
      );
    }
    for (const turnWrites of session.writes.values()) {
      const writes = turnWrites.map((i) => (items[i] as Extract<SessionWork, { kind: "write" }>).write);
      const cursor = [...writes].reverse().find((w) => w.cursor)?.cursor;
      const contextUsage = [...writes].reverse().find((w) => w.contextUsage)?.contextUsage;
      const fence = writes[0].fence;
      add({ kind: "write", items: turnWrites }, (q) =>
        taskSaveTurnState(q, sessionId, { cursor, contextUsage }, fence),
      );
    }
    for (const i of session.settles) {
      const { fence, settlement, inputAfter } = (items[i] as Extract<SessionWork, { kind: "settle" }>)
        .request;
      const input = inputAfter === undefined ? null : { sessionId, after: inputAfter };
      add({ kind: "settle", item: i }, (q) => taskSettleOwned(q, fence, settlement, input));
    }
  }
  return plan;
}

/**
 * What a flush committed: its events, in seq order per session (its appends' and its
 * settlements'), and how many turns it settled (each frees a slot).
 */
export function committedOf(plan: FlushPlan, answers: unknown[]): { events: StoredEvent[]; settled: number } {
  const events: StoredEvent[] = [];
  let settled = 0;
  for (const [i, step] of plan.steps.entries()) {
    if (step.kind === "append") events.push(...(answers[i] as StoredEvent[]));
    else if (step.kind === "settle") {
      const answer = answers[i] as Awaited<ReturnType<typeof taskSettleOwned>>;
      if (answer && answer !== "input-pending") {
        events.push(answer.event);
        settled++;
      }
    }
  }
  return { events, settled };
}
