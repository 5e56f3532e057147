/**
 * Following one task's events: the recovery state machine of the client (docs/client.md).
 *
 *   connecting → streaming → settling → done
 *   any close, error, idle socket, clean end before the terminal event, 4008 → reconnecting
 *     (full-jitter backoff; 4008 at once, since it only means "read faster")
 *   streaming failing again and again while REST answers → polling (long-poll the task, read the
 *     events as JSON pages), and back to streaming after `streamRetryMs`
 *   a new boot id → a `restart` notice (the gateway restarted; its log lost nothing)
 *   RESYNC_REQUIRED → one `resync` item with the task as it is now, then on from the oldest kept seq
 *
 * The cursor is the session's seq: every event after it is taken exactly once, in order, and only
 * a run contiguous with the cursor is taken (a gap reconnects from the cursor). Only this task's
 * events are handed on. A slow consumer never makes the gateway close the socket (4008): past the
 * buffer bound the follower stops reading (unsubscribes, or ends the stream) and resumes from its
 * cursor once the consumer caught up, so memory stays bounded.
 *
 * The transports, one shape (run until the terminal event, else throw): streaming (WebSocket, SSE)
 * in stream.ts, polling (REST) in poll.ts; the buffer in buffer.ts.
 *
 * R4: a follower never reports a task failed or lost while it could still be running: only after
 * its deadline plus the lease and sweep periods, with the gateway still unreachable, does it give
 * up with TaskLostError; `giveUpAfterMs` rejects with StillRunningError (the task runs on).
 */
import { backoffMs, type Clock, sleep } from "./clock.js";
import {
  AbortError,
  ConnectionError,
  MooringApiError,
  ResyncRequiredError,
  StillRunningError,
  TaskLostError,
} from "./errors.js";
import { RunBuffer } from "./buffer.js";
import type { FetchLike, Http } from "./http.js";
import type { WebSocketFactory } from "./socket.js";
import { type PollHost, Poller, StreamAgain } from "./poll.js";
import {
  Disconnect,
  type LocalEventSource,
  type StreamHost,
  streamLocal,
  streamSse,
  streamWs,
} from "./stream.js";
import {
  isTerminalEvent,
  isTerminalStatus,
  type MooringEvent,
  type Page,
  type RunItem,
  type Task,
} from "./types.js";

export type FollowState = "connecting" | "streaming" | "reconnecting" | "polling" | "settling" | "done";
export type Transport = "ws" | "sse" | "poll";

export interface StateChange {
  /** The new state, or `restart`: a notice that the gateway restarted (the state does not change). */
  state: FollowState | "restart";
  reason: string;
  at: number;
}

/** Settings of the client that every follower shares. */
export interface FollowSettings {
  url: string;
  token?: string;
  http: Http;
  fetch: FetchLike;
  clock: Clock;
  transport: Transport;
  pingMs: number;
  leaseMs: number;
  sweepMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  pollAfterFailures: number;
  streamRetryMs: number;
  longPollMs: number;
  /** The shortest time between two polling rounds; doubles after each round that brought nothing, up to backoffMaxMs. */
  minPollMs: number;
  webSocket?: WebSocketFactory;
  /** Streams through the gateway's own feeds instead of a socket (stream.ts, LocalEventSource). */
  local?: LocalEventSource;
  maxBufferedEvents: number;
  maxBufferedBytes: number;
}

export interface FollowOptions {
  /** The last seq already seen (e.g. saved before the app restarted); default: the task's start. */
  afterSeq?: number;
  transport?: Transport;
  /** With MOORING_RECOVERY=continue: go on into the task that continues an interrupted one. */
  followContinuation?: boolean;
  /** Stop waiting after this long: done() rejects with StillRunningError carrying the task. */
  giveUpAfterMs?: number;
  /** Closes every socket and request of this follower; the task itself is not cancelled. */
  signal?: AbortSignal;
}

/** The longest a turn may run (the `complex` load class, the cap of `timeoutMs`). */
const MAX_TURN_MS = 60 * 60_000;

const isUnreachable = (err: unknown) =>
  err instanceof ConnectionError ||
  (err instanceof Disconnect && !err.pause) ||
  (err instanceof MooringApiError && (err.status === 503 || err.status === undefined));

/** Errors that retrying cannot fix (wrong id, no access, bad request). */
const isFatal = (err: unknown) =>
  err instanceof MooringApiError &&
  err.status !== undefined &&
  err.status >= 400 &&
  err.status < 500 &&
  err.status !== 408 &&
  err.status !== 429 &&
  !(err instanceof ResyncRequiredError);

