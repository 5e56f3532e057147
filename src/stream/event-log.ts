/**
 * The event log writer. Events are batched: a flush every `flushMs` or every `flushMax` events,
 * whichever comes first, in one transaction; its sessions' new heads are notified after the commit,
 * coalesced with the instance's other notifications (sql/notify.ts, Notifier). Consecutive text
 * deltas of a turn are coalesced within a flush. Clients only ever see committed events:
 * subscribers are fed after the commit.
 *
 * A running turn's session writes (its agent's resume cursor, its context usage) and its
 * settlement ride along in the same flush, fenced like its events: a transaction of their own per
 * turn and write cost a commit each (bench/results/history.md); in the flush they share one commit
 * with every other turn's events.
 *
 * The log has `lanes` independent writers (stream/event-lane.ts), each flushing one transaction at
 * a time for the sessions that hash to it. A session always goes through the same lane, so its
 * events, writes and settlements commit in order; lanes touch disjoint session rows, so their
 * transactions never wait on each other. One writer for everything was a serial chain that one
 * Postgres backend could not keep up with under load: turns waited seconds for their events to
 * commit (bench/results/history.md).
 */
import type { Logger } from "pino";
import type { Service } from "../lib/service.js";
import { EventLane, type FlushSender } from "./event-lane.js";
import type { Span } from "../tracing/tracer.js";
import type {
  EventLogOptions,
  PendingEvent,
  SessionWrite,
  SettleOutcome,
  SettleRequest,
} from "./event-types.js";

export type {
  EventLogOptions,
  PendingEvent,
  SessionWrite,
  SettleOutcome,
  SettleRequest,
} from "./event-types.js";

/** Events a lane may hold pending before `drained` makes a producer wait. */
const BACKLOG = 512;

export class EventLog implements Service {
  readonly name = "event log";
  private readonly lanes: EventLane[];
  /** Running turns traced on this instance, by task id: their flushes and fan-outs get spans. */
  private readonly traced = new Map<string, Span>();
  /** Set at shutdown: flushes give up after a few attempts instead of retrying forever. */
  private closed = false;

  /** Built by the committer (domain/committer.ts), whose batching strategy this is: `sender`. */
  constructor(sender: FlushSender, options: EventLogOptions, log: Logger) {
    this.lanes = Array.from(
      { length: Math.max(1, options.lanes) },
      () => new EventLane(sender, options, log, () => this.closed, this.traced),
    );
  }

  /** Spans for the flushes and fan-outs of this running turn's events, under `span` (tracing on only). */
  traceTurn(taskId: string, span: Span): void {
    this.traced.set(taskId, span);
  }

  /** The turn ended: no more spans under it. */
  untraceTurn(taskId: string): void {
    this.traced.delete(taskId);
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
   * Settle a running task with its terminal event, in the next flush of its session's lane (at
   * once), after every event appended before. Retries while the database is away.
   */
  settle(request: SettleRequest): Promise<SettleOutcome> {
    return this.laneOf(request.sessionId).settle(request);
  }

  /**
   * Backpressure for a producer of this session's events: resolves once at most BACKLOG events
   * wait on its lane (two flushes' worth), at once when that is already so.
   */
  drained(sessionId: string): Promise<void> {
    return this.laneOf(sessionId).drained(BACKLOG);
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
   *
   * Not a step of the gateway's service list but the worker's (Worker.stop): it belongs in the
   * middle of the worker's stop, once the grace is over and before the turns left are stopped, so
   * that turns settling within the grace still wait out a database that is away while the
   * interrupted ones give up. The list could only place it between whole stops, i.e. before the
   * worker's (settlements inside the grace would give up) or after it (the interrupted turns'
   * settlements would hold the shutdown for as long as the database is gone). `stop` sets the same
   * flag for the event log's own final flush.
   */
  stopRetrying(): void {
    this.closed = true;
  }

  /** Flushes retry for as long as the database is away (it takes appends from its construction on). */
  start(): void {
    this.closed = false;
  }

  /** Stop accepting the wait-forever retry: a final flush gives up after a few attempts. */
  async stop(): Promise<void> {
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
