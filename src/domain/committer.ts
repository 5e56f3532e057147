/**
 * The one commit path: every state change is sent here, and what it set off is applied here.
 *
 * A state change is a value: the statements it sends and the effects it declares, built in
 * domain/changes/ (one file each; its naming rule in index.ts) except the event log's flush, built
 * here (`flushChange`), and the turn's own writes, built beside the turn. `Committer`
 * sends it by one of its strategies and, once the commit is in, applies the declared effects here
 * and nowhere else (`apply` is private: nothing outside can claim a commit happened):
 * - inline, pipelined (`commit`): one write, every decision raised in SQL, the answers typed in
 *   the shape the statements were built in (a record, with lists for a batch's parts);
 * - inline, interactive (`transaction`): for changes whose statements depend on earlier answers;
 * - batched (`eventLog`, stream/event-log.ts): events, running turns' session writes and
 *   settlements wait in the log's lanes, and each lane's flush is sent here as a state change
 *   (`flushChange`) by its `FlushSender`: the lane decides what goes in a flush and when, and
 *   retries or isolates a refused flush; the committer sends it and applies its events.
 *
 * The effects a change may declare:
 * - `events`: committed events go to this instance's subscribers (stream/session-feeds.ts), the
 *   metrics and the change bus.
 * - `notify`: the Postgres notifications other instances hear, by channel (session heads, gate,
 *   cancel, archived, permissions, drain, input; sql/notify.ts), and when they go out. The rule:
 *   `afterCommit`, right after the commit through the coalescing `Notifier`, in a transaction of its
 *   own that does not wait for its WAL flush. A NOTIFY inside a durable transaction holds a global
 *   lock from its pre-commit until its commit is on disk, so every notifying commit waited for the
 *   previous one's fsync (measured: bench/results/notes.md). A notification after the commit can be
 *   lost when the process dies in between: every channel has a poll behind it (session feeds,
 *   the sweeper's claim poll, the lease heartbeat reading `cancelling`, the permission and input
 *   polls, the instance heartbeat reading a drain request). One exception, `inTransaction` (sent by
 *   the committer as the transaction's last statements: delivered at its commit or never): an
 *   archive, rare, whose mooring_archived has no poll behind it on other instances (their warm
 *   agent and checkpoint refs of the session). The event log's flush notifies its sessions' heads
 *   from the seqs it answered.
 *   Nothing else sends a notification (test/unit/import-layers.test.ts); the webhook outbox trigger
 *   (migrations/0012) notifies mooring_webhooks in the transactions that write a delivery.
 * - `claimed`: tasks this instance claimed; the worker starts them.
 * - `cancel`: tasks whose owner should stop them; stopped at once when this instance runs them
 *   (other instances hear mooring_cancel, declared in `notify`).
 * - `sessionsChanged`: sessions whose tasks changed without a new event (a turn going
 *   `cancelling`): their subscribers and long-polls here re-read.
 * - `archived`: sessions archived; their warm agents here close (others hear mooring_archived).
 * - `purged`: sessions deleted with all their rows; their subscribers here are ended (others find
 *   the session gone at their feeds' next poll, stream/session-feeds.ts).
 * - `gateChanged`: a slot may be free or work was queued: this instance tries to claim.
 * - `queueMoved`: queued tasks moved; positions get announced.
 * - `permissionsResolved`: permission requests answered; the turn waiting on one here resumes at
 *   once (the instance running it elsewhere hears mooring_permissions, declared in `notify`).
 * - `inputAdded`: tasks whose running turn got steered input; the turn here reads it at once (the
 *   instance running it elsewhere hears mooring_input, declared in `notify`).
 *
 * Everything reaches its consumer through the change bus (stream/change-bus.ts), to which each
 * part subscribes when it is built: no hooks are wired after construction. Effects run outside the
 * log context of the request that made the change (the work they set off outlives the request).
 */