type Listener<T> = (value: T) => void;

export class Follower implements StreamHost, PollHost {
  state: FollowState = "connecting";
  /** The session seq of the last event taken. */
  cursor = 0;
  taskId: string;
  task: Task | null;
  readonly finished: Promise<Task>;
  /** Every state change so far: a listener added late still hears them all, in order. */
  readonly stateHistory: StateChange[] = [];
  readonly stateListeners: Listener<StateChange>[] = [];
  readonly eventListeners: Listener<MooringEvent>[] = [];
  // What the transports use (StreamHost).
  readonly settings: FollowSettings;
  sessionId = "";
  /** What the consumer has not taken yet, bounded (buffer.ts). */
  readonly buffer: RunBuffer;
  stopReason: unknown = null;

  private bootId: string | null = null;
  private terminal = false;
  private endedBy = "";
  private terminalEvent: MooringEvent | null = null;
  private failures = 0;
  private outcome: { task?: Task; error?: unknown } | null = null;
  private readonly stop = new AbortController();
  private readonly closers = new Set<() => void>();
  private readonly timers: unknown[] = [];
  private readonly options: FollowOptions;
  private readonly poller = new Poller(this);
  /** Removes the listener on the caller's signal. */
  private unlisten: () => void = () => {};

  constructor(
    settings: FollowSettings,
    taskId: string,
    options: FollowOptions = {},
    task: Task | null = null,
  ) {
    this.settings = settings;
    this.options = options;
    this.taskId = taskId;
    this.task = task;
    this.buffer = new RunBuffer(settings.maxBufferedEvents, settings.maxBufferedBytes);
    if (options.afterSeq !== undefined) this.cursor = options.afterSeq;
    const signal = options.signal;
    if (signal?.aborted) this.fail(new AbortError());
    else if (signal) {
      // The caller's signal may outlive this follower (one per ACP connection, many turns): the
      // listener goes when the follower ends, so listeners never pile up on it.
      const onAbort = () => this.fail(new AbortError());
      signal.addEventListener("abort", onAbort, { once: true });
      this.unlisten = () => signal.removeEventListener("abort", onAbort);
    }
    if (options.giveUpAfterMs !== undefined) {
      this.timers.push(
        settings.clock.setTimeout(() => this.fail(new StillRunningError(this.task)), options.giveUpAfterMs),
      );
    }
    this.finished = this.run().then(
      (t) => {
        this.outcome = { task: t };
        this.setState("done", `task ${t.status}`);
        this.cleanup();
        this.buffer.end();
        return t;
      },
      (err) => {
        this.outcome = { error: this.stopReason ?? err };
        this.cleanup();
        this.buffer.end(this.outcome.error);
        throw this.outcome.error;
      },
    );
    this.finished.catch(() => {});
  }

  // ---- the consumer's side ----------------------------------------------------------------

  items(): AsyncGenerator<RunItem> {
    return this.buffer.items();
  }

  /** The terminal Task. Without an iterator, events are no longer kept for one (handlers still hear them). */
  done(): Promise<Task> {
    this.buffer.discard();
    return this.finished;
  }

  /** Stops following (abort): sockets closed at once, done() rejects with `reason`. */
  fail(reason: unknown): void {
    if (this.stop.signal.aborted || this.outcome) return;
    this.stopReason = reason;
    this.stop.abort();
    for (const close of [...this.closers]) close();
    this.closers.clear();
    this.buffer.releaseDrainWaiters();
  }

  // ---- the state machine ------------------------------------------------------------------

