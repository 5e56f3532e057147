/**
 * Following a task by polling the REST API: the third transport beside the WebSocket and SSE
 * streams (stream.ts), with their shape: `follow` takes events through its host's `accept` until
 * the terminal event and ends any other way by throwing (a failed request, or `StreamAgain` once
 * streaming is worth another try); the host's state machine decides what comes next. It is the
 * transport a follower falls back to when streaming is refused or keeps failing, and `catchUp` is
 * how a finished task's tail is read. Events come as JSON pages after the cursor; the task is
 * long-polled until it changes state.
 */
import { type Clock, sleep } from "./clock.js";
import type { RunBuffer } from "./buffer.js";
import { type EventPage, isTerminalStatus, type MooringEvent, type Task } from "./types.js";

/** The follower's settings that polling reads. */
export interface PollSettings {
  clock: Clock;
  /** How long one long-poll of the task is held. */
  longPollMs: number;
  /** The shortest time between two polling rounds; doubles after each round that brought nothing. */
  minPollMs: number;
  /** The cap of that doubling. */
  backoffMaxMs: number;
}

/** What polling needs of the follower it works for (follow.ts). */
export interface PollHost {
  readonly settings: PollSettings;
  readonly sessionId: string;
  readonly taskId: string;
  readonly cursor: number;
  task: Task | null;
  readonly reachedTerminal: boolean;
  readonly signal: AbortSignal;
  readonly stopReason: unknown;
  readonly buffer: RunBuffer;
  accept(e: MooringEvent): "ok" | "gap" | "full";
  markTerminal(endedBy: string): void;
  /** Now polling: the state changes (once). */
  polling(reason: string): void;
  /** A polling round went through: the failure count starts over. */
  polled(): void;
  getTask(waitMs: number, timeoutMs?: number): Promise<Task>;
  get<T>(path: string, query: Record<string, string | number>): Promise<T>;
}

/** Polling ended to give streaming another try: not a failure. */
export class StreamAgain extends Error {
  constructor() {
    super("time to try streaming again");
  }
}

export class Poller {
  /** Polling rounds in a row that brought no event and no change of the task (the poll backoff). */
  private emptyPolls = 0;

  constructor(private readonly host: PollHost) {}

  /**
   * Follows by polling rounds until the terminal event; after the first round that ends at or past
   * `streamAgainAt` (a time on the settings' clock), throws `StreamAgain` instead, also when that
   * round reached the terminal event.
   */
  async follow(streamAgainAt: number): Promise<void> {
    const host = this.host;
    host.polling("long-polling the task");
    for (;;) {
      if (host.signal.aborted) throw host.stopReason;
      await this.pollOnce();
      host.polled();
      if (host.settings.clock.now() >= streamAgainAt) throw new StreamAgain();
      if (host.reachedTerminal) return;
    }
  }

  /** Reads the events after the cursor as JSON pages until the head (or the terminal event). */
  async catchUp(): Promise<void> {
    const host = this.host;
    for (;;) {
      const page = await host.get<EventPage>(`/v1/sessions/${host.sessionId}/events`, {
        afterSeq: host.cursor,
        limit: 500,
      });
      let more = page.nextAfterSeq !== null;
      for (const e of page.items) {
        const taken = host.accept(e);
        if (host.reachedTerminal) return;
        if (taken === "full") {
          await host.buffer.drained();
          more = true;
          break;
        }
        if (taken === "gap") {
          more = true;
          break;
        }
      }
      if (!more) break;
    }
    // At the head of a finished task without its terminal event: it lies at or before the cursor.
    const task = host.task;
    if (
      task &&
      task.id === host.taskId &&
      isTerminalStatus(task.status) &&
      (task.lastSeq ?? 0) <= host.cursor
    ) {
      host.markTerminal(`task.${task.status}`);
    }
  }

  /**
   * One polling round: read new events when the task has any, then hold a long-poll until the task
   * changes state. A long-poll that comes back early with nothing new waits `pollAfterMs`.
   */
  async pollOnce(): Promise<void> {
    const host = this.host;
    const settings = host.settings;
    const task = host.task!;
    const cursorBefore = host.cursor;
    if ((task.lastSeq ?? Number.POSITIVE_INFINITY) > host.cursor || isTerminalStatus(task.status)) {
      await this.catchUp();
      if (host.reachedTerminal) return;
    }
    const waitMs = settings.longPollMs;
    const asked = settings.clock.now();
    const next = await host.getTask(waitMs);
    host.task = next;
    const unchanged = next.status === task.status && (next.lastSeq ?? 0) <= host.cursor;
    const took = settings.clock.now() - asked;
    let pause = unchanged && took < waitMs / 2 ? (next.pollAfterMs ?? 1000) : 0;
    // A gateway that answers every long-poll at once (overloaded, or hostile) is polled no more
    // often than minPollMs, doubling while its early answers bring no event and no new status.
    const progressed = host.cursor !== cursorBefore || next.status !== task.status;
    this.emptyPolls = !progressed && took < waitMs / 2 ? this.emptyPolls + 1 : 0;
    const floor = Math.min(settings.minPollMs * 2 ** Math.min(this.emptyPolls, 20), settings.backoffMaxMs);
    pause = Math.max(pause, floor - took);
    if (pause > 0) await sleep(settings.clock, pause, host.signal);
  }
}
