/**
 * One writer of the event log (stream/event-log.ts): it flushes one transaction at a time for the
 * sessions that hash to it. The lane is the committer's batching strategy: it decides what goes in
 * a flush (`planFlush`), when, and what to do when a flush fails; the committer
 * (domain/committer.ts) sends the flush as a state change like any other and applies what it
 * committed. A flush holds, in one pipelined transaction (db/pipeline.ts):
 * - the pending events, appended per session with gap-free seqs;
 * - running turns' session writes (resume cursor, context usage), the latest of each per turn;
 * - settlements of turns that ended, each with its terminal event, after the turn's own events;
 * - one NOTIFY of the sessions' new heads (and of the gate when a turn settled: a slot is free), and
 *   the flush's record in `event_writes`.
 * Statements go out in session id order (every writer of session rows locks them in that order,
 * so concurrent transactions never deadlock), and per session: events, writes, settlements.
 */
import { retrying, retryPolicies } from "../lib/retry.js";
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Tx } from "../db/client.js";
import { appendEvents, type OwnerFence, type StoredEvent } from "../sql/append-events.js";
import { lockSessionRow } from "../sql/lock-session.js";
import { saveTurnState } from "../sql/save-turn-state.js";
import { type Settlement, settleOwnedTask } from "../sql/settle-task.js";
import { storable, storableString } from "../agents/storable-text.js";
import { isPoisonedFlush, refusalOf } from "./flush-failure.js";
import { type Group, groupBySessionAndFence, takeBatch } from "./event-batch.js";
import type {
  EventLogOptions,
  PendingEvent,
  SessionWrite,
  SettleOutcome,
  SettleRequest,
} from "./event-types.js";
import { type Clock, type ClockTimer, realClock } from "../clock.js";
import { noSpan, type Span, tracingOff } from "../tracing/tracer.js";

/** A session write or a settlement waiting for a flush. */
export type Work =
  | { kind: "write"; write: SessionWrite; after: number; done: (written: boolean) => void }
  | { kind: "settle"; request: SettleRequest; after: number; done: (outcome: SettleOutcome) => void };

/** What one flush committed, per work item (null: given up at shutdown). */
type WorkResult = boolean | SettleOutcome;

/** A flush Postgres refused for its content (stream/flush-failure.ts); `cause` is its error. */
class Poisoned extends Error {
  constructor(override readonly cause: unknown) {
    super("event log flush refused for its content");
  }
}

/**
 * How a lane's flush is committed: the committer's side of its batching strategy
 * (domain/committer.ts), the one way a flush reaches the database.
 */
export interface FlushSender {
  /**
   * Sends `plan` as one pipelined transaction, with the NOTIFY of its sessions' heads (and of the
   * gate when a turn settled) and its record `writeId` (sql/event-writes.ts); once committed,
   * applies its effects (the events it committed, `committedEvents`) inside `fanOut`, which traces
   * them. Resolves with each of the plan's statements' answers, in plan order.
   */
  sendFlush(
    plan: FlushPlan,
    writeId: string,
    fanOut: (events: StoredEvent[], apply: () => void) => void,
  ): Promise<unknown[]>;
  /** Whether an earlier attempt of flush `writeId`, whose answer was lost, committed after all. */
  flushCommitted(writeId: string): Promise<boolean>;
}

/** A work item as it is, then in safe forms to try when Postgres refuses it alone. */
function safeForms(item: Work): Work[] {
  if (item.kind === "write") return [item, { ...item, write: storable(item.write) }];
  const { settlement } = item.request;
  const failed: Settlement = {
    status: "failed",
    error: {
      code: "AGENT_ERROR",
      message: "The turn ended, but its result could not be stored.",
    },
  };
  return [
    item,
    { ...item, request: { ...item.request, settlement: storable(settlement) } },
    // A failed turn takes no follow-up: it settles whatever input came.
    { ...item, request: { ...item.request, settlement: failed, inputAfter: undefined } },
  ];
}

