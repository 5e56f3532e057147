/**
 * Errors a WebSocket client causes (an oversized frame, a malformed frame, a reset connection) are
 * the client's doing, not the gateway's: they are logged at warn level, at most one line per
 * interval, with how many were left out. Logging each at error level let any client flood the log
 * (one error line per oversized frame). Anything else on the socket is a gateway bug: error.
 */
import type { FastifyBaseLogger } from "fastify";

/** One warn line per this interval at most. */
const INTERVAL_MS = 10_000;

const clientCaused = (err: { code?: unknown }) =>
  typeof err.code === "string" &&
  (err.code.startsWith("WS_ERR_") || err.code === "ECONNRESET" || err.code === "EPIPE");

export class SocketErrorLog {
  private lastAt = Number.NEGATIVE_INFINITY;
  private suppressed = 0;

  constructor(private readonly intervalMs = INTERVAL_MS) {}

  /** Log `err` (raised on a client's socket), throttled when the client caused it. */
  report(log: FastifyBaseLogger, err: Error & { code?: unknown }): void {
    if (!clientCaused(err)) {
      log.error({ err }, "websocket handler failed");
      return;
    }
    const now = Date.now();
    if (now - this.lastAt < this.intervalMs) {
      this.suppressed++;
      return;
    }
    this.lastAt = now;
    const suppressed = this.suppressed;
    this.suppressed = 0;
    log.warn(
      { code: err.code, error: err.message, ...(suppressed > 0 ? { suppressed } : {}) },
      "websocket client broke the protocol; connection closed",
    );
  }
}
