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
 * Delivering (`TurnInputFeed`, on the instance running the turn): on every `input` hint for its
 * task (its own instance's commits and other instances' notifications) and on its poll
 * (MOORING_POLL_MS: notifications are hints, the poll is the guarantee), it reads the session's
 * events after the last one it scanned, keeps the task's `turn.input` ones and hands each to the
 * driver once, in seq order.
 * When the agent's turn ends, `close` sets `tasks.input_closed_at` (from then on a steer answers
 * TASK_NOT_RUNNING) and reads once more: what the agent did not take is returned, and the turn
 * runner sends it as a follow-up prompt in the same turn (domain/turn-run.ts). So every accepted
 * steer reaches the agent once, unless the turn fails or its gateway dies first (then the event
 * stays in the log, the turn ends failed or interrupted, and nothing is delivered twice).
 */
import type { Logger } from "pino";
import type { TurnInput } from "../agents/driver.js";
import { errors, invalid } from "../errors.js";
import { TimedLoop } from "../lib/timed-loop.js";
import { SingleFlight } from "../lib/single-flight.js";
import { appendEvents, type OwnerFence } from "../sql/append-events.js";
import { lockSessionRow } from "../sql/lock-session.js";
import { readTask } from "../sql/read-tasks.js";
import {
  closeTurnInput,
  findTurnInputByKey,
  lockTaskForInput,
  readTurnInputs,
  type TurnInputEvent,
} from "../sql/turn-inputs.js";
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
    const task = await readTask(this.rt.db.sql, taskId.toLowerCase(), visibleTenant(tenant));
    if (!task) throw errors.taskNotFound(taskId);
    const session = await this.sessions.row(task.sessionId, null);
    if (!this.sessions.canSteer(session.agent)) throw errors.steerNotSupported(session.agent);
    const key = input.idempotencyKey ?? null;
    const view = await this.rt.committer.transaction(async (tx) => {
      await lockSessionRow(tx, task.sessionId);
      const state = await lockTaskForInput(tx, task.id);
      if (!state) throw errors.taskNotFound(taskId);
      if (key !== null) {
        const earlier = await findTurnInputByKey(tx, task.sessionId, task.id, key);
        if (earlier) return { value: answer(task.id, task.sessionId, earlier, false), effects: {} };
      }
      if (state.status !== "running" || state.inputClosed) {
        // A turn whose input is closed is about to settle: it is as good as finished.
        throw errors.taskNotRunning(task.id, state.status === "running" ? "finishing" : state.status);
      }
      const events = await appendEvents(tx, task.sessionId, [
        {
          taskId: task.id,
          type: "turn.input",
          data: key !== null ? { text, idempotencyKey: key } : { text },
        },
      ]);
      const [event] = events;
      return {
        value: answer(task.id, task.sessionId, { seq: event.seq, text, at: event.at }, true),
        // In the transaction: the instance running the turn hears it at the commit.
        effects: {
          events,
          inputAdded: [task.id],
          notify: { when: "inTransaction" as const, heads: headsOf(events), input: [task.id] },
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

/** One running turn's steered input, read from the log and handed to its driver once each. */
export class TurnInputFeed implements TurnInput {
  private lastSeq = 0;
  /** Read but not handed over: the driver has not taken the input yet, or has let go. */
  private readonly pending: TurnInputEvent[] = [];
  private deliver: ((text: string) => void) | null = null;
  private closed = false;
  private readonly reads: SingleFlight;
  private readonly poll: TimedLoop;
  private readonly onInput = (taskId: string) => {
    if (taskId === this.taskId) this.reads.request();
  };

  constructor(
    private readonly rt: Runtime,
    private readonly sessionId: string,
    private readonly taskId: string,
    /** The turn's owner fence: closing its input is the owner's write. */
    private readonly fence: OwnerFence,
    /** The task's first event: its inputs all come after it. */
    firstSeq: number | null,
    private readonly log: Logger,
  ) {
    this.lastSeq = Math.max((firstSeq ?? 1) - 1, 0);
    this.reads = new SingleFlight(
      () => this.read(),
      (err) => log.warn({ err: String(err) }, "reading steered input failed; the poll retries"),
    );
    this.poll = new TimedLoop(rt.config.pollMs, () => this.reads.request(), undefined, rt.clock);
    rt.bus.on("input", this.onInput);
    this.poll.start();
    // Input accepted before the turn started (the task was claimed and running already).
    this.reads.request();
  }

  take(deliver: (text: string) => void): () => void {
    this.deliver = deliver;
    this.flush();
    return () => {
      if (this.deliver === deliver) this.deliver = null;
    };
  }

  private async read(): Promise<void> {
    if (this.closed) return;
    this.accept(await readTurnInputs(this.rt.db.sql, this.sessionId, this.taskId, this.lastSeq));
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
   * The agent's turn is over: no more input is accepted (TASK_NOT_RUNNING from now on); returns
   * the inputs it did not take, oldest first, for a follow-up prompt. Never throws: with the
   * database away the turn settles without them (their events stay in the log).
   */
  async close(): Promise<TurnInputEvent[]> {
    this.stopListening();
    this.deliver = null;
    try {
      await closeTurnInput(this.rt.db.sql, this.fence);
      this.accept(await readTurnInputs(this.rt.db.sql, this.sessionId, this.taskId, this.lastSeq));
    } catch (err) {
      this.log.warn({ err: String(err) }, "closing steered input failed; late input is not delivered");
    }
    this.closed = true;
    return this.pending.splice(0);
  }

  /** Stop reading (the turn ended without a follow-up: a stop, a failure). */
  stopListening(): void {
    this.rt.bus.off("input", this.onInput);
    void this.poll.stop();
  }
}
