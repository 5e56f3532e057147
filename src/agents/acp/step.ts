/**
 * One request to the agent that must not outlive the agent, the turn or a deadline. Each way it
 * can end is kept apart because the callers react differently: an agent's error answer to
 * `session/load` means "start fresh", a dead agent or a cancelled turn does not.
 */
import { RequestError } from "@agentclientprotocol/sdk";
import type { AgentProcess } from "./process.js";

export type StepFailureKind =
  /** The agent answered with a JSON-RPC error. */
  | "error"
  /** The connection broke (the agent exited, closed stdout or sent garbage). */
  | "broken"
  /** The turn's signal aborted. */
  | "aborted"
  | "timeout";

export class StepFailure extends Error {
  constructor(
    readonly kind: StepFailureKind,
    message: string,
    readonly cause?: unknown,
  ) {
    super(message);
    this.name = "StepFailure";
  }
}

/** How long a response may lag behind the agent's exit (its stdout is read after `exit` fires). */
export const EXIT_SETTLE_MS = 1000;

export interface StepOptions {
  /** Aborting it fails the step with `aborted`; leave it out when the caller handles aborts itself. */
  signal?: AbortSignal;
  timeoutMs?: number;
}

export function step<T>(request: Promise<T>, proc: AgentProcess, options: StepOptions = {}): Promise<T> {
  const { signal, timeoutMs } = options;
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const cleanups: (() => void)[] = [];
    const finish = (settle: () => void) => {
      if (settled) return;
      settled = true;
      for (const cleanup of cleanups.splice(0)) cleanup();
      settle();
    };
    request.then(
      (value) => finish(() => resolve(value)),
      (err) => finish(() => reject(classify(err))),
    );
    if (signal) {
      const onAbort = () => finish(() => reject(new StepFailure("aborted", "the turn was cancelled")));
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      cleanups.push(() => signal.removeEventListener("abort", onAbort));
    }
    if (timeoutMs !== undefined) {
      const timer = setTimeout(
        () => finish(() => reject(new StepFailure("timeout", `no answer within ${timeoutMs} ms`))),
        timeoutMs,
      );
      cleanups.push(() => clearTimeout(timer));
    }
    // A grandchild holding stdout open would keep the request pending after the agent died.
    void proc.exited.then(() => {
      if (settled) return;
      const grace = setTimeout(
        () => finish(() => reject(new StepFailure("broken", "the agent exited"))),
        EXIT_SETTLE_MS,
      );
      cleanups.push(() => clearTimeout(grace));
    });
  });
}

function classify(err: unknown): StepFailure {
  if (err instanceof RequestError) return new StepFailure("error", err.message, err);
  return new StepFailure("broken", err instanceof Error ? err.message : String(err), err);
}