import type { Logger } from "pino";
import type { Tx } from "../db/client.js";
import type { Database } from "../db/client.js";
import { pipelined } from "../db/pipeline.js";
import { requestContext } from "../log.js";
import type { MetricsReporter } from "../metrics/reporter.js";
import type { StoredEvent } from "../sql/event-append.js";
import { eventWriteCommitted, eventWriteRecord } from "../sql/event-writes.js";
import { type Notifications, Notifier, notifyInTransaction } from "../sql/notify.js";
import type { TaskRow } from "../sql/task-row.js";
import type { ChangeBus } from "../stream/change-bus.js";
import type { FlushSender } from "../stream/event-lane.js";
import { committedOf, type FlushPlan } from "../stream/flush-plan.js";
import { EventLog, type EventLogOptions } from "../stream/event-log.js";

/** When a change's notifications go out (see the module comment). */
export type NotifyWhen = "inTransaction" | "afterCommit";

/** What a committed state change set off (see the module comment for each). */
export interface Effects<When extends NotifyWhen = NotifyWhen> {
  events?: StoredEvent[];
  notify?: Notifications & { when: When };
  claimed?: TaskRow[];
  cancel?: string[];
  sessionsChanged?: string[];
  archived?: string[];
  purged?: string[];
  gateChanged?: boolean;
  queueMoved?: boolean;
  permissionsResolved?: string[];
  inputAdded?: string[];
}

/**
 * Named statements of a pipelined change: each a single statement issued when built, or a list or
 * record of them (a batch's statements per submit, a flush's steps), sent in the order they were
 * built and answered in the same shape, typed.
 */
export type Statement = Promise<unknown> | readonly Statement[] | { readonly [name: string]: Statement };
export type Statements = Record<string, Statement>;
export type Answers<S> = S extends Promise<infer T> ? T : { [K in keyof S]: Answers<S[K]> };

/** A pipelined state change: its statements, in order, and what its answers mean. */
export interface StateChange<S extends Statements, T> {
  statements(q: Tx): S;
  /** Its notifications can only go after the commit: they are known from the answers. */
  outcome(answers: Answers<S>): { value: T; effects: Effects<"afterCommit"> };
}

/** Where committed events go on this instance (the session feeds). */
export interface EventSubscribers {
  publish(events: StoredEvent[]): void;
}

export class Committer {
  private readonly notifier: Notifier;
  /** The batching strategy: the event log, whose lanes' flushes come back here. */
  readonly eventLog: EventLog;

  constructor(
    private readonly db: Database,
    private readonly bus: ChangeBus,
    private readonly log: Logger,
    private readonly feeds: EventSubscribers,
    private readonly metrics: MetricsReporter,
    eventLog: EventLogOptions,
  ) {
    this.notifier = new Notifier(
      () => db.sql,
      (err) => log.debug({ err: String(err) }, "notification after commit failed (the polls cover it)"),
      () => metrics.notificationsSent(),
    );
    const flushes: FlushSender = {
      sendFlush: (plan, writeId, fanOut) => this.send(flushChange(plan, writeId), fanOut),
      flushCommitted: (writeId) => eventWriteCommitted(db.sql, writeId),
    };
    this.eventLog = new EventLog(flushes, eventLog, log);
  }

  /** Send a pipelined change (db/pipeline.ts), then apply its effects. */
  commit<S extends Statements, T>(change: StateChange<S, T>): Promise<T> {
    return this.send(change);
  }

  /** `commit`, its effects applied inside `around` (the event log traces its fan-out so). */
  private async send<S extends Statements, T>(
    change: StateChange<S, T>,
    around?: (events: StoredEvent[], apply: () => void) => void,
  ): Promise<T> {
    let statements: S | null = null;
    await pipelined<unknown[]>(this.db.sql, (q) => {
      statements = change.statements(q);
      return flatten(statements);
    });
    // Every statement has answered (pipelined waited for all of them): this only reads them.
    const answers = (await answersOf(statements as unknown as S)) as Answers<S>;
    const { value, effects } = change.outcome(answers);
    if (around) around(effects.events ?? [], () => this.apply(effects));
    else this.apply(effects);
    return value;
  }

