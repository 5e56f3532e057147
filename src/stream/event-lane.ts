/**
 * One writer of the event log (stream/event-log.ts): it flushes one transaction at a time for the
 * sessions that hash to it. The lane is the committer's batching strategy: it queues events,
 * session writes and settlements, decides when a flush goes and what goes in it (`planFlush`,
 * stream/flush-plan.ts), retries it while the database is away, and hands a flush Postgres refuses
 * for its content to its recovery (stream/refused-flush.ts); the committer
 * (domain/committer.ts) sends the flush as a state change like any other and applies what it
 * committed. A flush holds, in one pipelined transaction (db/pipeline.ts):
 * - the pending events, appended per session with gap-free seqs;
 * - running turns' session writes (resume cursor, context usage), the latest of each per turn;
 * - settlements of turns that ended, each with its terminal event, after the turn's own events;
 * - one NOTIFY of the sessions' new heads (and of the gate when a turn settled: a slot is free), and
 *   the flush's record in `event_writes`.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { type Clock, type ClockTimer, realClock } from "../clock.js";
import { retrying, retryPolicies } from "../lib/retry.js";
import type { StoredEvent } from "../sql/event-append.js";
import type { taskSettleOwned } from "../sql/task-settle.js";
import type { Span } from "../tracing/tracer.js";
import { groupBySessionAndFence, takeBatch } from "./event-batch.js";
import type {
  EventLogOptions,
  PendingEvent,
  SessionWrite,
  SettleOutcome,
  SettleRequest,
} from "./event-types.js";
import { isPoisonedFlush } from "./flush-failure.js";
import { type FlushPlan, planFlush, type SessionWork, type SessionWorkResult } from "./flush-plan.js";
import { FlushTracing } from "./flush-tracing.js";
import { RefusedFlush, RefusedFlushRecovery } from "./refused-flush.js";

/**
 * How a lane's flush is committed: the committer's side of its batching strategy
 * (domain/committer.ts), the one way a flush reaches the database.
 */
export interface FlushSender {
  /**
   * Sends `plan` as one pipelined transaction, with the NOTIFY of its sessions' heads (and of the
   * gate when a turn settled) and its record `writeId` (sql/event-writes.ts); once committed,
   * applies its effects (the events it committed, `committedOf`) inside `fanOut`, which traces
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

export class EventLane {
  private pending: PendingEvent[] = [];
  /** Session writes and settlements, oldest first. */
  private work: SessionWork[] = [];
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

  /** A flush Postgres refuses for its content: what it holds, isolated and stored safely. */
  private readonly refusals: RefusedFlushRecovery;
  private readonly tracing: FlushTracing;

  constructor(
    private readonly sender: FlushSender,
    private readonly options: EventLogOptions,
    private readonly log: Logger,
    private readonly closed: () => boolean,
    /** Running turns traced on this instance (EventLog.traceTurn); empty when tracing is off. */
    traced: ReadonlyMap<string, Span> = new Map(),
  ) {
    this.refusals = new RefusedFlushRecovery((batch, items) => this.attempt(batch, items), log);
    this.tracing = new FlushTracing(traced, options.tracer);
  }

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

  private queue(item: SessionWork): void {
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

  private async write(batch: PendingEvent[], items: SessionWork[]): Promise<void> {
    const t0 = performance.now();
    // Tracing off: the map is empty and nothing below runs.
    const spans = this.tracing.on ? this.tracing.flushSpans(batch, items) : null;
    let results: SessionWorkResult[] | null;
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
  private async commit(batch: PendingEvent[], items: SessionWork[]): Promise<SessionWorkResult[] | null> {
    try {
      return await this.attempt(batch, items);
    } catch (err) {
      if (!(err instanceof RefusedFlush)) throw err;
      return this.refusals.recover(batch, items, err);
    }
  }

  /** One transaction, retried while the database is away; throws RefusedFlush when retrying cannot help. */
  private async attempt(batch: PendingEvent[], items: SessionWork[]): Promise<SessionWorkResult[] | null> {
    const plan = planFlush(groupBySessionAndFence(batch), items);
    // Identifies this flush across retries: a retry first asks whether an earlier attempt whose
    // answer was lost committed after all (sql/event-writes.ts), so nothing is written twice.
    const writeId = randomUUID();
    let uncertain = false;
    const once = async (): Promise<SessionWorkResult[]> => {
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
        this.tracing.fanOut(events, apply),
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
      if (isPoisonedFlush(err)) throw new RefusedFlush(err);
      this.log.error(
        { err: String(err), lost: batch.length, sessionWork: items.length },
        "event log could not be flushed at shutdown",
      );
      return null;
    }
  }

  /** Answer each work item from what committed (its events were applied by the committer). */
  private committed(plan: FlushPlan, answers: unknown[], items: SessionWork[]): SessionWorkResult[] {
    const results: SessionWorkResult[] = new Array(items.length);
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
        const settled = answer as Awaited<ReturnType<typeof taskSettleOwned>>;
        if (settled === "input-pending") results[step.item] = { kind: "input-pending" };
        else
          results[step.item] = settled
            ? { kind: "settled", row: settled.row, event: settled.event }
            : { kind: "not-owner" };
      }
    }
    return results;
  }
}
