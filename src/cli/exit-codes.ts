/** The exit codes of the `mooring` command (docs/cli.md): what a script may rely on. */
import {
  ConnectionError,
  GatewayBusyError,
  MooringApiError,
  NotReadyError,
  SessionBusyError,
  SteerNotSupportedError,
  TaskLostError,
  type TaskStatus,
  WorkspaceConflictError,
} from "../client/index.js";

export const ExitCode = {
  completed: 0,
  failed: 1,
  usage: 2,
  cancelled: 3,
  refused: 4,
  unreachable: 5,
  secondInterrupt: 130,
} as const;

/** The exit code of a turn that ended with `status`. */
export function exitCodeOfStatus(status: TaskStatus): number {
  switch (status) {
    case "completed":
      return ExitCode.completed;
    case "cancelled":
      return ExitCode.cancelled;
    case "expired":
      return ExitCode.refused;
    default:
      // failed, interrupted (and a non-terminal status, which only a caller's mistake could pass)
      return ExitCode.failed;
  }
}

/** A usage or configuration error of the command line itself (bad option, no prompt, bad URL). */
export class UsageError extends Error {}

/** The exit code of an error that ended a command before (or instead of) a terminal task. */
export function exitCodeOfError(err: unknown): number {
  if (err instanceof UsageError) return ExitCode.usage;
  // Refused: the gate's queue is full, the session is busy and --if-busy reject was asked, --steer
  // met a running turn whose agent cannot take input, or a revert would overwrite files changed
  // since the last checkpoint.
  if (
    err instanceof GatewayBusyError ||
    err instanceof SessionBusyError ||
    err instanceof SteerNotSupportedError ||
    err instanceof WorkspaceConflictError
  ) {
    return ExitCode.refused;
  }
  // The SDK retried until its deadline rule (readyTimeoutMs for a call, R4 for a followed task).
  if (err instanceof ConnectionError || err instanceof NotReadyError || err instanceof TaskLostError) {
    return ExitCode.unreachable;
  }
  // Any other answer of the gateway to what we asked (unknown id, bad workspace, bad token) is the
  // caller's to fix; an internal error is a failure.
  if (err instanceof MooringApiError) return (err.status ?? 500) >= 500 ? ExitCode.failed : ExitCode.usage;
  return ExitCode.failed;
}