export class EventLane {
  private pending: PendingEvent[] = [];
  /** Session writes and settlements, oldest first. */
  private work: Work[] = [];
  /** Counts since start: `flush` waits until everything queued before its call is in. */
  private eventsAppended = 0;
  private eventsWritten = 0;
  private workQueued = 0;
  private workDone = 0;
  private timer: ClockTimer | null = null;

  private get clock(): Clock {
    return this.options.clock ?? realClock;
  }
  private flushing: Promise<void> | null = null;
  /** Producers waiting for the backlog to shrink (`drained`). */
  private drainWaiters: { limit: number; resolve: () => void }[] = [];

  constructor(
    private readonly sender: FlushSender,
    private readonly options: EventLogOptions,
    private readonly log: Logger,
    private readonly closed: () => boolean,
    /** Running turns traced on this instance (EventLog.traceTurn); empty when tracing is off. */
    private readonly traced: ReadonlyMap<string, Span> = new Map(),
  ) {}

  append(event: PendingEvent): void {
    this.pending.push(event);
    this.eventsAppended++;
    if (this.pending.length >= this.options.flushMax) void this.flush();
    else this.schedule();
  }

  writeSession(write: SessionWrite): Promise<boolean> {
    return new Promise((done) => {
      this.queue({ kind: "write", write, after: this.eventsAppended, done });
      this.schedule();
    });
  }

  /** A settlement goes out at once: the turn is over and its client is waiting. */
  settle(request: SettleRequest): Promise<SettleOutcome> {
    return new Promise((done) => {
      this.queue({ kind: "settle", request, after: this.eventsAppended, done });
      void this.flush();
    });
  }

