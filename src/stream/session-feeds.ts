/**
 * Live event feeds for subscribers (WebSocket, SSE). A subscriber gives a cursor (the last seq it
 * has); the feed sends every later event exactly once and in order: first from Postgres (replay),
 * then as new events commit here or on any other instance. There is no seam to get wrong: replay
 * and live delivery are the same loop, "send what lies between the subscriber's cursor and the
 * session's head", and a subscriber's cursor only moves by one contiguous run at a time.
 */
import { sessionReadHeads } from "../sql/session-read.js";
import { SingleFlight } from "../lib/single-flight.js";
import type { Service } from "../lib/service.js";
import { TimedLoop } from "../lib/timed-loop.js";
import type { Logger } from "pino";
import type { Database } from "../db/client.js";
import type { StoredEvent } from "../sql/event-append.js";
import { eventReadAfter } from "../sql/event-read.js";
import type { ChangeBus } from "./change-bus.js";
import { type Clock, realClock } from "../clock.js";

export interface ClientEvent {
  sessionId: string;
  seq: number;
  taskId: string | null;
  type: string;
  at: string;
  data: unknown;
}

export function toClientEvent(e: StoredEvent): ClientEvent {
  return {
    sessionId: e.sessionId,
    seq: e.seq,
    taskId: e.taskId,
    type: e.type,
    at: e.at instanceof Date ? e.at.toISOString() : String(e.at),
    data: e.data,
  };
}

export interface Subscriber {
  /** Last seq delivered. */
  cursor: number;
  /** Deliver a contiguous run of events (cursor+1 ...). */
  deliver(events: ClientEvent[]): void;
  /**
   * While true the feed passes this subscriber over and its cursor stays put (its transport is
   * catching up with what it was already given); after clearing it, call `SessionFeeds.wake`.
   */
  paused?: boolean;
  /**
   * The session was purged (deleted with all its rows): nothing more will come. Called once, after
   * the subscriber was removed from the feed; the transport tells its client and ends the stream.
   */
  end?(reason: "purged"): void;
}

const CACHE_SIZE = 512;
const PAGE_SIZE = 500;

class Feed {
  readonly subscribers = new Set<Subscriber>();
  /** Highest seq known to be committed. */
  head = 0;
  /** Recent committed events, contiguous and ascending. */
  cache: ClientEvent[] = [];
  /** One read-and-deliver pass at a time; hints during one ask for one more. */
  private readonly pumps = new SingleFlight(
    () => this.run(),
    (err) =>
      this.log.warn(
        { err: String(err), sessionId: this.sessionId },
        "event feed read failed; the poll will retry",
      ),
  );

  constructor(
    readonly sessionId: string,
    private readonly db: Database,
    private readonly log: Logger,
  ) {}

  remember(events: ClientEvent[]): void {
    for (const event of events) {
      const last = this.cache[this.cache.length - 1];
      if (last && event.seq !== last.seq + 1) {
        if (event.seq <= last.seq) continue;
        this.cache = []; // a gap: restart the cache at this event
      }
      this.cache.push(event);
      if (event.seq > this.head) this.head = event.seq;
    }
    if (this.cache.length > CACHE_SIZE) this.cache = this.cache.slice(-CACHE_SIZE);
  }

  pump(): void {
    this.pumps.request();
  }

  private async run(): Promise<void> {
    for (;;) {
      // This pass reads everything up to the head: hints so far need no pass after it.
      this.pumps.coverQueued();
      let behind = Number.POSITIVE_INFINITY;
      for (const sub of this.subscribers) if (!sub.paused) behind = Math.min(behind, sub.cursor);
      if (behind === Number.POSITIVE_INFINITY || behind >= this.head) return;
      const events = await this.read(behind);
      if (events.length === 0) return;
      let progressed = false;
      for (const sub of this.subscribers) {
        if (sub.paused) continue;
        const start = events.findIndex((e) => e.seq === sub.cursor + 1);
        if (start < 0) continue;
        const run = events.slice(start);
        sub.cursor = run[run.length - 1].seq;
        progressed = true;
        sub.deliver(run);
      }
      // Events missing from the log (pruned) cannot be delivered; the subscriber must resync.
      if (!progressed) return;
    }
  }

  /** Events after `after`, from the cache when it covers them, else from Postgres. */
  private async read(after: number): Promise<ClientEvent[]> {
    const first = this.cache[0];
    if (first && first.seq <= after + 1 && this.cache[this.cache.length - 1].seq > after) {
      return this.cache.slice(after + 1 - first.seq);
    }
    const rows = await eventReadAfter(this.db.sql, this.sessionId, after, PAGE_SIZE);
    const events = rows.map(toClientEvent);
    if (events.length > 0 && events[events.length - 1].seq > this.head)
      this.head = events[events.length - 1].seq;
    if (events.length > 0 && events.length < PAGE_SIZE) this.remember(events);
    return events;
  }
}

