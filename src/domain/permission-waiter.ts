/**
 * One running turn's wait for the answer to one recorded permission request (domain/permissions.ts
 * keeps the waiters by request id and wakes them). The wait ends at the first of: an answer read
 * back (`answered`), the request's deadline, a stop of the turn (its signal), or a withdrawal at the
 * turn's end. The deadline, a stop and a withdrawal answer through the same conditional update as a
 * client: whichever commits first wins, and a loser reads the winner back through `recheck`.
 */
import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../clock.js";
import type { Queryable } from "../db/client.js";
import { type PermissionRow, type ResolvedBy, permissionResolve } from "../sql/permission.js";

/** What a stop of the turn means for its pending requests. */
export type StopCause = "cancel" | "timeout" | "shutdown" | "lost";
export const byOfCause: Record<StopCause, ResolvedBy | null> = {
  cancel: "cancel",
  timeout: "timeout",
  shutdown: "restart",
  lost: null, // another instance settles the task (and its requests, by restart)
};

export interface WaiterDeps {
  sql: Queryable;
  clock: Clock;
  log: Logger;
  /** How long the request waits for an answer (MOORING_PERMISSION_TIMEOUT_MS). */
  timeoutMs: number;
  /** Reads the request back and hands a resolved row to `answered` (a lost conditional update). */
  recheck(requestId: string): void;
  /** The wait ended, whichever way: the waiter is no longer to be woken. */
  ended(requestId: string): void;
}

export class PermissionWaiter {
  /** The winning answer; null when the turn was lost (nothing resolved: another instance settles). */
  readonly answer: Promise<PermissionRow | null>;
  /** Settles once the turn queued the request's `permission.resolved` (`announced`). */
  readonly finished: Promise<void>;
  private settle: (row: PermissionRow | null) => void = () => {};
  private announce: () => void = () => {};
  private over = false;
  private readonly timer: ClockTimer;
  private readonly onAbort = () => {
    const by = byOfCause[this.signal.reason as StopCause] ?? "cancel";
    if (by === null) this.end(null);
    else this.withdraw(by);
  };

  constructor(
    readonly row: Pick<PermissionRow, "id" | "options" | "taskId">,
    /** The option a request is answered with when nobody chose. */
    private readonly reject: string | null,
    private readonly signal: AbortSignal,
    private readonly deps: WaiterDeps,
  ) {
    this.finished = new Promise<void>((resolve) => {
      this.announce = resolve;
    });
    this.answer = new Promise<PermissionRow | null>((resolve) => {
      this.settle = resolve;
    });
    this.timer = deps.clock.setTimeout(() => this.withdraw("timeout"), deps.timeoutMs);
    signal.addEventListener("abort", this.onAbort, { once: true });
  }

  /** The request was found resolved: the turn goes on with `row`. */
  answered(row: PermissionRow): void {
    this.end(row);
  }

  /** Resolve it as `by` through the conditional update (the turn ended without an answer). */
  withdraw(by: ResolvedBy): void {
    permissionResolve(this.deps.sql, this.row.id, { optionId: this.reject, by })
      .then((won) => (won ? this.end(won) : this.deps.recheck(this.row.id)))
      .catch((err) => {
        this.deps.log.warn(
          { err: String(err), requestId: this.row.id },
          "permission could not be resolved in the database",
        );
        this.end({
          ...(this.row as unknown as PermissionRow),
          resolvedAt: new Date(),
          resolvedBy: by,
          optionId: this.reject,
          message: null,
          answers: null,
          answeredBy: null,
        });
      });
  }

  /** The turn queued the answer's `permission.resolved` (or has none to queue). */
  announced(): void {
    this.announce();
  }

  private end(row: PermissionRow | null): void {
    if (this.over) return;
    this.over = true;
    this.deps.clock.clearTimeout(this.timer);
    this.signal.removeEventListener("abort", this.onAbort);
    this.deps.ended(this.row.id);
    this.settle(row);
  }
}
