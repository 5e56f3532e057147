/**
 * Steering a running turn (docs/api.md, Steering a running turn): a client adds text to the turn
 * a task runs, instead of queueing a new turn.
 *
 * Accepting (`Steering.steer`, on any instance): one transaction locks the session row, then the
 * task row (the flush's lock order), checks the task runs and still takes input, and appends a
 * `turn.input {text}` event. The event is the durable record: it is stored before any agent sees
 * it. Its commit notifies `mooring_sessions` like every event, and `mooring_input` with the task
 * id, which is how the instance running the turn hears of it.
 *
 * Delivering (`TurnInputFeed`, on the instance running the turn): on an `input` hint for its task
 * (its own instance's commits and other instances' notifications), it reads the session's events
 * after the last one it scanned, keeps the task's `turn.input` ones and hands each to the driver
 * once, in seq order. A turn nobody steers reads nothing: most turns are never steered, and a read
 * per turn was a round trip on every turn's path. Notifications are hints, so the instance's
 * `TurnInputs` also polls (MOORING_POLL_MS), in one statement for all its running turns, and reads
 * for those that have input; a hint that came before the turn's feed existed is kept for it.
 *
 * Closing: when the agent's turn ends, the turn settles with the seq it has read up to, and the
 * settlement is not written when a `turn.input` of the task came after it (sql/task-settle.ts):
 * that statement, under the session row lock a steer takes first, is the close of a turn nobody
 * steered. When the feed holds input the agent did not take, or the settlement found some, `close`
 * sets `tasks.input_closed_at` (from then on a steer answers TASK_NOT_RUNNING) and reads once more;
 * the turn runner sends what the agent did not take as a follow-up prompt in the same turn
 * (domain/turn-run.ts), then settles. So every accepted steer reaches the agent once, unless the
 * turn fails or its gateway dies first (then the event stays in the log, the turn ends failed or
 * interrupted, and nothing is delivered twice).
 */
import type { Logger } from "pino";
import type { TurnInput } from "../agents/driver.js";
import { errors, invalid } from "../errors.js";
import { SingleFlight } from "../lib/single-flight.js";
import { TimedLoop } from "../lib/timed-loop.js";
import { eventAppend, type OwnerFence } from "../sql/event-append.js";
import { sessionLock } from "../sql/session-lock.js";
import { taskRead } from "../sql/task-read.js";
import {
  taskCloseInput,
  taskFindInputByKey,
  taskFindInputs,
  taskLockForInput,
  taskReadInputs,
  type TurnInputEvent,
} from "../sql/task-inputs.js";
import { headsOf } from "./committer.js";
import { isUuid } from "./ids.js";
import type { Runtime } from "./runtime.js";
import type { SessionService } from "./sessions.js";
import { type Tenant, visibleTenant } from "./tenants.js";

export interface SteerInput {
  text: string;
  idempotencyKey?: string;
}

/** A steer's answer (contract/responses.ts, SteerAnswer). */
export interface SteerView {
  taskId: string;
  sessionId: string;
  seq: number;
  text: string;
  created: boolean;
  at: string;
}

export class Steering {
  constructor(
    private readonly rt: Runtime,
    private readonly sessions: SessionService,
  ) {}

