/**
 * Retrying work that failed for a reason that may pass (the database away, a deadlock), with
 * exponential backoff. Every loop that retries uses one of the named policies below, so the
 * constants live in one place and say what they are for.
 */
import { type Clock, realClock, sleep } from "../clock.js";

export interface RetryPolicy {
  /** The first delay; each next one doubles, up to `maxMs`. */
  baseMs: number;
  maxMs: number;
}

export const retryPolicies = {
  /** Startup waiting for the database (gateway.ts): patient, the database may take a while. */
  startup: { baseMs: 200, maxMs: 5000 },
  /** The LISTEN connection's first listen (stream/pg-listener.ts). */
  listen: { baseMs: 100, maxMs: 5000 },
  /** An event-log flush (stream/event-lane.ts): events and settlements wait behind it, so short. */
  flush: { baseMs: 50, maxMs: 2000 },
  /** A settlement of its own (domain/turn-run.ts). */
  settle: { baseMs: 100, maxMs: 2000 },
  /** A read a turn needs before it can start (domain/worker.ts). */
  read: { baseMs: 100, maxMs: 1000 },
} as const satisfies Record<string, RetryPolicy>;

/** The delay before retry number `attempt` (0-based). */
export function retryDelay(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.baseMs * 2 ** attempt, policy.maxMs);
}

export interface RetryOptions {
  /** Whether to try again after this failure (attempt is 0-based); false rethrows it. */
  retryable: (err: unknown, attempt: number) => boolean;
  /** Told before each wait (for a log line). */
  onRetry?: (err: unknown, delayMs: number, attempt: number) => void;
  /** Whose time the waits are on (the gateway's Clock); real time when not given. */
  clock?: Clock;
}

/** Run `work` until it succeeds or a failure is not retryable (then that failure is thrown). */
export async function retrying<T>(policy: RetryPolicy, work: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work(attempt);
    } catch (err) {
      if (!options.retryable(err, attempt)) throw err;
      const delay = retryDelay(policy, attempt);
      options.onRetry?.(err, delay, attempt);
      await sleep(options.clock ?? realClock, delay);
    }
  }
}