  private async run(): Promise<Task> {
    this.setState("connecting", "following the task");
    if (!this.task) this.task = await this.retrying(() => this.getTask(0));
    this.sessionId = this.task.sessionId;
    if (this.options.afterSeq === undefined) this.cursor = Math.max(0, (this.task.firstSeq ?? 1) - 1);
    const preferred = this.options.transport ?? this.settings.transport;
    let mode: Transport = preferred;
    let pollingSince = 0;
    for (;;) {
      this.checkStopped();
      if (this.terminal) {
        const next = await this.continuation();
        if (!next) break;
        this.taskId = next.id;
        this.task = next;
        this.terminal = false;
        continue;
      }
      try {
        if (mode === "poll") {
          await this.poller.follow(
            preferred === "poll" ? Number.POSITIVE_INFINITY : pollingSince + this.settings.streamRetryMs,
          );
        } else if (isTerminalStatus(this.task.status)) {
          await this.poller.catchUp(); // a finished task's tail needs no stream
        } else if (mode === "ws" && this.settings.local) {
          await streamLocal(this, this.settings.local);
        } else if (mode === "ws") {
          await streamWs(this);
        } else {
          await streamSse(this);
        }
      } catch (err) {
        this.checkStopped();
        if (err instanceof StreamAgain) {
          mode = preferred;
          continue;
        }
        if (err instanceof ResyncRequiredError) {
          await this.resync(err.oldestSeq);
          continue;
        }
        if (err instanceof Disconnect && err.pause) continue;
        if (isFatal(err)) throw err;
        this.failures++;
        const reason = err instanceof Error ? err.message : String(err);
        if (mode !== "poll") {
          const refused = err instanceof Disconnect && err.refused;
          if ((refused || this.failures >= this.settings.pollAfterFailures) && (await this.restAnswers())) {
            mode = "poll";
            pollingSince = this.settings.clock.now();
            this.failures = 0;
            this.setState(
              "polling",
              `streaming is refused or keeps failing (${reason}); the REST API answers`,
            );
            continue;
          }
          this.setState("reconnecting", reason);
        }
        const immediate = err instanceof Disconnect && err.immediate;
        await this.beforeRetry(err, immediate ? 0 : this.backoff());
      }
    }
    return this.settle();
  }

  private backoff(): number {
    return backoffMs(this.failures, this.settings.backoffBaseMs, this.settings.backoffMaxMs);
  }

  /** The R4 rule, then the wait. */
  private async beforeRetry(err: unknown, waitMs: number): Promise<void> {
    if (this.task && isUnreachable(err) && this.settings.clock.now() >= this.lostAt(this.task)) {
      throw new TaskLostError(this.task);
    }
    await sleep(this.settings.clock, waitMs, this.stop.signal);
  }

  /**
   * The latest moment the gateway could still settle the task: its run deadline (a queued task may
   * start as late as its queue deadline and then run the longest a turn may), plus one lease (its
   * owner may die just before) and one sweep period (the sweep that notices).
   */
  lostAt(task: Task): number {
    const deadline = task.deadlineAt
      ? Date.parse(task.deadlineAt)
      : Date.parse(task.queueDeadlineAt) + MAX_TURN_MS;
    return deadline + this.settings.leaseMs + this.settings.sweepMs;
  }

  private checkStopped(): void {
    if (this.stop.signal.aborted) throw this.stopReason;
  }

