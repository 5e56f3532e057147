/**
 * A turn's settlement, sent once by its owner: what the turn's stop, outcome or failure settles it
 * as, and how it is written. The common case rides in the event log's next flush for the session
 * (stream/event-lane.ts), after the turn's events; an interruption that may queue a continuation
 * (MOORING_RECOVERY=continue) needs the gate lock and has a transaction of its own
 * (domain/turn-end.ts). Either way the write is fenced by owner and attempt.
 */
import type { Logger } from "pino";
import { AgentFailure, type TurnOutcome } from "../agents/driver.js";
import { retrying, retryPolicies } from "../lib/retry.js";
import { secondsBetween } from "../metrics/reporter.js";
import type { OwnerFence } from "../sql/event-append.js";
import { taskStillRuns } from "../sql/task-inputs.js";
import type { TaskRow } from "../sql/task-row.js";
import type { Settlement } from "../sql/task-settle.js";
import { noSpan, type Span } from "../tracing/tracer.js";
import type { Recovery } from "./recovery.js";
import type { RunningTurn, StopCause } from "./running-turn.js";
import type { Runtime } from "./runtime.js";
import { settleWithContinuationIn } from "./turn-end.js";
import type { TurnRecorder } from "./turn-recorder.js";

/** One turn's settlement: who it is, whose it is, where it logs and traces. */
export interface TurnToSettle {
  turn: RunningTurn;
  fence: OwnerFence;
  log: Logger;
  /** The turn's span; the settlement's span is its child. */
  span: Span;
}

export class TurnSettler {
  /** Set once the shutdown grace is over: settlement retries give up quickly. */
  private shuttingDown = false;

  constructor(
    private readonly rt: Runtime,
    private readonly recovery: Recovery,
  ) {}

  /** Shutdown: the grace is over; settlements give up after a few attempts. */
  givingUp(): void {
    this.shuttingDown = true;
  }

  /**
   * Settle the turn. Answers true when steered input came after what the turn read (the seq in
   * `inputAfter`, domain/turn-inputs.ts; null: no check): the turn is not settled and takes it first.
   */
  async settle(to: TurnToSettle, settlement: Settlement, inputAfter: number | null = null): Promise<boolean> {
    const { turn, span: parent } = to;
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
    turn.settling = true;
    try {
      const inputPending = await this.settleTraced(to, settlement, span, inputAfter);
      // Not settled: the turn takes the input that came, and runs on.
      if (inputPending) turn.settling = false;
      return inputPending;
    } finally {
      span.end();
    }
  }

  private async settleTraced(
    { turn, fence, log }: TurnToSettle,
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
      done = await retrying(
        retryPolicies.settle,
        () =>
          this.rt.committer.transaction((tx) =>
            settleWithContinuationIn(tx, this.recovery, turn.row.sessionId, fence, settlement),
          ),
        {
          retryable: (_err, attempt) => attempt < 31 && !(this.shuttingDown && attempt >= 2),
          clock: this.rt.clock,
          onRetry: (err, delay) =>
            log.warn({ err: String(err), retryInMs: delay }, "settling failed; retrying"),
        },
      );
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

  /** A settled turn's run time, for mooring_task_run_seconds. */
  private ran(row: TaskRow): void {
    const seconds = secondsBetween(row.startedAt, row.finishedAt);
    if (seconds !== null) this.rt.metrics.taskRan(seconds);
  }
}

const stopSettlements = {
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

/** What a turn that ran settles as: its stop's cause first, then the agent's outcome or failure. */
export function settlementFor(
  cause: StopCause | null,
  outcome: TurnOutcome | null,
  failure: unknown,
  recorder: TurnRecorder,
): Settlement {
  if (cause && cause !== "lost") {
    const stop = stopSettlements[cause];
    // A turn the agent finished normally despite a late stop request still counts as finished.
    if (outcome && outcome.stopReason !== "cancelled" && cause !== "timeout") {
      return { status: "completed", result: recorder.resultFor(outcome) };
    }
    return {
      status: stop.status,
      result: outcome ? recorder.resultFor(outcome) : null,
      error: { code: stop.code, message: stop.message },
    };
  }
  if (outcome) return { status: "completed", result: recorder.resultFor(outcome) };
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