  /** Resolves once at most `limit` events wait for a flush on this lane. */
  drained(limit: number): Promise<void> {
    if (this.pending.length <= limit) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push({ limit, resolve }));
  }

  private wakeDrained(): void {
    if (this.drainWaiters.length === 0) return;
    const waiting = this.drainWaiters;
    this.drainWaiters = [];
    for (const waiter of waiting) {
      if (this.pending.length <= waiter.limit) waiter.resolve();
      else this.drainWaiters.push(waiter);
    }
  }

  private queue(item: Work): void {
    this.work.push(item);
    this.workQueued++;
  }

  private schedule(): void {
    if (!this.timer) this.timer = this.clock.setTimeout(() => void this.flush(), this.options.flushMs);
  }

  /**
   * Commit everything queued so far; resolves once it is durable (retrying while the database is
   * away). It does not wait for what is queued after the call: under steady load the lane is never
   * empty, and a settling turn must not wait for other turns' later events.
   */
  async flush(): Promise<void> {
    if (this.timer) {
      this.clock.clearTimeout(this.timer);
      this.timer = null;
    }
    const events = this.eventsAppended;
    const work = this.workQueued;
    for (;;) {
      while (this.flushing) await this.flushing;
      // Both queues are taken oldest first, so these counts say that everything before the call is in.
      if (this.eventsWritten >= events && this.workDone >= work) return;
      const batch = takeBatch(this.pending);
      const covered = this.eventsWritten + batch.length;
      // Work goes in once every event queued before it is in this flush or an earlier one: a
      // settlement's terminal event must follow all of its turn's events.
      let n = 0;
      while (n < this.work.length && this.work[n].after <= covered) n++;
      const items = this.work.splice(0, n);
      this.flushing = this.write(batch, items).finally(() => {
        this.eventsWritten += batch.length;
        this.workDone += items.length;
        this.flushing = null;
        this.wakeDrained();
      });
      await this.flushing;
    }
  }

  private async write(batch: PendingEvent[], items: Work[]): Promise<void> {
    const t0 = performance.now();
    // Tracing off: the map is empty and nothing below runs.
    const spans = this.traced.size > 0 ? this.flushSpans(batch, items) : null;
    let results: WorkResult[] | null;
    try {
      results = await this.commit(batch, items);
    } catch (err) {
      for (const span of spans ?? []) {
        span.fail("FLUSH_FAILED");
        span.end();
      }
      throw err;
    }
    if (spans) for (const span of spans) span.end();
    this.options.onFlush?.((performance.now() - t0) / 1000);
    for (const [i, item] of items.entries()) {
      const result = results?.[i] ?? null;
      if (item.kind === "write") item.done(result === true);
      else item.done(result === null || typeof result === "boolean" ? { kind: "gave-up" } : result);
    }
  }

  /**
   * One flush in one transaction, retried while the database is away (until shutdown gives up).
   * A flush Postgres refuses for its content (stream/flush-failure.ts) never stops the lane: it is
   * split to find what is refused, that is stored in a safe form, and the rest goes through.
   */
  private async commit(batch: PendingEvent[], items: Work[]): Promise<WorkResult[] | null> {
    try {
      return await this.attempt(batch, items);
    } catch (err) {
      if (!(err instanceof Poisoned)) throw err;
      this.log.error(
        { err: refusalOf(err.cause), events: batch.length, sessionWork: items.length },
        "event log flush refused by the database; isolating what it refuses",
      );
      if (!(await this.isolate(batch, err))) return null;
      return this.commitItems(items);
    }
  }

  /**
   * Events of a refused flush, in halves, in order (so each session's seqs stay gap-free and in
   * order, and the turn's settlement, written after them, stays last). A single refused event is
   * stored in a safe form. False when shutdown gave up.
   */
  private async isolate(events: PendingEvent[], refused: Poisoned): Promise<boolean> {
    if (events.length === 0) return true;
    if (events.length === 1) return this.storeSafe(events[0], refused.cause);
    const mid = Math.ceil(events.length / 2);
    for (const half of [events.slice(0, mid), events.slice(mid)]) {
      try {
        if ((await this.attempt(half, [])) === null) return false;
      } catch (err) {
        if (!(err instanceof Poisoned)) throw err;
        if (!(await this.isolate(half, err))) return false;
      }
    }
    return true;
  }

  /**
   * A refused event: first with every string made storable (agents/storable-text.ts; the drivers
   * do that already, so this is for events from elsewhere), else replaced by a `session.notice`
   * saying what was dropped and why, in the same place of the session's log.
   */
  private async storeSafe(event: PendingEvent, cause: unknown): Promise<boolean> {
    const where = {
      sessionId: event.sessionId,
      taskId: event.taskId,
      type: event.type,
      reason: refusalOf(cause),
    };
    const repaired: PendingEvent = { ...event, data: storable(event.data), payload: storable(event.payload) };
    const notice: PendingEvent = {
      sessionId: event.sessionId,
      taskId: event.taskId,
      fence: event.fence,
      type: "session.notice",
      data: {
        message: `An agent event (${storableString(event.type).slice(0, 64)}) could not be stored and was dropped: ${refusalOf(cause)}.`,
      },
    };
    for (const [form, said] of [
      [repaired, "event log: a refused event was stored with its text made storable"],
      [notice, "event log: a refused event was dropped and replaced by a notice"],
    ] as const) {
      try {
        const done = (await this.attempt([form], [])) !== null;
        this.log.warn(where, said);
        return done;
      } catch (err) {
        if (!(err instanceof Poisoned)) throw err;
      }
    }
    this.log.error(where, "event log: a refused event was dropped");
    return true;
  }

  /**
   * The session writes and settlements of a refused flush: together, else one by one, each in a
   * safe form when refused alone (a settlement's result made storable, else the turn fails with a
   * message saying why; a session write made storable, else dropped). They always happen: a
   * settlement lost here would leave its turn running with its slot taken.
   */
  private async commitItems(items: Work[]): Promise<WorkResult[] | null> {
    if (items.length === 0) return [];
    try {
      return await this.attempt([], items);
    } catch (err) {
      if (!(err instanceof Poisoned)) throw err;
    }
    const results: WorkResult[] = [];
    for (const item of items) {
      let answer: WorkResult | null = null;
      for (const form of safeForms(item)) {
        try {
          answer = (await this.attempt([], [form]))?.[0] ?? null;
          if (form !== item)
            this.log.warn(
              { kind: item.kind },
              "event log: a refused session write or settlement was stored in a safe form",
            );
          break;
        } catch (err) {
          if (!(err instanceof Poisoned)) throw err;
          this.log.error(
            { kind: item.kind, reason: refusalOf(err.cause) },
            "event log: a session write or settlement was refused",
          );
          // A refused write answers false (not written); a settlement tries its next form.
          if (item.kind === "write") answer = false;
        }
      }
      results.push(answer ?? { kind: "gave-up" });
    }
    return results;
  }

  /** One transaction, retried while the database is away; throws Poisoned when retrying cannot help. */
  private async attempt(batch: PendingEvent[], items: Work[]): Promise<WorkResult[] | null> {
    const plan = planFlush(groupBySessionAndFence(batch), items);
    // Identifies this flush across retries: a retry first asks whether an earlier attempt whose
    // answer was lost committed after all (sql/event-writes.ts), so nothing is written twice.
    const writeId = randomUUID();
    let uncertain = false;
    const once = async (): Promise<WorkResult[]> => {
      if (uncertain && (await this.sender.flushCommitted(writeId))) {
        this.log.warn(
          { writeId, events: batch.length },
          "event log flush had committed; its answer was lost",
        );
        // Subscribers still get these events: the commit carried its notification, and the
        // polling backstop reads them from the log.
        return items.map((item) => (item.kind === "write" ? true : { kind: "unconfirmed" }));
      }
      uncertain = true;
      const answers = await this.sender.sendFlush(plan, writeId, (events, apply) =>
        this.fanOut(events, apply),
      );
      return this.committed(plan, answers, items);
    };
    try {
      return await retrying(retryPolicies.flush, once, {
        clock: this.clock,
        // Refused for its content: nothing was committed (the answer came back), so no doubt is
        // left and retrying cannot help. At shutdown, a few attempts and then give up.
        retryable: (err, attempt) => !isPoisonedFlush(err) && !(this.closed() && attempt >= 3),
        onRetry: (err, retryInMs) =>
          this.log.warn(
            { err: String(err), retryInMs, events: batch.length },
            "event log flush failed; retrying",
          ),
      });
    } catch (err) {
      if (isPoisonedFlush(err)) throw new Poisoned(err);
      this.log.error(
        { err: String(err), lost: batch.length, sessionWork: items.length },
        "event log could not be flushed at shutdown",
      );
      return null;
    }
  }

  /** Answer each work item from what committed (its events were applied by the committer). */
  private committed(plan: FlushPlan, answers: unknown[], items: Work[]): WorkResult[] {
    const results: WorkResult[] = new Array(items.length);
    for (const [i, step] of plan.steps.entries()) {
      const answer = answers[i];
      if (step.kind === "append") {
        const stored = answer as StoredEvent[];
        if (stored.length === 0 && step.group.fence) {
          this.log.warn(
            {
              sessionId: step.group.sessionId,
              taskId: step.group.fence.taskId,
              attempt: step.group.fence.attempt,
              dropped: step.group.events.length,
            },
            "lost guard: events of a task this instance no longer owns were dropped",
          );
        }
      } else if (step.kind === "write") {
        for (const item of step.items) results[item] = answer as boolean;
      } else if (step.kind === "settle") {
        const settled = answer as Awaited<ReturnType<typeof settleOwnedTask>>;
        if (settled === "input-pending") results[step.item] = { kind: "input-pending" };
        else
          results[step.item] = settled
            ? { kind: "settled", row: settled.row, event: settled.event }
            : { kind: "not-owner" };
      }
    }
    return results;
  }

  /** One `mooring.flush` span per traced turn with events or a settlement in this flush. */
  private flushSpans(batch: PendingEvent[], items: Work[]): Span[] {
    const counts = new Map<string, { events: number; settles: boolean; writes: number }>();
    const count = (taskId: string | undefined) => {
      if (!taskId || !this.traced.has(taskId)) return null;
      const c = counts.get(taskId) ?? { events: 0, settles: false, writes: 0 };
      counts.set(taskId, c);
      return c;
    };
    for (const event of batch) {
      const c = count(event.fence?.taskId);
      if (c) c.events++;
    }
    for (const item of items) {
      const c = count(item.kind === "write" ? item.write.fence.taskId : item.request.fence.taskId);
      if (!c) continue;
      if (item.kind === "write") c.writes++;
      else c.settles = true;
    }
    const tracer = this.options.tracer ?? tracingOff;
    return [...counts].map(([taskId, c]) =>
      tracer.span("mooring.flush", this.traced.get(taskId) ?? noSpan, {
        "mooring.flush.events": c.events,
        "mooring.flush.batch_events": batch.length,
        "mooring.flush.session_writes": c.writes,
        "mooring.flush.settles": c.settles,
      }),
    );
  }

  /**
   * Around the committer's fan-out of a flush's events (the subscribers' feeds, waiting long polls):
   * one `mooring.fanout` span per traced turn whose events these are.
   */
  private fanOut(events: StoredEvent[], apply: () => void): void {
    if (this.traced.size === 0) {
      apply();
      return;
    }
    const counts = new Map<string, number>();
    for (const event of events) {
      if (event.taskId && this.traced.has(event.taskId))
        counts.set(event.taskId, (counts.get(event.taskId) ?? 0) + 1);
    }
    const tracer = this.options.tracer ?? tracingOff;
    const spans = [...counts].map(([taskId, n]) =>
      tracer.span("mooring.fanout", this.traced.get(taskId) ?? noSpan, { "mooring.fanout.events": n }),
    );
    try {
      apply();
    } finally {
      for (const span of spans) span.end();
    }
  }
}

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
export function planFlush(groups: Group[], items: Work[]): FlushPlan {
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
      (i) => (items[i] as Extract<Work, { kind: "settle" }>).request.fence,
    );
    if (settleFences.some((fence) => !lockedByAppend(fence))) {
      add({ kind: "lock" }, (q) => lockSessionRow(q, sessionId));
    }
    for (const group of session.groups) {
      add({ kind: "append" as const, group }, (q) =>
        appendEvents(q, group.sessionId, group.events, group.fence),
      );
    }
    for (const turnWrites of session.writes.values()) {
      const writes = turnWrites.map((i) => (items[i] as Extract<Work, { kind: "write" }>).write);
      const cursor = [...writes].reverse().find((w) => w.cursor)?.cursor;
      const contextUsage = [...writes].reverse().find((w) => w.contextUsage)?.contextUsage;
      const fence = writes[0].fence;
      add({ kind: "write", items: turnWrites }, (q) =>
        saveTurnState(q, sessionId, { cursor, contextUsage }, fence),
      );
    }
    for (const i of session.settles) {
      const { fence, settlement, inputAfter } = (items[i] as Extract<Work, { kind: "settle" }>).request;
      const input = inputAfter === undefined ? null : { sessionId, after: inputAfter };
      add({ kind: "settle", item: i }, (q) => settleOwnedTask(q, fence, settlement, input));
    }
  }
  return plan;
}

/** The events a flush committed, in seq order per session: its appends' and its settlements'. */
export function committedEvents(plan: FlushPlan, answers: unknown[]): StoredEvent[] {
  const events: StoredEvent[] = [];
  for (const [i, step] of plan.steps.entries()) {
    if (step.kind === "append") events.push(...(answers[i] as StoredEvent[]));
    else if (step.kind === "settle") {
      const settled = answers[i] as Awaited<ReturnType<typeof settleOwnedTask>>;
      if (settled && settled !== "input-pending") events.push(settled.event);
    }
  }
  return events;
}

/** How many turns a flush settled (each frees a slot). */
export function settledInFlush(plan: FlushPlan, answers: unknown[]): number {
  let settled = 0;
  for (const [i, step] of plan.steps.entries()) {
    const answer = answers[i] as Awaited<ReturnType<typeof settleOwnedTask>>;
    if (step.kind === "settle" && answer && answer !== "input-pending") settled++;
  }
  return settled;
}
