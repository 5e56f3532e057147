/**
 * One turn's execution on its session's agent: start (or reuse) the conversation, run the prompt
 * under the turn's deadline, escalate a stop (cancel, timeout, shutdown) to a kill when the agent
 * ignores it, and settle the task exactly once with a write fenced by owner and attempt. The
 * worker (domain/worker.ts) claims the turns and keeps their leases; this runs them.
 */
import { retrying, retryPolicies } from "../lib/retry.js";
import type { Logger } from "pino";
import { type AgentDriver, AgentFailure, type TurnOutcome } from "../agents/driver.js";
import type { AgentRegistry, DriverName } from "../agents/registry.js";
import { storable } from "../agents/storable-text.js";
import { secondsBetween } from "../metrics/reporter.js";
import type { OwnerFence } from "../sql/event-append.js";
import type { Settlement } from "../sql/task-settle.js";
import type { TaskRow } from "../sql/task-row.js";
import type { ConversationPool } from "./conversation-pool.js";
import type { Permissions } from "./permissions.js";
import type { Recovery } from "./recovery.js";
import type { Runtime } from "./runtime.js";
import { settleWithContinuationIn } from "./turn-end.js";
import { TurnRecorder } from "./turn-recorder.js";
import { TurnInputs } from "./turn-inputs.js";
import { taskStillRuns, type TurnInputEvent } from "../sql/task-inputs.js";
import type { SessionRow } from "./views.js";
import type { ClockTimer } from "../clock.js";
import type { CheckpointService } from "./checkpoints.js";
import { traceIdOf } from "../tracing/trace-context.js";
import { noSpan, type Span } from "../tracing/tracer.js";
import type { TurnTrace } from "./turn-recorder.js";

/** Why a running turn is being stopped before it ended by itself. */
export type StopCause = "cancel" | "timeout" | "shutdown" | "lost";

/** How long an agent gets to stop after a cancel before it is killed. */
const CANCEL_ESCALATION_MS = 3000;

export class RunningTurn {
  readonly controller = new AbortController();
  cause: StopCause | null = null;
  done: Promise<void> = Promise.resolve();
  /** When this process started the turn; a heartbeat sent earlier cannot know about it. */
  readonly startedLocallyAt = Date.now();
  constructor(readonly row: TaskRow) {}

  stop(cause: StopCause): void {
    if (this.cause) return;
    this.cause = cause;
    this.controller.abort(cause);
  }
}

export class TurnExecution {
  /** Set once the shutdown grace is over: settlement retries give up quickly. */
  private shuttingDown = false;
  /** The running turns' steered input. */
  private readonly inputs: TurnInputs;

  constructor(
    private readonly rt: Runtime,
    private readonly registry: AgentRegistry,
    private readonly drivers: Record<DriverName, AgentDriver>,
    private readonly pool: ConversationPool,
    private readonly recovery: Recovery,
    /** Interactive approvals: where a turn's permission requests go (absent: drivers use their policy). */
    private readonly permissions: Permissions | null,
    /** Workspace checkpoints before and after each turn (absent: none). */
    private readonly checkpoints: CheckpointService | null = null,
  ) {
    this.inputs = new TurnInputs(rt);
  }

  /** Shutdown: the grace is over; settlements give up after a few attempts. */
  givingUp(): void {
    this.shuttingDown = true;
  }

