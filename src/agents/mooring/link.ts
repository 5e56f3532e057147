/**
 * The link to an upstream gateway: a client SDK instance with the entry's reconnect backoff, a
 * watch on how long the upstream has been silent, and the retry rules of a chained turn's calls
 * (docs/agents.md, Chained gateways):
 *
 * - unreachable, 503, 502/504: retried with full-jitter backoff (the entry's `reconnectBaseMs`,
 *   doubling to `reconnectMaxMs`) until MOORING_UPSTREAM_SILENT_MS without contact → UPSTREAM_LOST;
 * - 429 (the upstream gate is full): retried after its Retry-After, the wait reported (`onBusy`),
 *   until the downstream turn stops (its deadline aborts the signal); a 429 is contact;
 * - 401/403 (but a workspace refusal): never retried → UPSTREAM_AUTH;
 * - any other refusal → UPSTREAM_FAILED with the upstream code as the reason.
 *
 * The token is handed to the SDK only; nothing here logs a request's headers.
 */
import { backoffMs } from "../../client/clock.js";
import { type Clock, realClock, sleep } from "../../clock.js";
import { MooringClient } from "../../client/client.js";
import { AbortError, ConnectionError, MooringApiError } from "../../client/errors.js";
import { upstreamLimitDefaults } from "../../config.js";
import { AgentFailure, type UpstreamLimits } from "../driver.js";
import type { UpstreamEntry } from "./entry.js";
import { boundedFetch, boundedWebSocket, LinkGuard } from "./limits.js";

/** How long one call may take before it counts as a failed attempt. */
const CALL_TIMEOUT_MS = 30_000;

/**
 * A client held to `limits` (limits.ts); an exceeded bound trips the guard `guard()` returns (the
 * current turn's).
 */
export function upstreamClient(
  entry: UpstreamEntry,
  limits: UpstreamLimits = upstreamLimitDefaults,
  guard: () => LinkGuard = () => new LinkGuard(),
): MooringClient {
  return new MooringClient({
    url: entry.url,
    token: entry.token?.reveal(),
    // This module retries by its own rules; the SDK's own retries would hide a 429 or a 401.
    readyTimeoutMs: 0,
    backoffBaseMs: entry.reconnectBaseMs,
    backoffMaxMs: entry.reconnectMaxMs,
    minPollIntervalMs: limits.pollMinMs,
    webSocket: boundedWebSocket(limits, guard),
    fetch: boundedFetch(limits, guard),
  });
}

/** When the upstream last answered, and whether a stream to it is up right now. */
export class SilenceWatch {
  private lastContact: number;
  private connected = false;

  constructor(
    readonly silentMs: number,
    /** The gateway's clock: a test steps it past the silence instead of waiting it out. */
    readonly clock: Clock = realClock,
  ) {
    this.lastContact = clock.now();
  }

  contact(): void {
    this.lastContact = this.clock.now();
  }

  setConnected(connected: boolean): void {
    if (connected || this.connected) this.contact();
    this.connected = connected;
  }

  /** Milliseconds left before the upstream counts as lost (never below 0). */
  remainingMs(): number {
    if (this.connected) this.contact();
    return Math.max(0, this.lastContact + this.silentMs - this.clock.now());
  }

  lostFailure(): AgentFailure {
    return new AgentFailure(
      "UPSTREAM_LOST",
      `The upstream gateway could not be reached for ${Math.round(this.silentMs / 1000)} s.`,
      "silent",
    );
  }
}

export const isUnreachable = (err: unknown): boolean =>
  err instanceof ConnectionError ||
  (err instanceof MooringApiError && (err.status === undefined || [502, 503, 504].includes(err.status)));

/** A refusal by the upstream as the turn's failure (null when the error is no refusal). */
export function refusalFailure(err: unknown): AgentFailure | null {
  if (!(err instanceof MooringApiError)) return null;
  if ((err.status === 401 || err.status === 403) && err.code !== "WORKSPACE_NOT_ALLOWED") {
    return new AgentFailure(
      "UPSTREAM_AUTH",
      `The upstream gateway refused this gateway's credentials (HTTP ${err.status} ${err.code}).`,
      err.code,
    );
  }
  return new AgentFailure(
    "UPSTREAM_FAILED",
    `The upstream gateway refused the request: ${err.message}`,
    err.code,
  );
}

export interface CallOptions {
  signal: AbortSignal;
  /** The turn's bounds: an exceeded one ends the call with its failure, unretried. */
  guard?: LinkGuard;
  watch: SilenceWatch;
  entry: UpstreamEntry;
  /** The upstream gate answered 429: the next try is at `retryAt`. */
  onBusy?: (retryAt: Date) => void;
}

/** Runs one upstream call by the rules above. Rejects with AgentFailure, or AbortError once `signal` aborts. */
export async function callUpstream<T>(
  call: (attemptSignal: AbortSignal) => Promise<T>,
  { signal, watch, entry, onBusy, guard }: CallOptions,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    if (guard?.failure) throw guard.failure;
    if (signal.aborted) throw new AbortError();
    const attemptStop = AbortSignal.any([signal, AbortSignal.timeout(CALL_TIMEOUT_MS)]);
    try {
      const answer = await call(attemptStop);
      watch.contact();
      return answer;
    } catch (err) {
      if (guard?.failure) throw guard.failure;
      if (signal.aborted) throw new AbortError();
      if (err instanceof MooringApiError && err.status === 429) {
        watch.contact();
        const waitMs = err.retryAfterMs ?? backoffMs(attempt, entry.reconnectBaseMs, entry.reconnectMaxMs);
        onBusy?.(new Date(watch.clock.now() + waitMs));
        await sleep(watch.clock, waitMs, signal, () => new AbortError());
        continue;
      }
      if (!isUnreachable(err) && !(err instanceof AbortError)) throw refusalFailure(err) ?? err;
      const left = watch.remainingMs();
      if (left <= 0) throw watch.lostFailure();
      const waitMs = Math.min(left, backoffMs(attempt, entry.reconnectBaseMs, entry.reconnectMaxMs));
      await sleep(watch.clock, waitMs, signal, () => new AbortError());
    }
  }
}
