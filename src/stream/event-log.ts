/**
 * The event log writer. Events are batched: a flush every `flushMs` or every `flushMax` events,
 * whichever comes first, in one transaction with one NOTIFY (NOTIFY takes a global lock at commit,
 * so one per flush, not per event). Consecutive text deltas of a turn are coalesced within a flush.
 * Clients only ever see committed events: subscribers are fed after the commit.
 *
 * A running turn's session writes (its agent's resume cursor, its context usage) ride along in the
 * same flush: fenced like its events, written right after them, resolved once committed. One
 * transaction per turn and write cost a commit each (bench/results/history.md); in the flush they
 * share one commit with every other turn's events.
 *
 * The log has `lanes` independent writers, each flushing one transaction at a time for the sessions
 * that hash to it. A session always goes through the same lane, so its events and writes commit in
 * order; lanes touch disjoint session rows, so their transactions never wait on each other. One
 * writer for everything was a serial chain that one busy Postgres backend could not keep up with
 * under load: turns waited seconds for their events to commit (bench/results/history.md).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Database, Tx } from "../db/client.js";
import { pipelined } from "../db/pipeline.js";
import { appendEvents, type NewEvent, type OwnerFence, type StoredEvent } from "../sql/append-events.js";
import { eventWriteCommitted, recordEventWrite } from "../sql/event-writes.js";
import { notifySessionHeads } from "../sql/notify.js";
import { type ContextUsage, type CursorFields, saveContextUsage, saveCursor } from "../sql/save-cursor.js";

export interface PendingEvent extends NewEvent {
  sessionId: string;
  /** Owner fence for events of a running task; absent for gateway-level events. */
  fence?: OwnerFence;
}

/** A running turn's write to its session row; only the owner of the task may make it. */
export interface SessionWrite {
  sessionId: string;
  fence: OwnerFence;
  cursor?: CursorFields;
  contextUsage?: ContextUsage;
}

interface PendingSessionWrite extends SessionWrite {
  /** True once committed; false when fenced out or given up at shutdown. */
  done: (written: boolean) => void;
}

export type CommittedListener = (events: StoredEvent[]) => void;

export interface EventLogOptions {
  /** A flush this many ms after the first pending event or write. */
  flushMs: number;
  /** A flush right away at this many pending events (per lane). */
  flushMax: number;
  /** Independent writers; each session always uses the same one. */
  lanes: number;
}

export class EventLog {
  private readonly lanes: EventLane[];
  private readonly listeners: CommittedListener[] = [];
  /** Set at shutdown: flushes give up after a few attempts instead of retrying forever. */
  closed = false;

  constructor(db: Database, options: EventLogOptions, log: Logger) {
    this.lanes = Array.from(
      { length: Math.max(1, options.lanes) },
      () => new EventLane(db, options, log, this),
    );
  }

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
    this.laneOf(event.sessionId).append(event);
  }

  /**
   * Write to a running turn's session row with the next flush. Resolves true once committed,
   * false when the writer no longer owns the task (nothing written) or the write was given up at
   * shutdown. While the database is away it waits, as events do.
   */
  writeSession(write: SessionWrite): Promise<boolean> {
    return this.laneOf(write.sessionId).writeSession(write);
  }

  /**
   * Commit what was appended so far (for one session, or all); resolves once it is durable,
   * retrying while the database is away.
   */
  async flush(sessionId?: string): Promise<void> {
    if (sessionId !== undefined) return this.laneOf(sessionId).flush();
    await Promise.all(this.lanes.map((lane) => lane.flush()));
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

  /** Session ids are random uuids: their last 8 hex digits spread sessions evenly. */
  private laneOf(sessionId: string): EventLane {
    if (this.lanes.length === 1) return this.lanes[0];
    const n = Number.parseInt(sessionId.slice(-8), 16);
    return this.lanes[(Number.isNaN(n) ? 0 : n) % this.lanes.length];
  }
}