  /** Run one claimed turn to its settlement (never throws: a failure settles the turn). */
  async execute(turn: RunningTurn, sessions: Promise<Map<string, SessionRow>>): Promise<void> {
    const { row } = turn;
    const fence: OwnerFence = { taskId: row.id, bootId: this.rt.identity.bootId, attempt: row.attempt };
    // The turn's log lines carry its trace id: from a line to the trace (docs/operations.md, Tracing).
    const traceId = traceIdOf(row.traceContext);
    const log = this.rt.log.child({
      taskId: row.id,
      sessionId: row.sessionId,
      tenant: row.tenant,
      attempt: row.attempt,
      ...(traceId ? { traceId } : {}),
    });
    const { tracer } = this.rt;
    const span = tracer.on
      ? tracer.span("mooring.turn", row.traceContext, {
          "mooring.task.id": row.id,
          "mooring.session.id": row.sessionId,
          "mooring.tenant": row.tenant,
          "mooring.attempt": row.attempt,
          "mooring.instance.id": this.rt.identity.instanceId,
        })
      : noSpan;
    if (tracer.on) this.rt.eventLog.traceTurn(row.id, span);
    let session: SessionRow | null = null;
    let healthy = false;
    let tokens: number | null = null;
    try {
      session = (await sessions).get(row.sessionId) ?? null;
      if (!session) throw new Error(`session ${row.sessionId} not found`);
      const entry = this.registry.get(session.agent);
      if (!entry) {
        await this.settle(
          turn,
          fence,
          log,
          {
            status: "failed",
            error: {
              code: "AGENT_START_FAILED",
              message: `The agent "${session.agent}" is no longer registered.`,
            },
          },
          span,
        );
        return;
      }
      // The workspace as it is before the agent starts (docs/api.md, Workspace checkpoints).
      const checkpointed =
        this.checkpoints?.enabledFor(session, entry) === true &&
        (await this.checkpoints.beforeTurn(session, row, log));
      // Traced: the agent's start, until its first event (resume, new, warm; fresh_fallback when a
      // resume failed and the agent started a fresh conversation).
      const trace: TurnTrace | null = tracer.on
        ? {
            turn: span,
            agentStart: tracer.span("mooring.agent.start", span, { "mooring.agent": session.agent }),
          }
        : null;
      const conversation = this.pool.acquire(
        session,
        entry,
        this.drivers[entry.driver],
        trace
          ? (how) => {
              trace.agentStart?.set({ "mooring.agent.start": how });
              span.set({ "mooring.agent.start": how, "mooring.agent": session!.agent });
            }
          : undefined,
      );
      // deadline_at was set by the database at admission; the timer runs on the gateway's clock.
      const armDeadline = () => {
        const now = this.rt.clock.now();
        const deadline = (row.deadlineAt?.getTime() ?? now + row.timeoutMs) - now;
        return this.rt.clock.setTimeout(() => turn.stop("timeout"), Math.max(deadline, 0));
      };
      let deadlineTimer = armDeadline();
      const state = new TurnRecorder(
        this.rt,
        session,
        row,
        fence,
        log,
        this.permissions,
        turn.controller.signal,
        trace,
      );
      let outcome: TurnOutcome | null = null;
      let failure: unknown = null;
      // Steered input (domain/turn-inputs.ts), for drivers whose agent takes it mid-turn.
      const input = this.drivers[entry.driver].steer
        ? this.inputs.feed(row.sessionId, row.id, fence, row.firstSeq, log)
        : null;
      const run = (prompt: string) =>
        this.runWithEscalation(turn, () =>
          conversation.runTurn({
            prompt,
            sink: state.sink,
            signal: turn.controller.signal,
            turn: { taskId: row.id, attempt: row.attempt },
            ...(input ? { input } : {}),
          }),
        );
      // A turn its agent ended by itself can take late input as a follow-up prompt.
      const followable = () =>
        outcome !== null && outcome.stopReason !== "cancelled" && !turn.cause && conversation.alive;
      // Input that came too late for the agent's turn goes to it as a follow-up prompt, in this turn;
      // the input is closed by then (later steers answer TASK_NOT_RUNNING), so this happens once.
      const followUp = async (rest: TurnInputEvent[]) => {
        if (rest.length === 0 || !followable()) return;
        log.info({ inputs: rest.length }, "steered input after the agent's turn: sent as a follow-up prompt");
        outcome = await run(rest.map((e) => e.text).join("\n\n"));
      };
      try {
        outcome = await run(row.prompt);
        // Input the feed holds, or a turn whose checkpoint comes before its settlement: the input
        // is closed here. Otherwise the settlement closes it (sql/task-settle.ts).
        if (input && ((await input.finish()) || checkpointed)) await followUp(await input.close());
      } catch (err) {
        failure = err;
      } finally {
        input?.stopListening();
        this.rt.clock.clearTimeout(deadlineTimer);
        // An agent that ended without a single event: its start ends with the turn.
        trace?.agentStart?.end();
      }
      const settleTurn = async (inputAfter: number | null): Promise<boolean> => {
        // A request the agent left unanswered (it crashed, or withdrew it) is resolved before the
        // settlement, so its event precedes the terminal one.
        await this.permissions?.endTurn(row.id);
        // The workspace as the agent left it (stopped, failed or done), with the turn's turn.diff event.
        if (checkpointed && this.checkpoints && turn.cause !== "lost") {
          await this.checkpoints.afterTurn(session!, row, fence, log);
        }
        // The turn's session writes need no waiting for: its lane commits them before (or with)
        // the settlement queued after them, while the fence that guards them still holds.
        tokens = state.contextTokens;
        healthy = failure === null && outcome !== null && conversation.alive;
        if (outcome === null && failure === null) {
          // The agent ignored the stop request and was killed.
          this.pool.close(row.sessionId, "kill");
        }
        if (failure && !(failure instanceof AgentFailure)) {
          log.error({ err: String(failure) }, "agent crashed during the turn");
        }
        // The outcome and failure come from the agent: storable like its events (agents/storable-text.ts).
        const settlement = storable(settlementFor(turn.cause, outcome, failure, state, session!));
        return this.settle(turn, fence, log, settlement, span, inputAfter);
      };
      const readUpTo = input && failure === null && followable() ? input.readUpTo : null;
      const inputPending = await settleTurn(readUpTo);
      if (inputPending && input) {
        // Input the feed had not heard of (its hint lost or still on its way): the agent takes it
        // before the turn settles.
        deadlineTimer = armDeadline();
        try {
          await followUp(await input.close());
        } catch (err) {
          failure = err;
        } finally {
          this.rt.clock.clearTimeout(deadlineTimer);
        }
        await settleTurn(null);
      }
    } catch (err) {
      log.error({ err: String(err) }, "turn could not run");
      await this.settle(
        turn,
        fence,
        log,
        {
          status: "failed",
          error: { code: "AGENT_START_FAILED", message: "The agent could not be started for this turn." },
        },
        span,
      ).catch(() => {});
    } finally {
      this.pool.release(row.sessionId, healthy, tokens);
      if (tracer.on) {
        if (turn.cause) span.set({ "mooring.stop.cause": turn.cause });
        this.rt.eventLog.untraceTurn(row.id);
        span.end();
      }
    }
  }

