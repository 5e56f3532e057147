/**
 * What happens after a state change commits, in one place.
 *
 * A state change is a value: the statements it sends and the effects it declares. `Committer`
 * sends the statements (`pipelined`: one write, every decision raised in SQL, answers read by
 * name; `transaction`: an interactive transaction, for changes whose statements depend on earlier
 * answers) and, once the commit is in, applies the declared effects here and nowhere else:
 *
 * - `events`: committed events go to this instance's subscribers (stream/session-feeds.ts), the
 *   metrics and the change bus. The event log's flushes (stream/event-lane.ts) hand theirs here too.
 * - `notify`: session heads and the gate, notified right after the commit through the coalescing
 *   `Notifier` (sql/notify.ts) when the transaction did not notify itself (a NOTIFY inside a
 *   transaction holds a global lock until its commit is on disk: the hot paths send theirs after).
 * - `claimed`: tasks this instance claimed; the worker starts them.
 * - `cancel`: tasks whose owner should stop them; stopped at once when this instance runs them
 *   (other instances hear mooring_cancel, sent by the transaction).
 * - `sessionsChanged`: sessions whose tasks changed without a new event (a turn going
 *   `cancelling`): their subscribers and long-polls here re-read.
 * - `archived`: sessions archived; their warm agents here close (others hear mooring_archived).
 * - `gateChanged`: a slot may be free or work was queued: this instance tries to claim.
 * - `queueMoved`: queued tasks moved; positions get announced.
 * - `permissionsResolved`: permission requests answered; the turn waiting on one here resumes at
 *   once, the instance running it elsewhere hears mooring_permissions (its poll is the guarantee).
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
import type { StoredEvent } from "../sql/append-events.js";
import { Notifier, notifyPermission } from "../sql/notify.js";
import type { TaskRow } from "../sql/task-row.js";
import type { ChangeBus } from "../stream/change-bus.js";

/** What a committed state change set off (see the module comment for each). */
export interface Effects {
  events?: StoredEvent[];
  notify?: { heads: Map<string, number>; gate: boolean };
  claimed?: TaskRow[];
  cancel?: string[];
  sessionsChanged?: string[];
  archived?: string[];
  gateChanged?: boolean;
  queueMoved?: boolean;
  permissionsResolved?: string[];
}

/** Named statements of a pipelined change: each a single statement issued when built. */
export type Statements = Record<string, Promise<unknown>>;
export type Answers<S extends Statements> = { [K in keyof S]: Awaited<S[K]> };

/** A pipelined state change: its statements, in order, and what its answers mean. */
export interface StateChange<S extends Statements, T> {
  statements(q: Tx): S;
  outcome(answers: Answers<S>): { value: T; effects: Effects };
}

/** Where committed events go on this instance (the session feeds). */
export interface EventSubscribers {
  publish(events: StoredEvent[]): void;
}

export class Committer {
  private readonly notifier: Notifier;

  constructor(
    private readonly db: Database,
    private readonly bus: ChangeBus,
    private readonly log: Logger,
    private readonly feeds: EventSubscribers,
    private readonly metrics: MetricsReporter,
  ) {
    this.notifier = new Notifier(
      () => db.sql,
      (err) => log.debug({ err: String(err) }, "notification after commit failed (the polls cover it)"),
    );
  }

  /** Send a pipelined change (db/pipeline.ts), then apply its effects. */
  async pipelined<S extends Statements, T>(change: StateChange<S, T>): Promise<T> {
    let statements: S | null = null;
    await pipelined<unknown[]>(this.db.sql, (q) => {
      statements = change.statements(q);
      return Object.values(statements);
    });
    const sent = statements as unknown as S;
    // Every statement has answered (pipelined waited for all of them): this only reads them.
    const names = Object.keys(sent) as (keyof S)[];
    const values = await Promise.all(names.map((name) => sent[name]));
    const answers = Object.fromEntries(names.map((name, i) => [name, values[i]])) as Answers<S>;
    const { value, effects } = change.outcome(answers);
    this.apply(effects);
    return value;
  }

  /** An interactive transaction whose statements depend on earlier answers, then its effects. */
  async transaction<T>(run: (tx: Tx) => Promise<{ value: T; effects: Effects }>): Promise<T> {
    const { value, effects } = await this.db.sql.begin((tx) => run(tx));
    this.apply(effects);
    return value;
  }

  /**
   * The effects of a committed change. Committed is committed: a failure here is logged, never
   * thrown at the change's caller (subscribers' polls read the events; the heartbeat adopts
   * claimed tasks that never started).
   */
  apply(effects: Effects): void {
    requestContext.exit(() => {
      try {
        this.applyNow(effects);
      } catch (err) {
        this.log.error({ err: String(err) }, "after a state change committed");
      }
    });
  }

  private applyNow(effects: Effects): void {
    if (effects.notify && (effects.notify.heads.size > 0 || effects.notify.gate)) {
      this.notifier.sessions(effects.notify.heads, effects.notify.gate);
    }
    const events = effects.events ?? [];
    if (events.length > 0) {
      this.feeds.publish(events);
      // Every event this instance commits passes here, terminal ones (mooring_tasks_total) included.
      this.metrics.eventsCommitted(events);
      for (const sessionId of new Set(events.map((e) => e.sessionId))) this.bus.emit("session", sessionId, null);
    }
    if (effects.claimed && effects.claimed.length > 0) this.bus.emit("claimed", effects.claimed);
    for (const taskId of effects.cancel ?? []) this.bus.emit("cancel", taskId);
    for (const sessionId of effects.sessionsChanged ?? []) this.bus.emit("session", sessionId, null);
    for (const sessionId of effects.archived ?? []) this.bus.emit("archived", sessionId);
    if (effects.gateChanged) this.bus.emit("gate");
    if (effects.queueMoved) this.bus.emit("queueMoved");
    for (const requestId of effects.permissionsResolved ?? []) {
      this.bus.emit("permission", requestId);
      notifyPermission(this.db.sql, requestId).catch(() => {});
    }
  }
}

/** The last seq per session of `events` (for a notification). */
export function headsOf(events: StoredEvent[]): Map<string, number> {
  const heads = new Map<string, number>();
  for (const e of events) heads.set(e.sessionId, e.seq);
  return heads;
}
