/**
 * `WS /v1/ws`: every JSON-RPC method plus `events.subscribe` / `events.unsubscribe`, several
 * subscriptions per socket. The server says `hello` first, pings every MOORING_WS_PING_MS, drops a
 * peer silent for two intervals, and closes a client that stops reading with 4008 before its
 * buffer can grow the gateway's memory.
 *
 * Two buffers are bounded by MOORING_WS_MAX_BUFFERED_BYTES, and they are told apart:
 * - bytes the kernel would not take (the TCP socket's own write buffer): the peer is not reading
 *   them. Past the bound it is too slow: closed with 4008, it resumes with its last seq;
 * - frames still queued for permessage-deflate: the gateway's own backlog (a replay hands over a
 *   500-event page per database read, faster than zlib may compress), which drains whoever the
 *   peer is. Past the bound the connection takes no more events until it has drained to half, and
 *   its subscriptions then go on from their cursors (the events wait in the log, not in memory).
 * Counting the second like the first closed readers that kept up perfectly well.
 */
import { ServerResponse } from "node:http";
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import type { Config } from "../../config.js";
import type { Caller } from "../../domain/tenants.js";
import { errors } from "../../errors.js";
import type { Service } from "../../lib/service.js";
import { callerForLog, callerOf, describeCaller } from "../http/auth.js";
import { notReady } from "../readiness.js";
import type { Services } from "../services.js";
import { SocketConnection } from "./connection.js";
import type { SocketErrorLog } from "./protocol-errors.js";
import { CLOSE_GOING_AWAY } from "./socket-constants.js";

export { CLOSE_GOING_AWAY, CLOSE_TOO_SLOW, WS_SUBPROTOCOL } from "./socket-constants.js";

/** The open sockets; `stop` closes them all (1001, going away), for the HTTP server's stop. */
export interface SocketHub extends Service {
  readonly count: number;
  /** JSON-RPC calls received on any socket and not answered yet (closed sockets included). */
  readonly callsInFlight: number;
  /** JSON-RPC responses peers sent (to no call of the gateway's), dropped unanswered. */
  readonly strayResponses: number;
}

/** An error raised on a client's socket: logged (throttled when the client caused it), the socket cut. */
export function onSocketError(
  socketErrors: SocketErrorLog,
  log: FastifyBaseLogger,
  error: Error,
  socket: WebSocket,
): void {
  socketErrors.report(log, error);
  socket.terminate();
}

/**
 * Lets the upgrade's HTTP request and reply go once the socket is open. @fastify/websocket leaves
 * them reachable for the connection's life: its raw response stays attached to the TCP socket
 * (`socket._httpMessage`, never finished: the reply is hijacked), and its listener for the
 * socket's errors is a closure over the request and the reply. Together with the request's
 * headers, logger and stream state that was about 3 KB of heap per idle connection (heap
 * snapshots of 1000 idle subscribers, bench/results/notes.md). The errors go to the same handler,
 * logged by the connection's logger (the request's was one more logger per socket).
 */
export function releaseUpgrade(
  socket: WebSocket,
  req: FastifyRequest,
  socketErrors: SocketErrorLog,
  log: FastifyBaseLogger,
): void {
  const tcp = req.socket as typeof req.socket & { _httpMessage?: unknown };
  const response = tcp._httpMessage;
  if (response instanceof ServerResponse && response.socket === tcp) response.detachSocket(tcp);
  // At this point the plugin's is the socket's only error listener (ws adds none of its own).
  for (const listener of socket.listeners("error")) socket.off("error", listener as () => void);
  socket.on("error", (error) => onSocketError(socketErrors, log, error, socket));
}

export function registerSocketRoute(
  app: FastifyInstance,
  s: Services,
  config: Config,
  log: Logger,
  socketErrors: SocketErrorLog,
): SocketHub {
  const sockets = new Set<WebSocket>();
  /** One child logger per tenant, shared by its sockets (a child per socket cost ~300 bytes each). */
  const tenantLogs = new WeakMap<Caller["tenant"], Logger>();
  const calls = { inFlight: 0 };
  const strays = { count: 0 };
  app.register(async (scope) => {
    scope.addHook("onRequest", async () => {
      const refusal = notReady(s);
      if (refusal) throw refusal;
    });
    scope.route({
      method: "GET",
      url: "/v1/ws",
      schema: { hide: true },
      // A plain GET (no upgrade) is told what the route takes, in the one error shape.
      handler: async (_req, reply) => {
        reply.header("upgrade", "websocket");
        throw errors.upgradeRequired();
      },
      wsHandler: (socket, req) => {
        const caller = callerOf(req) ?? s.tenants.openCaller;
        let tenantLog = tenantLogs.get(caller.tenant);
        if (!tenantLog) {
          // What the socket logs names its tenant (docs/tenants.md).
          tenantLog = log.child(callerForLog(caller));
          tenantLogs.set(caller.tenant, tenantLog);
        }
        releaseUpgrade(socket, req, socketErrors, tenantLog);
        sockets.add(socket);
        const connection = new SocketConnection(
          socket,
          req.socket,
          s,
          config,
          tenantLog,
          calls,
          `ws ${describeCaller(req)}`,
          caller,
          strays,
        );
        socket.on("close", () => {
          sockets.delete(socket);
          connection.dispose();
        });
      },
    });
  });
  return {
    get count() {
      return sockets.size;
    },
    get callsInFlight() {
      return calls.inFlight;
    },
    get strayResponses() {
      return strays.count;
    },
    name: "websockets",
    start() {},
    async stop() {
      // A socket already closing (a 4008 waiting for a reader that may never read) is cut: a
      // shutdown does not wait out its 30 s closing handshake.
      for (const socket of sockets) {
        if (socket.readyState === socket.CLOSING) socket.terminate();
        else socket.close(CLOSE_GOING_AWAY, "gateway shutting down");
      }
    },
  };
}
