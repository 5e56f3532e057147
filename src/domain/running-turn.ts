/**
 * A turn while it runs on this instance: the stop a cancel, a deadline, a shutdown or a lost lease
 * asks for, and the escalation of that stop to a kill when the agent ignores it.
 */
import type { TurnOutcome } from "../agents/driver.js";
import type { Clock, ClockTimer } from "../clock.js";
import type { TaskRow } from "../sql/task-row.js";

/** Why a running turn is being stopped before it ended by itself. */
export type StopCause = "cancel" | "timeout" | "shutdown" | "lost";

/** How long an agent gets to stop after a stop request before it is killed. */
const CANCEL_ESCALATION_MS = 3000;

export class RunningTurn {
  readonly controller = new AbortController();
  cause: StopCause | null = null;
  done: Promise<void> = Promise.resolve();
  /**
   * Its settlement is being written (domain/turn-settler.ts): a heartbeat that finds its lease gone
   * is most likely reading that very commit, not a takeover (a takeover's settlement is fenced out
   * and says so).
   */
  settling = false;
  /** When this process started the turn; a heartbeat sent earlier cannot know about it. */
  readonly startedLocallyAt = Date.now();
  constructor(readonly row: TaskRow) {}

  stop(cause: StopCause): void {
    if (this.cause) return;
    this.cause = cause;
    this.controller.abort(cause);
  }

  /**
   * Run the agent's turn; once a stop was requested, give the agent CANCEL_ESCALATION_MS to stop by
   * itself. Resolves null when it did not (the caller kills it).
   */
  async runEscalating(clock: Clock, run: () => Promise<TurnOutcome>): Promise<TurnOutcome | null> {
    const running = run();
    running.catch(() => {});
    const { signal } = this.controller;
    let timer: ClockTimer | undefined;
    let arm = () => {};
    const killed = new Promise<null>((resolve) => {
      arm = () => {
        timer = clock.setTimeout(() => resolve(null), CANCEL_ESCALATION_MS);
      };
      if (signal.aborted) arm();
      else signal.addEventListener("abort", arm, { once: true });
    });
    try {
      return await Promise.race([running, killed]);
    } finally {
      // A stop after the run (during a steer's follow-up check or the settlement) arms nothing.
      signal.removeEventListener("abort", arm);
      clock.clearTimeout(timer);
    }
  }
}