/** One writer of the log: a flush at a time, for the sessions that hash to it. */
class EventLane {
  private pending: PendingEvent[] = [];
  private pendingWrites: PendingSessionWrite[] = [];
  /** Counts since start, for `flush` to know when what it waits for is in (written or given up). */
  private eventsAppended = 0;
  private eventsWritten = 0;
  private writesQueued = 0;
  private writesWritten = 0;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly db: Database,
    private readonly options: EventLogOptions,
    private readonly log: Logger,
    private readonly owner: EventLog,
  ) {}

  append(event: PendingEvent): void {
    this.pending.push(event);
    this.eventsAppended++;
    if (this.pending.length >= this.options.flushMax) {
      void this.flush();
    } else {
      this.schedule();
    }
  }

  writeSession(write: SessionWrite): Promise<boolean> {
    return new Promise((done) => {
      this.pendingWrites.push({ ...write, done });
      this.writesQueued++;
      this.schedule();
    });
  }

  private schedule(): void {
    if (!this.timer) this.timer = setTimeout(() => void this.flush(), this.options.flushMs);
  }

  /**
   * Commit everything appended so far; resolves once it is durable (retrying while the database is
   * away). It does not wait for what is appended after the call: under steady load the log is never
   * empty, and a settling turn must not wait for other turns' later events.
   */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const events = this.eventsAppended;
    const writes = this.writesQueued;
    for (;;) {
      while (this.flushing) await this.flushing;
      // Each kind is taken oldest first, so these counts say that everything before the call is in.
      if (this.eventsWritten >= events && this.writesWritten >= writes) return;
      const batch = takeBatch(this.pending);
      const sessionWrites = this.pendingWrites.splice(0);
      this.flushing = this.write(batch, sessionWrites).finally(() => {
        this.eventsWritten += batch.length;
        this.writesWritten += sessionWrites.length;
        this.flushing = null;
      });
      await this.flushing;
    }
  }

  private async write(batch: PendingEvent[], writes: PendingSessionWrite[]): Promise<void> {
    const written = await this.commit(batch, writes);
    for (const [i, write] of writes.entries()) write.done(written?.[i] ?? false);
  }

  /**
   * One flush in one transaction, retried while the database is away. Answers, per session write,
   * whether it was written (null: given up at shutdown).
   */
  private async commit(batch: PendingEvent[], writes: PendingSessionWrite[]): Promise<boolean[] | null> {
    // A fixed order of session rows across transactions keeps concurrent writers free of deadlocks:
    // every statement touching a session goes out in session id order, its events before its writes.
    const groups = groupBySessionAndFence(batch);
    const bySession = new Map<string, { groups: number[]; writes: number[] }>();
    const entry = (id: string) => {
      const known = bySession.get(id);
      if (known) return known;
      const created = { groups: [] as number[], writes: [] as number[] };
      bySession.set(id, created);
      return created;
    };
    for (const [i, g] of groups.entries()) entry(g.sessionId).groups.push(i);
    for (const [i, w] of writes.entries()) entry(w.sessionId).writes.push(i);
    const sessionIds = [...bySession.keys()].sort();
    const eventSessionIds = sessionIds.filter((id) => bySession.get(id)!.groups.length > 0);
    // Identifies this flush across retries: a retry first asks whether an earlier attempt whose
    // answer was lost committed after all (sql/event-writes.ts), so no event is appended twice.
    const writeId = randomUUID();
    let uncertain = false;
    for (let attempt = 0; ; attempt++) {
      try {
        if (uncertain && (await eventWriteCommitted(this.db.sql, writeId))) {
          this.log.warn(
            { writeId, events: batch.length },
            "event log flush had committed; its answer was lost",
          );
          // Subscribers still get these events: the commit carried its notification, and the
          // polling backstop reads them from the log. The session writes committed with them (a
          // fenced-out one wrote nothing; the turn learns that from its settlement).
          return writes.map(() => true);
        }
        const committed: StoredEvent[] = [];
        // One pipelined transaction (db/pipeline.ts): every group's statement goes out with BEGIN
        // and COMMIT in one write, so the session rows are held only while Postgres runs it, not
        // across round trips to a busy event loop (bench/results/history.md); so does the one
        // notification of the flush, delivered at commit.
        uncertain = true;
        const [appended, applied] = await pipelined(this.db.sql, (q) => {
          const appends: Promise<StoredEvent[]>[] = new Array(groups.length);
          const saves: Promise<boolean>[] = new Array(writes.length);
          for (const sessionId of sessionIds) {
            for (const i of bySession.get(sessionId)?.groups ?? []) {
              const g = groups[i];
              appends[i] = appendEvents(q, g.sessionId, g.events, g.fence);
            }
            for (const i of bySession.get(sessionId)?.writes ?? []) saves[i] = writeSession(q, writes[i]);
          }
          return [
            Promise.all(appends),
            Promise.all(saves),
            notifySessionHeads(q, eventSessionIds),
            recordEventWrite(q, writeId),
          ];
        });
        const heads = new Map<string, number>();
        for (const [i, group] of groups.entries()) {
          const stored = appended[i];
          if (stored.length === 0 && group.fence) {
            this.log.warn(
              {
                sessionId: group.sessionId,
                taskId: group.fence.taskId,
                attempt: group.fence.attempt,
                dropped: group.events.length,
              },
              "lost guard: events of a task this instance no longer owns were dropped",
            );
          }
          committed.push(...stored);
          if (stored.length > 0) heads.set(group.sessionId, stored[stored.length - 1].seq);
        }
        this.owner.publish(committed);
        return applied;
      } catch (err) {
        if (this.owner.closed && attempt >= 3) {
          this.log.error(
            { err: String(err), lost: batch.length, sessionWrites: writes.length },
            "event log could not be flushed at shutdown",
          );
          return null;
        }
        const delay = Math.min(50 * 2 ** attempt, 2000);
        this.log.warn(
          { err: String(err), retryInMs: delay, events: batch.length },
          "event log flush failed; retrying",
        );
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }
}

/** A session write's statements (each issued at once, as pipelined() needs); true if all applied. */
function writeSession(q: Tx, write: SessionWrite): Promise<boolean> {
  const cursor = write.cursor ? saveCursor(q, write.sessionId, write.cursor, write.fence) : true;
  const usage = write.contextUsage
    ? saveContextUsage(q, write.sessionId, write.contextUsage, write.fence)
    : true;
  return Promise.all([cursor, usage]).then(([a, b]) => a && b);
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