  /** An interactive transaction whose statements depend on earlier answers, then its effects. */
  async transaction<T>(run: (tx: Tx) => Promise<{ value: T; effects: Effects }>): Promise<T> {
    const { value, effects } = await this.db.sql.begin(async (tx) => {
      const changed = await run(tx);
      const notify = changed.effects.notify;
      if (notify?.when === "inTransaction") await notifyInTransaction(tx, notify);
      return changed;
    });
    this.apply(effects);
    return value;
  }

  /**
   * The effects of a committed change. Committed is committed: a failure here is logged, never
   * thrown at the change's caller (subscribers' polls read the events; the heartbeat adopts
   * claimed tasks that never started).
   */
  private apply(effects: Effects): void {
    requestContext.exit(() => {
      try {
        this.applyNow(effects);
      } catch (err) {
        this.log.error({ err: String(err) }, "after a state change committed");
      }
    });
  }

  private applyNow(effects: Effects): void {
    if (effects.notify?.when === "afterCommit") this.notifier.add(effects.notify);
    const events = effects.events ?? [];
    if (events.length > 0) {
      this.feeds.publish(events);
      // Every event this instance commits passes here, terminal ones (mooring_tasks_total) included.
      this.metrics.eventsCommitted(events);
      for (const sessionId of new Set(events.map((e) => e.sessionId)))
        this.bus.emit("session", sessionId, null);
    }
    if (effects.claimed && effects.claimed.length > 0) this.bus.emit("claimed", effects.claimed);
    for (const taskId of effects.cancel ?? []) this.bus.emit("cancel", taskId);
    for (const sessionId of effects.sessionsChanged ?? []) this.bus.emit("session", sessionId, null);
    for (const sessionId of effects.archived ?? []) this.bus.emit("archived", sessionId);
    for (const sessionId of effects.purged ?? []) this.bus.emit("purged", sessionId);
    if (effects.gateChanged) this.bus.emit("gate");
    if (effects.queueMoved) this.bus.emit("queueMoved");
    for (const requestId of effects.permissionsResolved ?? []) this.bus.emit("permission", requestId);
    for (const taskId of effects.inputAdded ?? []) this.bus.emit("input", taskId);
  }
}

function isStatement(s: Statement): s is Promise<unknown> {
  return typeof (s as { then?: unknown }).then === "function";
}

/** The statements of a change in the order they were built (a record keeps its keys' order). */
function flatten(s: Statement): Promise<unknown>[] {
  if (isStatement(s)) return [s];
  return (Array.isArray(s) ? s : Object.values(s)).flatMap(flatten);
}

/** The answers of statements that have all answered, in their shape. */
async function answersOf(s: Statement): Promise<unknown> {
  if (isStatement(s)) return s;
  if (Array.isArray(s)) return Promise.all(s.map(answersOf));
  const entries = Object.entries(s);
  const values = await Promise.all(entries.map(([, statement]) => answersOf(statement)));
  return Object.fromEntries(entries.map(([name], i) => [name, values[i]]));
}

/** The last seq per session of `events` (for a notification). */
export function headsOf(events: StoredEvent[]): Map<string, number> {
  const heads = new Map<string, number>();
  for (const e of events) heads.set(e.sessionId, e.seq);
  return heads;
}

/**
 * A flush of the event log (stream/event-lane.ts) as a state change: the plan's statements in
 * order and the flush's record in `event_writes` (a retry asks it whether a lost answer had
 * committed). Its answers are the plan's, in order; its effects, the events it committed and,
 * after the commit, the notification of its sessions' new heads (the seqs its appends and
 * settlements answered) and of the gate when a turn settled (a slot is free).
 */
export function flushChange(plan: FlushPlan, writeId: string) {
  return {
    statements: (q: Tx) => ({
      steps: plan.statements.map((statement) => statement(q)),
      record: eventWriteRecord(q, writeId),
    }),
    outcome: ({ steps }: { steps: unknown[] }) => {
      const { events, settled: turnsSettled } = committedOf(plan, steps);
      const settled = turnsSettled > 0;
      const effects: Effects<"afterCommit"> = { events };
      if (events.length > 0) effects.notify = { when: "afterCommit", heads: headsOf(events), gate: settled };
      return { value: steps, effects };
    },
  };
}
