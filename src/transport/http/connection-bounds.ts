/**
 * Connection bounds (docs/security.md): a flood of unfinished requests must not take every file
 * descriptor, so `/healthz` keeps answering. Timeouts close slow and idle connections; the server
 * holds at most MOORING_MAX_CONNECTIONS; and one address may hold at most
 * MOORING_MAX_PENDING_PER_ADDRESS connections that have not sent a whole request yet (no token is
 * known before that). A new one past that closes the address's oldest pending one rather than being
 * refused itself, so a real request (a health probe) from a flooding address still gets through.
 *
 * At stop, the connections that have sent nothing yet are closed. Node's server.close() ends only
 * the idle keep-alive ones: a connection still waiting for its first request counts as busy (its
 * headers timeout runs from the accept), and once the server closes, that timeout no longer runs,
 * so one a client opened ahead of need (fetch's pool opens one as an SSE stream it aborted goes)
 * held the stop until the client dropped it, seconds later. It has no request to answer.
 */
import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { Config } from "../../config.js";

type Bounds = Pick<
  Config,
  "headersTimeoutMs" | "requestTimeoutMs" | "keepAliveTimeoutMs" | "maxConnections" | "maxPendingPerAddress"
>;

/** Fastify's own options for the timeouts (it applies them to its Node server). */
export function serverTimeouts(config: Bounds) {
  return { requestTimeout: config.requestTimeoutMs, keepAliveTimeout: config.keepAliveTimeoutMs };
}

/** What the app's stop does with the connections these bounds follow. */
export interface ConnectionBounds {
  /** Close every connection that has not sent a byte: no request of it is in flight. */
  closeSilent(): void;
}

export function boundConnections(server: Server, config: Bounds): ConnectionBounds {
  server.headersTimeout = Math.min(config.headersTimeoutMs, config.requestTimeoutMs);
  server.maxConnections = config.maxConnections;
  // Per address, the connections without a whole request yet, oldest first.
  const pending = new Map<string, Set<Socket>>();
  // Kept from the start: a closed socket no longer knows its address.
  const addressOf = new WeakMap<Socket, string>();
  const settle = (socket: Socket) => {
    const address = addressOf.get(socket) ?? "";
    const set = pending.get(address);
    if (!set?.delete(socket)) return;
    if (set.size === 0) pending.delete(address);
  };
  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    addressOf.set(socket, address);
    let set = pending.get(address);
    if (!set) {
      set = new Set();
      pending.set(address, set);
    }
    set.add(socket);
    if (set.size > config.maxPendingPerAddress) {
      const oldest = set.values().next().value as Socket;
      settle(oldest);
      oldest.destroy();
    }
    socket.once("close", () => settle(socket));
  });
  // A whole request's headers arrived: the connection is no longer an unfinished one.
  const finished = (req: { socket: Socket }) => settle(req.socket);
  server.on("request", finished);
  server.on("upgrade", finished);
  return {
    closeSilent() {
      for (const set of [...pending.values()])
        for (const socket of [...set]) if (socket.bytesRead === 0) socket.destroy();
    },
  };
}