  /** Retries a request while the gateway is unreachable or not ready (no task known yet, or settling). */
  private async retrying<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      this.checkStopped();
      try {
        return await fn();
      } catch (err) {
        this.checkStopped();
        if (isFatal(err)) throw err;
        await sleep(
          this.settings.clock,
          backoffMs(attempt, this.settings.backoffBaseMs, this.settings.backoffMaxMs),
          this.stop.signal,
        );
      }
    }
  }

  /**
   * The terminal Task: the last snapshot when it is terminal already; else one quick read; else
   * (the gateway went away right after) the last snapshot with the terminal event's status,
   * result and error, so done() never waits on a gateway that has nothing more to say.
   */
  private async settle(): Promise<Task> {
    this.setState("settling", `${this.endedBy || "terminal snapshot"} received`);
    const known = this.task;
    if (known && known.id === this.taskId && isTerminalStatus(known.status)) return known;
    try {
      const task = await this.getTask(0, 3000);
      if (isTerminalStatus(task.status)) return task;
    } catch {
      this.checkStopped();
    }
    const end = this.terminalEvent;
    if (!known || !end) return this.retrying(() => this.getTask(0));
    const data = (end.data ?? {}) as Partial<Task>;
    return {
      ...known,
      status: end.type.slice("task.".length) as Task["status"],
      position: null,
      finishedAt: end.at,
      result: data.result ?? null,
      error: data.error ?? null,
      lastSeq: end.seq,
      pollAfterMs: null,
    };
  }

  /** After `task.interrupted`, with followContinuation: the task that continues it, if any. */
  private async continuation(): Promise<Task | null> {
    if (!this.options.followContinuation || this.endedBy !== "task.interrupted") return null;
    const page = await this.retrying(() =>
      this.get<Page<Task>>("/v1/tasks", { sessionId: this.sessionId, limit: 20 }),
    );
    const next = page.items.find((t) => t.continuesTaskId === this.taskId) ?? null;
    if (next) this.setState(this.state, `following the continuation ${next.id}`);
    return next;
  }

  private async restAnswers(): Promise<boolean> {
    try {
      this.task = await this.getTask(0);
      return true;
    } catch (err) {
      return isFatal(err);
    }
  }

  private async resync(oldestSeq: number): Promise<void> {
    const task = await this.retrying(() => this.getTask(0));
    this.task = task;
    this.cursor = Math.max(this.cursor, oldestSeq - 1);
    this.buffer.push({ type: "resync", task, fromSeq: oldestSeq }, 512);
    // Its terminal event is gone too: the snapshot is all there is.
    if (isTerminalStatus(task.status) && (task.lastSeq ?? 0) < oldestSeq)
      this.markTerminal(`task.${task.status}`);
  }

  /** The task, long-polled for `waitMs` when given (PollHost). */
  getTask(waitMs: number, timeoutMs?: number): Promise<Task> {
    return this.get<Task>(`/v1/tasks/${this.taskId}`, waitMs > 0 ? { waitMs } : {}, waitMs, timeoutMs);
  }

  /** One GET; it gives up after the wait asked for plus 10 s (a request through a dead path). */
  async get<T>(
    path: string,
    query: Record<string, string | number>,
    waitMs = 0,
    timeoutMs?: number,
  ): Promise<T> {
    const answer = await this.settings.http.once<T>("GET", path, {
      query,
      signal: this.stop.signal,
      timeoutMs: timeoutMs ?? waitMs + 10_000,
    });
    const bootId = answer.headers.get("x-mooring-boot-id");
    if (bootId) this.noteBoot(bootId);
    return answer.body;
  }

  // ---- taking events ----------------------------------------------------------------------

  /** Takes `e` when it is the next seq: `gap` when it is not, `full` when the buffer is at its bound. */
  accept(e: MooringEvent): "ok" | "gap" | "full" {
    if (e.sessionId !== this.sessionId || e.seq <= this.cursor) return "ok";
    if (e.seq !== this.cursor + 1) return "gap";
    if (this.buffer.isFull) return "full";
    this.cursor = e.seq;
    if (e.taskId === this.taskId && !this.terminal) {
      for (const listener of this.eventListeners) listener(e);
      this.buffer.push(e, estimateBytes(e));
      if (isTerminalEvent(e.type)) {
        this.terminal = true;
        this.endedBy = e.type;
        this.terminalEvent = e;
      }
    }
    return this.buffer.isFull ? "full" : "ok";
  }

  get reachedTerminal(): boolean {
    return this.terminal;
  }

  /** The task ended with no terminal event left to take (it lies at or before the cursor, or was pruned). */
  markTerminal(endedBy: string): void {
    this.terminal = true;
    this.endedBy = endedBy;
  }

  get signal(): AbortSignal {
    return this.stop.signal;
  }

  streaming(reason: string): void {
    this.setState("streaming", reason);
    this.failures = 0;
  }

  polling(reason: string): void {
    if (this.state !== "polling") this.setState("polling", reason);
  }

  polled(): void {
    this.failures = 0;
  }

  track(close: () => void): () => void {
    this.closers.add(close);
    return () => this.closers.delete(close);
  }

  noteBoot(bootId: string): void {
    if (this.bootId && this.bootId !== bootId) {
      this.emitState({
        state: "restart",
        reason: `the gateway restarted (boot ${bootId}); its log lost nothing`,
        at: this.settings.clock.now(),
      });
    }
    this.bootId = bootId;
  }

  private setState(state: FollowState, reason: string): void {
    if (state === this.state && state !== "connecting" && !reason.startsWith("following the continuation"))
      return;
    this.state = state;
    this.emitState({ state, reason, at: this.settings.clock.now() });
  }

  private emitState(change: StateChange): void {
    this.stateHistory.push(change);
    if (this.stateHistory.length > 100) this.stateHistory.splice(0, 50);
    for (const listener of this.stateListeners) listener(change);
  }

  private cleanup(): void {
    this.unlisten();
    for (const timer of this.timers) this.settings.clock.clearTimeout(timer);
    for (const close of [...this.closers]) close();
    this.closers.clear();
  }
}

/** Bytes an event holds in the buffer, roughly (its JSON). */
function estimateBytes(e: MooringEvent): number {
  try {
    return (JSON.stringify(e.data)?.length ?? 0) + 160;
  } catch {
    return 1024;
  }
}
