/**
 * The event log writer. Events are batched: a flush every `flushMs` or every `flushMax` events,
 * whichever comes first, in one transaction with one NOTIFY (NOTIFY takes a global lock at commit,
 * so one per flush, not per event). Consecutive text deltas of a turn are coalesced within a flush.
 * Clients only ever see committed events: subscribers are fed after the commit.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Database } from "../db/client.js";
import { pipelined } from "../db/pipeline.js";
import { appendEvents, type NewEvent, type OwnerFence, type StoredEvent } from "../sql/append-events.js";
import { eventWriteCommitted, recordEventWrite } from "../sql/event-writes.js";
import { notifySessionHeads } from "../sql/notify.js";

export interface PendingEvent extends NewEvent {
  sessionId: string;
  /** Owner fence for events of a running task; absent for gateway-level events. */
  fence?: OwnerFence;
}

export type CommittedListener = (events: StoredEvent[]) => void;

export class EventLog {
  private pending: PendingEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private readonly listeners: CommittedListener[] = [];
  private closed = false;

  constructor(
    private readonly db: Database,
    private readonly options: { flushMs: number; flushMax: number },
    private readonly log: Logger,
  ) {}

  /** Called with every batch of committed events, in seq order per session. */
  onCommitted(listener: CommittedListener): void {
    this.listeners.push(listener);
  }

  /** Publish events some other transaction committed (state changes written with their task). */
  publish(events: StoredEvent[]): void {
    if (events.length === 0) return;
    for (const listener of this.listeners) listener(events);
  }

  append(event: PendingEvent): void {
    this.pending.push(event);
    if (this.pending.length >= this.options.flushMax) {
      void this.flush();
    } else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.options.flushMs);
    }
  }

  /** Commit everything appended so far; resolves once it is durable (retrying while the database is away). */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    for (;;) {
      while (this.flushing) await this.flushing;
      if (this.pending.length === 0) return;
      const batch = takeBatch(this.pending);
      this.flushing = this.write(batch).finally(() => {
        this.flushing = null;
      });
      await this.flushing;
    }
  }

  private async write(batch: PendingEvent[]): Promise<void> {
    // A fixed order of session rows across transactions keeps concurrent writers free of deadlocks.
    const groups = groupBySessionAndFence(batch).sort((a, b) => (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0));
    // Identifies this flush across retries: a retry first asks whether an earlier attempt whose
    // answer was lost committed after all (sql/event-writes.ts), so no event is appended twice.
    const writeId = randomUUID();
    let uncertain = false;
    for (let attempt = 0; ; attempt++) {
      try {
        if (uncertain && (await eventWriteCommitted(this.db.sql, writeId))) {
          this.log.warn({ writeId, events: batch.length }, "event log flush had committed; its answer was lost");
          // Subscribers still get these events: the commit carried its notification, and the
          // polling backstop reads them from the log.
          return;
        }
        const committed: StoredEvent[] = [];
        // One pipelined transaction (db/pipeline.ts): every group's statement goes out with BEGIN
        // and COMMIT in one write, so the session rows are held only while Postgres runs it, not
        // across round trips to a busy event loop (bench/results/history.md); so does the one
        // notification of the flush, delivered at commit.
        const sessionIds = [...new Set(groups.map((g) => g.sessionId))];
        uncertain = true;
        const [appended] = await pipelined(this.db.sql, (q) => [
          Promise.all(groups.map((g) => appendEvents(q, g.sessionId, g.events, g.fence))),
          notifySessionHeads(q, sessionIds),
          recordEventWrite(q, writeId),
        ]);
        const heads = new Map<string, number>();
        for (const [i, group] of groups.entries()) {
          const stored = appended[i];
          if (stored.length === 0 && group.fence) {
            this.log.warn(
              { sessionId: group.sessionId, taskId: group.fence.taskId, attempt: group.fence.attempt, dropped: group.events.length },
              "lost guard: events of a task this instance no longer owns were dropped",
            );
          }
          committed.push(...stored);
          if (stored.length > 0) heads.set(group.sessionId, stored[stored.length - 1].seq);
        }
        this.publish(committed);
        return;
      } catch (err) {
        if (this.closed && attempt >= 3) {
          this.log.error({ err: String(err), lost: batch.length }, "event log could not be flushed at shutdown");
          return;
        }
        const delay = Math.min(50 * 2 ** attempt, 2000);
        this.log.warn({ err: String(err), retryInMs: delay, events: batch.length }, "event log flush failed; retrying");
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /**
   * Shutting down: stop the wait-forever retry, so a flush (also one already retrying) gives up
   * after a few attempts when the database is gone instead of holding the shutdown.
   */
  stopRetrying(): void {
    this.closed = true;
  }

  /** Stop accepting the wait-forever retry: a final flush gives up after a few attempts. */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
  }
}

/** Bounds on one transaction, so a burst of huge tool outputs never becomes one giant write. */
const MAX_EVENTS_PER_TX = 256;
const MAX_BYTES_PER_TX = 8 * 1024 * 1024;

/** Remove and return the oldest events that fit in one transaction (always at least one). */
function takeBatch(pending: PendingEvent[]): PendingEvent[] {
  let bytes = 0;
  let n = 0;
  while (n < pending.length && n < MAX_EVENTS_PER_TX) {
    bytes += approximateBytes(pending[n]);
    if (n > 0 && bytes > MAX_BYTES_PER_TX) break;
    n++;
  }
  return pending.splice(0, n);
}

/** Tool output dominates an event's size; strings are measured, anything else counted small. */
function approximateBytes(event: PendingEvent): number {
  const payload = event.payload as { output?: unknown; input?: unknown } | undefined;
  const big = payload?.output ?? payload?.input;
  return 256 + (typeof big === "string" ? big.length : 0);
}

interface Group {
  sessionId: string;
  fence?: OwnerFence;
  events: NewEvent[];
}

/**
 * Keep per-session order; merge runs of `message.delta` of the same task into one event, so a
 * chatty agent costs one row per flush instead of one per token.
 */
function groupBySessionAndFence(batch: PendingEvent[]): Group[] {
  const groups = new Map<string, Group>();
  for (const event of batch) {
    const key = `${event.sessionId}|${event.fence ? `${event.fence.taskId}:${event.fence.attempt}` : ""}`;
    let group = groups.get(key);
    if (!group) {
      group = { sessionId: event.sessionId, fence: event.fence, events: [] };
      groups.set(key, group);
    }
    const last = group.events[group.events.length - 1];
    if (
      last &&
      last.type === "message.delta" &&
      event.type === "message.delta" &&
      last.taskId === event.taskId
    ) {
      const merged = (last.data as { text: string }).text + (event.data as { text: string }).text;
      group.events[group.events.length - 1] = { ...last, data: { text: merged } };
    } else {
      group.events.push({ taskId: event.taskId, type: event.type, data: event.data, payload: event.payload });
    }
  }
  return [...groups.values()];
}
