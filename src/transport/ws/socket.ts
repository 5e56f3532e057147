/**
 * `WS /v1/ws`: every JSON-RPC method plus `events.subscribe` / `events.unsubscribe`, several
 * subscriptions per socket. The server says `hello` first, pings every MOORING_WS_PING_MS, drops a
 * peer silent for two intervals, and closes a client that stops reading with 4008 before its
 * buffer can grow the gateway's memory.
 */
import type { Socket } from "node:net";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import type { Config } from "../../config.js";
import type { ClientEvent } from "../../stream/session-feeds.js";
import { handleJsonRpc, parseError } from "../rpc/jsonrpc.js";
import type { Services } from "../services.js";

export const CLOSE_TOO_SLOW = 4008;
export const CLOSE_GOING_AWAY = 1001;

export interface SocketHub {
  readonly count: number;
  closeAll(code: number, reason: string): void;
}

export function registerSocketRoute(app: FastifyInstance, s: Services, config: Config, log: Logger): SocketHub {
  const sockets = new Set<WebSocket>();
  app.register(async (scope) => {
    scope.addHook("onRequest", async (_req, reply) => {
      const r = s.readiness();
      if (!r.ready) {
        return reply.status(503).send({ error: { code: "NOT_READY", message: r.reason ?? "The gateway is starting." } });
      }
    });
    scope.get("/v1/ws", { websocket: true, schema: { hide: true } }, (socket, req) => {
      sockets.add(socket);
      const connection = new SocketConnection(socket, req.socket, s, config, log);
      socket.on("close", () => {
        sockets.delete(socket);
        connection.dispose();
      });
    });
  });
  return {
    get count() {
      return sockets.size;
    },
    closeAll(code, reason) {
      for (const socket of sockets) socket.close(code, reason);
    },
  };
}

interface Subscription {
  unsubscribe: () => void;
  /** Events wait here until the subscribe answer has been sent, so the answer always comes first. */
  held: ClientEvent[][] | null;
}

class SocketConnection {
  private readonly subscriptions = new Map<string, Subscription>();
  private lastHeard = Date.now();
  private readonly pingTimer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly socket: WebSocket,
    /** The TCP connection under the socket: what it holds unwritten is what the peer has not read. */
    private readonly tcp: Socket,
    private readonly s: Services,
    private readonly config: Config,
    private readonly log: Logger,
  ) {
    const { instanceId, bootId, version } = s.identity;
    this.send({ jsonrpc: "2.0", method: "hello", params: { instanceId, bootId, version } });
    socket.on("message", (data, isBinary) => void this.onMessage(data.toString(), isBinary));
    socket.on("pong", () => {
      this.lastHeard = Date.now();
    });
    this.pingTimer = setInterval(() => {
      if (Date.now() - this.lastHeard > 2 * config.wsPingMs) {
        this.log.debug("dropping a silent websocket peer");
        socket.terminate();
        return;
      }
      socket.ping();
    }, config.wsPingMs);
    this.pingTimer.unref();
  }

  private async onMessage(text: string, isBinary: boolean): Promise<void> {
    this.lastHeard = Date.now();
    if (isBinary) {
      this.send({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request: send text frames" } });
      return;
    }
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      this.send(parseError());
      return;
    }
    const released: string[] = [];
    const answer = await handleJsonRpc(
      message,
      this.s,
      {
        subscribe: async (sessionId, afterSeq) => {
          const result = await this.subscribe(sessionId, afterSeq ?? 0);
          released.push(sessionId);
          return result;
        },
        unsubscribe: async (sessionId) => {
          const existed = this.subscriptions.has(sessionId);
          this.subscriptions.get(sessionId)?.unsubscribe();
          this.subscriptions.delete(sessionId);
          return { sessionId, unsubscribed: existed };
        },
      },
      this.log,
    );
    if (answer !== null) this.send(answer);
    for (const sessionId of released) this.release(sessionId);
  }

  private async subscribe(sessionId: string, afterSeq: number) {
    const opened = await this.s.events.openSubscription(sessionId, afterSeq);
    this.subscriptions.get(sessionId)?.unsubscribe();
    const subscription: Subscription = { unsubscribe: () => {}, held: [] };
    subscription.unsubscribe = this.s.feeds.subscribe(sessionId, opened.headSeq, {
      cursor: afterSeq,
      deliver: (events) => {
        if (subscription.held) subscription.held.push(events);
        else this.sendEvents(events);
      },
    });
    this.subscriptions.set(sessionId, subscription);
    return { sessionId, headSeq: opened.headSeq, session: opened.session };
  }

  private release(sessionId: string): void {
    const subscription = this.subscriptions.get(sessionId);
    if (!subscription?.held) return;
    const held = subscription.held;
    subscription.held = null;
    for (const events of held) this.sendEvents(events);
  }

  /** One frame per delivered run: a single notification, or a JSON-RPC batch of them. */
  private sendEvents(events: ClientEvent[]): void {
    const notes = events.map((params) => ({ jsonrpc: "2.0", method: "event", params }));
    this.send(notes.length === 1 ? notes[0] : notes);
  }

  private send(message: unknown): void {
    if (this.closed || this.socket.readyState !== this.socket.OPEN) return;
    // Bytes the kernel would not take: the peer is not reading them. (`bufferedAmount` also counts
    // frames still queued for permessage-deflate, i.e. the gateway's own burst of a replay page,
    // which drains at compression speed whoever the peer is; counting it closed fast readers.)
    const unread = this.tcp.writableLength;
    if (unread > this.config.wsMaxBufferedBytes) {
      this.log.info({ buffered: unread }, "closing a websocket client too slow to read (4008)");
      this.closed = true;
      this.dispose();
      this.socket.close(CLOSE_TOO_SLOW, "client too slow; resubscribe with your last seq");
      // The close frame queues behind what the peer has not read yet: a slow peer that reads on
      // sees it (and resumes with its last seq); one silent for two ping intervals is dropped,
      // as any silent peer is. Until then no more is queued for it, so its memory stays bounded.
      setTimeout(() => this.socket.terminate(), 2 * this.config.wsPingMs).unref();
      return;
    }
    this.socket.send(JSON.stringify(message));
  }

  dispose(): void {
    clearInterval(this.pingTimer);
    for (const subscription of this.subscriptions.values()) subscription.unsubscribe();
    this.subscriptions.clear();
  }
}