  /**
   * Add `input` to the turn task `taskId` runs. Refusals, in order: TASK_NOT_FOUND (also another
   * tenant's task), STEER_NOT_SUPPORTED (its agent cannot take input mid-turn), TASK_NOT_RUNNING
   * (queued, cancelling, finished, or its turn already ending). A retry with the same
   * idempotencyKey answers the stored input (`created: false`), whatever the task's state now.
   */
  async steer(taskId: string, input: SteerInput, tenant: Tenant): Promise<SteerView> {
    const text = input.text;
    if (typeof text !== "string" || text.trim() === "") throw invalid("text must not be empty", "text");
    if (text.length > this.rt.config.maxPromptChars) {
      throw invalid(`text is longer than ${this.rt.config.maxPromptChars} characters`, "text");
    }
    if (!isUuid(taskId)) throw errors.taskNotFound(taskId);
    const task = await taskRead(this.rt.db.sql, taskId.toLowerCase(), visibleTenant(tenant));
    if (!task) throw errors.taskNotFound(taskId);
    const session = await this.sessions.row(task.sessionId, null);
    if (!this.sessions.canSteer(session.agent)) throw errors.steerNotSupported(session.agent);
    const key = input.idempotencyKey ?? null;
    const view = await this.rt.committer.transaction(async (tx) => {
      await sessionLock(tx, task.sessionId);
      const state = await taskLockForInput(tx, task.id);
      if (!state) throw errors.taskNotFound(taskId);
      if (key !== null) {
        const earlier = await taskFindInputByKey(tx, task.sessionId, task.id, key);
        if (earlier) return { value: answer(task.id, task.sessionId, earlier, false), effects: {} };
      }
      if (state.status !== "running" || state.inputClosed) {
        // A turn whose input is closed is about to settle: it is as good as finished.
        throw errors.taskNotRunning(task.id, state.status === "running" ? "finishing" : state.status);
      }
      const events = await eventAppend(tx, task.sessionId, [
        {
          taskId: task.id,
          type: "turn.input",
          data: key !== null ? { text, idempotencyKey: key } : { text },
        },
      ]);
      const [event] = events;
      return {
        value: answer(task.id, task.sessionId, { seq: event.seq, text, at: event.at }, true),
        // After the commit: the instance running the turn hears it, or reads it at its next poll.
        effects: {
          events,
          inputAdded: [task.id],
          notify: { when: "afterCommit" as const, heads: headsOf(events), input: [task.id] },
        },
      };
    });
    this.rt.log.info(
      {
        taskId: task.id,
        sessionId: task.sessionId,
        tenant: tenant.name,
        seq: view.seq,
        created: view.created,
        chars: text.length,
      },
      "turn input accepted",
    );
    return view;
  }
}

function answer(taskId: string, sessionId: string, event: TurnInputEvent, created: boolean): SteerView {
  return {
    taskId,
    sessionId,
    seq: event.seq,
    text: event.text,
    created,
    at: new Date(event.at).toISOString(),
  };
}

/** Hints kept for turns not started here (most are other instances'), before the older half goes. */
const EARLY_HINTS_KEPT = 1000;

/**
 * The running turns' input feeds of one instance: the `input` hints go to the feed of their task,
 * and one poll for all of them stands in for a lost hint.
 */
export class TurnInputs {
  private readonly feeds = new Map<string, TurnInputFeed>();
  /**
   * Hints for tasks without a feed here: a steer can commit between the claim and the feed's start
   * (the feed then reads at once). Hints for other instances' tasks land here too; each is dropped
   * after two polls, by which time the poll covers it.
   */
  private early = new Set<string>();
  private earlier = new Set<string>();
  private readonly poll: TimedLoop;

  constructor(private readonly rt: Runtime) {
    this.poll = new TimedLoop(
      rt.config.pollMs,
      () => this.check(),
      (err) => rt.log.warn({ err: String(err) }, "polling for steered input failed; the next poll retries"),
      rt.clock,
    );
    rt.bus.on("input", (taskId) => {
      const feed = this.feeds.get(taskId);
      if (feed) feed.request();
      else this.keepEarly(taskId);
    });
  }

  /** The feed of a turn that starts now (`firstSeq`: its first event; its inputs all come after). */
  feed(
    sessionId: string,
    taskId: string,
    fence: OwnerFence,
    firstSeq: number | null,
    log: Logger,
  ): TurnInputFeed {
    const feed = new TurnInputFeed(this.rt, sessionId, taskId, fence, firstSeq, log, () =>
      this.remove(taskId),
    );
    this.feeds.set(taskId, feed);
    if (this.feeds.size === 1) this.poll.start();
    // Input accepted before the feed existed; or, for a turn taken over, during its earlier attempt.
    if (this.early.has(taskId) || this.earlier.has(taskId) || fence.attempt > 1) feed.request();
    return feed;
  }

  private keepEarly(taskId: string): void {
    // Without running turns there is no poll to drop them: bounded here instead.
    if (this.early.size >= EARLY_HINTS_KEPT) this.rotateEarly();
    this.early.add(taskId);
  }

  private rotateEarly(): void {
    this.earlier = this.early;
    this.early = new Set();
  }

  private remove(taskId: string): void {
    if (!this.feeds.delete(taskId)) return;
    if (this.feeds.size === 0) void this.poll.stop();
  }

  private async check(): Promise<void> {
    this.rotateEarly();
    const feeds = [...this.feeds.values()];
    if (feeds.length === 0) return;
    const found = await taskFindInputs(
      this.rt.db.sql,
      feeds.map((f) => f.position),
    );
    for (const { taskId, head, input } of found) {
      const feed = this.feeds.get(taskId);
      if (input) feed?.request();
      else feed?.advance(head);
    }
  }
}