  /**
   * Run the turn; once a stop was requested, give the agent CANCEL_ESCALATION_MS to stop by itself,
   * then kill it. Resolves null when it had to be killed.
   */
  private async runWithEscalation(
    turn: RunningTurn,
    run: () => Promise<TurnOutcome>,
  ): Promise<TurnOutcome | null> {
    const running = run();
    running.catch(() => {});
    let timer: ClockTimer | undefined;
    let arm = () => {};
    const killed = new Promise<null>((resolve) => {
      arm = () => {
        timer = this.rt.clock.setTimeout(() => resolve(null), CANCEL_ESCALATION_MS);
      };
      if (turn.controller.signal.aborted) arm();
      else turn.controller.signal.addEventListener("abort", arm, { once: true });
    });
    try {
      return await Promise.race([running, killed]);
    } finally {
      // A stop after the run (during a steer's follow-up check or the settlement) arms nothing.
      turn.controller.signal.removeEventListener("abort", arm);
      this.rt.clock.clearTimeout(timer);
    }
  }

  /** A settled turn's run time, for mooring_task_run_seconds. */
  private ran(row: TaskRow): void {
    const seconds = secondsBetween(row.startedAt, row.finishedAt);
    if (seconds !== null) this.rt.metrics.taskRan(seconds);
  }

  /**
   * The owner's fenced settlement with its terminal event. The common case rides in the event
   * log's next flush for the session (stream/event-lane.ts), after the turn's events; an
   * interruption that may queue a continuation (MOORING_RECOVERY=continue) needs the gate lock
   * and has a transaction of its own.
   */
  private async settle(
    turn: RunningTurn,
    fence: OwnerFence,
    log: Logger,
    settlement: Settlement,
    parent: Span,
    /** The seq the turn's steered input was read up to (domain/turn-inputs.ts); null: no check. */
    inputAfter: number | null = null,
  ): Promise<boolean> {
    if (turn.cause === "lost") {
      parent.event("mooring.lease.lost"); // another instance owns the outcome now
      return false;
    }
    const { tracer } = this.rt;
    const span = tracer.on
      ? tracer.span("mooring.settle", parent, {
          "mooring.task.id": turn.row.id,
          "mooring.task.status": settlement.status,
          ...(settlement.error ? { "mooring.error.code": settlement.error.code } : {}),
        })
      : noSpan;
    if (settlement.error && (settlement.status === "failed" || settlement.status === "interrupted"))
      parent.fail(settlement.error.code);
    try {
      return await this.settleTraced(turn, fence, log, settlement, span, inputAfter);
    } finally {
      span.end();
    }
  }