export class SessionFeeds implements Service {
  readonly name = "session feeds";
  private readonly feeds = new Map<string, Feed>();
  /** The backstop: every feed re-reads its session (a missed notification is found). */
  private readonly pollLoop: TimedLoop;

  constructor(
    private readonly db: Database,
    bus: ChangeBus,
    private readonly log: Logger,
    pollMs: number,
    clock: Clock = realClock,
  ) {
    this.pollLoop = new TimedLoop(pollMs, () => this.poll(), undefined, clock);
    bus.on("session", (sessionId, head) => {
      const feed = this.feeds.get(sessionId);
      if (!feed) return;
      if (head !== null && head > feed.head) feed.head = head;
      feed.pump();
    });
    bus.on("allSessions", () => void this.poll());
    bus.on("purged", (sessionId) => this.end(sessionId));
  }

  /** The poll backstop; feeds pump on notifications from their construction on. */
  start(): void {
    this.pollLoop.start();
  }

  async stop(): Promise<void> {
    await this.pollLoop.stop();
  }

  /** Committed events of this instance go straight to the feeds, without a read. */
  publish(events: StoredEvent[]): void {
    const bySession = new Map<string, ClientEvent[]>();
    for (const e of events) {
      if (!this.feeds.has(e.sessionId)) continue;
      const list = bySession.get(e.sessionId) ?? [];
      list.push(toClientEvent(e));
      bySession.set(e.sessionId, list);
    }
    for (const [sessionId, list] of bySession) {
      const feed = this.feeds.get(sessionId)!;
      feed.remember(list);
      feed.pump();
    }
  }

  /** Start delivering events with seq > subscriber.cursor; `head` is the session's current last seq. */
  subscribe(sessionId: string, head: number, subscriber: Subscriber): () => void {
    let feed = this.feeds.get(sessionId);
    if (!feed) {
      feed = new Feed(sessionId, this.db, this.log);
      this.feeds.set(sessionId, feed);
    }
    if (head > feed.head) feed.head = head;
    feed.subscribers.add(subscriber);
    feed.pump();
    const owned = feed;
    return () => {
      owned.subscribers.delete(subscriber);
      if (owned.subscribers.size === 0 && this.feeds.get(sessionId) === owned) this.feeds.delete(sessionId);
    };
  }

  /** Deliver to a session's subscribers again (one of them was paused and is ready). */
  wake(sessionId: string): void {
    this.feeds.get(sessionId)?.pump();
  }

  /**
   * A purged session's feed ends: each subscriber is removed, then told (`end`). Its events are
   * gone from the log, so there is nothing left to deliver.
   */
  private end(sessionId: string): void {
    const feed = this.feeds.get(sessionId);
    if (!feed) return;
    this.feeds.delete(sessionId);
    const subscribers = [...feed.subscribers];
    feed.subscribers.clear();
    for (const sub of subscribers) {
      try {
        sub.end?.("purged");
      } catch (err) {
        this.log.warn({ err: String(err), sessionId }, "ending a purged session's subscriber failed");
      }
    }
  }

  /** Sessions with a live feed (each is read by the poll). */
  get feedCount(): number {
    return this.feeds.size;
  }

  get subscriberCount(): number {
    let n = 0;
    for (const feed of this.feeds.values()) n += feed.subscribers.size;
    return n;
  }

  /**
   * The backstop for lost notifications: read the heads of every subscribed session, so an event
   * reaches its subscribers within about one poll interval even if no notification arrived.
   */
  private async poll(): Promise<void> {
    if (this.feeds.size === 0) return;
    try {
      const ids = [...this.feeds.keys()];
      const rows = await sessionReadHeads(this.db.sql, ids);
      // A subscribed session always existed (the subscription read it): one gone now was purged,
      // here or on another instance (which tells nobody else), and its subscribers are ended.
      const found = new Set(rows.map((r) => r.id));
      for (const id of ids) if (!found.has(id)) this.end(id);
      for (const row of rows) {
        const feed = this.feeds.get(row.id);
        if (!feed) continue;
        if (row.lastSeq > feed.head) feed.head = row.lastSeq;
        feed.pump();
      }
    } catch (err) {
      this.log.debug({ err: String(err) }, "event feed poll failed");
    }
  }
}
