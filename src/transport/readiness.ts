/**
 * The one readiness check of every transport: REST routes under /v1, POST /v1/rpc, each JSON-RPC
 * call (over HTTP or the socket) and the WebSocket upgrade refuse with the same NOT_READY, in the
 * same words (errors.ts), for the same cause: starting, shutting down, or the database away.
 */
import { errors, type MooringError } from "../errors.js";
import type { Services } from "./services.js";

/** The NOT_READY refusal while the instance is not ready; null when it is. */
export function notReady(services: Pick<Services, "readiness">): MooringError | null {
  const readiness = services.readiness();
  return readiness.ready ? null : errors.notReady(readiness.cause);
}