  private async settleTraced(
    turn: RunningTurn,
    fence: OwnerFence,
    log: Logger,
    settlement: Settlement,
    span: Span,
    inputAfter: number | null,
  ): Promise<boolean> {
    if (settlement.status === "interrupted" && this.recovery.needsGateLock) {
      await this.rt.eventLog.flush(turn.row.sessionId);
      await this.settleWithContinuation(turn, fence, log, settlement);
      return false;
    }
    const outcome = await this.rt.eventLog.settle({
      sessionId: turn.row.sessionId,
      fence,
      settlement,
      ...(inputAfter !== null ? { inputAfter } : {}),
    });
    span.set({ "mooring.settle.outcome": outcome.kind });
    switch (outcome.kind) {
      case "settled":
        log.info({ status: outcome.row.status, code: outcome.row.error?.code }, "turn settled");
        this.ran(outcome.row);
        return false;
      case "input-pending":
        log.info("steered input came after what the turn read: not settled yet");
        return true;
      case "unconfirmed":
        // Checked for input, the flush may have committed without the settlement.
        if (inputAfter !== null && (await taskStillRuns(this.rt.db.sql, fence).catch(() => false))) {
          log.info("the settlement's answer was lost and the turn still runs: steered input came");
          return true;
        }
        log.info({ status: settlement.status }, "turn settled (the commit's answer was lost)");
        return false;
      case "not-owner":
        log.warn(
          { status: settlement.status },
          "lost guard: task was settled or taken over elsewhere; nothing written",
        );
        return false;
      case "gave-up":
        log.error("settling failed; giving up (the lease expires and the task is settled elsewhere)");
        return false;
    }
  }

  /** An interruption with its continuation, admitted under the gate lock like any turn. */
  private async settleWithContinuation(
    turn: RunningTurn,
    fence: OwnerFence,
    log: Logger,
    settlement: Settlement,
  ): Promise<void> {
    let done: TaskRow | null;
    try {
      // The database is away: the lease keeps the task ours until it expires, so keep trying.
      done = await retrying(retryPolicies.settle, () => this.settleOwnTransaction(turn, fence, settlement), {
        retryable: (_err, attempt) => attempt < 31 && !(this.shuttingDown && attempt >= 2),
        clock: this.rt.clock,
        onRetry: (err, delay) =>
          log.warn({ err: String(err), retryInMs: delay }, "settling failed; retrying"),
      });
    } catch (err) {
      log.error(
        { err: String(err) },
        "settling failed; giving up (the lease expires and the task is settled elsewhere)",
      );
      return;
    }
    if (!done) {
      log.warn(
        { status: settlement.status },
        "lost guard: task was settled or taken over elsewhere; nothing written",
      );
      return;
    }
    log.info({ status: done.status, code: done.error?.code }, "turn settled");
    this.ran(done);
  }

  /** The settlement and the recovery policy's continuation, under the gate lock, as one change. */
  private settleOwnTransaction(
    turn: RunningTurn,
    fence: OwnerFence,
    settlement: Settlement,
  ): Promise<TaskRow | null> {
    return this.rt.committer.transaction((tx) =>
      settleWithContinuationIn(tx, this.recovery, turn.row.sessionId, fence, settlement),
    );
  }
}

const stopMessages = {
  cancel: { status: "cancelled", code: "CANCELLED", message: "The turn was cancelled." },
  timeout: {
    status: "failed",
    code: "TURN_TIMEOUT",
    message: "The turn ran past its deadline and was stopped.",
  },
  shutdown: {
    status: "interrupted",
    code: "GATEWAY_RESTART",
    message: "The gateway shut down before the turn finished.",
  },
} as const;

function settlementFor(
  cause: StopCause | null,
  outcome: TurnOutcome | null,
  failure: unknown,
  state: TurnRecorder,
  _session: SessionRow,
): Settlement {
  if (cause && cause !== "lost") {
    const stop = stopMessages[cause];
    // A turn the agent finished normally despite a late stop request still counts as finished.
    if (outcome && outcome.stopReason !== "cancelled" && cause !== "timeout") {
      return { status: "completed", result: state.resultFor(outcome) };
    }
    return {
      status: stop.status,
      result: outcome ? state.resultFor(outcome) : null,
      error: { code: stop.code, message: stop.message },
    };
  }
  if (outcome) return { status: "completed", result: state.resultFor(outcome) };
  if (failure instanceof AgentFailure) {
    if (failure.code === "CANCELLED") {
      return { status: "cancelled", error: { code: "CANCELLED", message: failure.message } };
    }
    return {
      status: "failed",
      error: {
        code: failure.code,
        message: failure.message,
        ...(failure.reason ? { reason: failure.reason } : {}),
      },
    };
  }
  return {
    status: "failed",
    error: { code: "AGENT_CRASHED", message: "The agent stopped unexpectedly during the turn." },
  };
}