/** One running turn's steered input, read from the log and handed to its driver once each. */
export class TurnInputFeed implements TurnInput {
  private lastSeq = 0;
  /** Read but not handed over: the driver has not taken the input yet, or has let go. */
  private readonly pending: TurnInputEvent[] = [];
  private deliver: ((text: string) => void) | null = null;
  private listening = true;
  private closed = false;
  /** One read in flight at a time, one more after it for hints that came meanwhile. */
  private readonly reads: SingleFlight;

  constructor(
    private readonly rt: Runtime,
    private readonly sessionId: string,
    private readonly taskId: string,
    /** The turn's owner fence: closing its input is the owner's write. */
    private readonly fence: OwnerFence,
    /** The task's first event: its inputs all come after it. */
    firstSeq: number | null,
    private readonly log: Logger,
    private readonly unlisten: () => void,
  ) {
    this.lastSeq = Math.max((firstSeq ?? 1) - 1, 0);
    this.reads = new SingleFlight(
      async () => {
        if (this.listening)
          this.accept(await taskReadInputs(this.rt.db.sql, this.sessionId, this.taskId, this.lastSeq));
      },
      // Not lost: the poll reads again, and the settlement finds what is still unread.
      (err) => log.warn({ err: String(err) }, "reading steered input failed; the poll retries"),
    );
  }

  /** Where the feed has read the session's log to, for the instance's poll. */
  get position(): { sessionId: string; taskId: string; afterSeq: number } {
    return { sessionId: this.sessionId, taskId: this.taskId, afterSeq: this.lastSeq };
  }

  /**
   * The seq up to which the task's input was read: the turn's settlement checks that no input came
   * after it. Null once `close` ran (the input is closed: nothing can come).
   */
  get readUpTo(): number | null {
    return this.closed ? null : this.lastSeq;
  }

  take(deliver: (text: string) => void): () => void {
    this.deliver = deliver;
    this.flush();
    return () => {
      if (this.deliver === deliver) this.deliver = null;
    };
  }

  /** A hint: input may have come. */
  request(): void {
    if (this.listening) this.reads.request();
  }

  /**
   * The instance's poll saw the log up to `head` with none of this task's input in it: the next
   * read starts after it (a session's seqs commit in order, so none below a visible one is to come).
   */
  advance(head: number): void {
    this.lastSeq = Math.max(this.lastSeq, head);
  }

  private accept({ inputs, head }: { inputs: TurnInputEvent[]; head: number }): void {
    for (const event of inputs) {
      if (event.seq <= this.lastSeq) continue;
      this.pending.push(event);
    }
    // The events up to the head were all scanned: the next read starts after them.
    this.lastSeq = Math.max(this.lastSeq, head);
    this.flush();
  }

  private flush(): void {
    while (this.deliver && this.pending.length > 0) {
      const event = this.pending.shift() as TurnInputEvent;
      this.log.info({ seq: event.seq }, "turn input delivered to the agent");
      this.deliver(event.text);
    }
  }

  /**
   * The agent's turn is over: stop listening, let a read in flight finish. True when the feed holds
   * input the agent did not take (the turn closes its input now, for a follow-up prompt); false when
   * the settlement can close it (`readUpTo`).
   */
  async finish(): Promise<boolean> {
    this.stopListening();
    this.deliver = null;
    await this.reads.settled();
    return this.pending.length > 0;
  }

  /**
   * No more input is accepted (TASK_NOT_RUNNING from now on); returns the inputs the agent did not
   * take, oldest first, for a follow-up prompt. Never throws: with the database away the turn
   * settles without them (their events stay in the log).
   */
  async close(): Promise<TurnInputEvent[]> {
    await this.finish();
    try {
      await taskCloseInput(this.rt.db.sql, this.fence);
      this.accept(await taskReadInputs(this.rt.db.sql, this.sessionId, this.taskId, this.lastSeq));
    } catch (err) {
      this.log.warn({ err: String(err) }, "closing steered input failed; late input is not delivered");
    }
    this.closed = true;
    return this.pending.splice(0);
  }

  /** Stop reading (the turn ended). */
  stopListening(): void {
    if (!this.listening) return;
    this.listening = false;
    this.unlisten();
  }
}
