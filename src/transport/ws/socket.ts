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
import type { Caller } from "../../domain/tenants.js";
import { callerForLog, callerOf, describeCaller } from "../http/auth.js";
import type { Socket } from "node:net";
import { deflateRawSync, constants as zlibConstants } from "node:zlib";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import type { Config } from "../../config.js";
import type { ClientEvent, Subscriber } from "../../stream/session-feeds.js";
import { errors } from "../../errors.js";
import { callCount, handleJsonRpc, parseError, refuseAll } from "../rpc/jsonrpc.js";
import { notReady } from "../readiness.js";
import type { Services } from "../services.js";
import type { ClockTimer } from "../../clock.js";

export const CLOSE_TOO_SLOW = 4008;
/** The one subprotocol the socket accepts when a client offers any (docs/api.md, Streaming). */
export const WS_SUBPROTOCOL = "mooring.v1";
export const CLOSE_GOING_AWAY = 1001;

export interface SocketHub {
  readonly count: number;
  /** JSON-RPC calls received on any socket and not answered yet (closed sockets included). */
  readonly callsInFlight: number;
  /** JSON-RPC responses peers sent (to no call of the gateway's), dropped unanswered. */
  readonly strayResponses: number;
  closeAll(code: number, reason: string): void;
}

export function registerSocketRoute(app: FastifyInstance, s: Services, config: Config, log: Logger): SocketHub {
  const sockets = new Set<WebSocket>();
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
      sockets.add(socket);
      const caller = callerOf(req) ?? s.tenants.openCaller;
      const connection = new SocketConnection(
        socket,
        req.socket,
        s,
        config,
        // What the socket logs names its tenant (docs/tenants.md).
        log.child(callerForLog(caller)),
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
    closeAll(code, reason) {
      // A socket already closing (a 4008 waiting for a reader that may never read) is cut: a
      // shutdown does not wait out its 30 s closing handshake.
      for (const socket of sockets) {
        if (socket.readyState === socket.CLOSING) socket.terminate();
        else socket.close(code, reason);
      }
    },
  };
}

/** A JSON-RPC response: no method, a result or an error (what a peer answers, not asks). */
function isResponse(m: unknown): boolean {
  return (
    typeof m === "object" &&
    m !== null &&
    !Array.isArray(m) &&
    !("method" in m) &&
    ("result" in m || "error" in m)
  );
}

/** How many responses a message is or holds (a batch may mix them with calls). */
function strayResponses(message: unknown): number {
  if (Array.isArray(message)) return message.filter(isResponse).length;
  return isResponse(message) ? 1 : 0;
}

/** The message without its responses; null when nothing else is left. */
function withoutResponses(message: unknown): unknown {
  if (!Array.isArray(message)) return isResponse(message) ? null : message;
  const calls = message.filter((m) => !isResponse(m));
  return calls.length > 0 ? calls : null;
}

/** A delivered run's frame, keyed by its first event object (runs share the feed's event objects). */
interface Frame {
  last: ClientEvent;
  text: string;
  /** Its permessage-deflate payload, made on first use; null when sent uncompressed. */
  deflated?: Buffer | null;
}
const serialized = new WeakMap<ClientEvent, Frame>();

/** As the threshold and level in http/app.ts: frames below it go out uncompressed. */
const DEFLATE_THRESHOLD = 256;
const DEFLATE_LEVEL = 6;
/**
 * Frames up to this size are compressed here, synchronously, once (and then need no zlib stream
 * per connection: an idle connection stays small); larger ones (a replay page) go through `ws`,
 * which compresses off the main thread.
 */
const DEFLATE_HERE_MAX = 64 * 1024;

function deflate(text: string): Buffer | null {
  const raw = Buffer.from(text);
  if (raw.length < DEFLATE_THRESHOLD || raw.length > DEFLATE_HERE_MAX) return null;
  const out = deflateRawSync(raw, { level: DEFLATE_LEVEL, finishFlush: zlibConstants.Z_SYNC_FLUSH });
  return out.subarray(0, out.length - 4);
}

/**
 * The frame's compressed payload (RFC 7692: raw deflate, sync flush, the final 00 00 ff ff cut),
 * made once for all its subscribers. With no context takeover (http/app.ts) every connection
 * compresses each message from a fresh state, so the result is what `ws` would make per socket.
 */
function deflatedOf(frame: Frame): Buffer | null {
  if (frame.deflated === undefined) frame.deflated = deflate(frame.text);
  return frame.deflated;
}

/**
 * Sends an already compressed text frame on `socket` when it can take it as is: permessage-deflate
 * with no server context takeover and the full window, and nothing queued before it in the sender
 * (order). Otherwise false, and the caller sends the text the usual way (ws compresses it). Uses
 * `ws` 8 internals (the sender's frame writer), guarded: when they are not as expected, false.
 */
function sendDeflated(socket: WebSocket, payload: Buffer): boolean {
  const internals = socket as unknown as {
    _extensions?: Record<string, { params?: Record<string, unknown> }>;
    _sender?: {
      _state?: number;
      _queue?: unknown[];
      sendFrame?: (list: Buffer[], cb?: () => void) => void;
      constructor: { frame?: (data: Buffer, options: Record<string, unknown>) => Buffer[] };
    };
  };
  const params = internals._extensions?.["permessage-deflate"]?.params;
  if (params?.server_no_context_takeover !== true) return false;
  if (typeof params.server_max_window_bits === "number" && params.server_max_window_bits < 15) return false;
  const sender = internals._sender;
  if (sender?._state !== 0 || (sender._queue?.length ?? 1) > 0) return false;
  const Sender = sender.constructor;
  if (typeof Sender.frame !== "function" || typeof sender.sendFrame !== "function") return false;
  sender.sendFrame(Sender.frame(payload, { fin: true, rsv1: true, opcode: 1, mask: false, readOnly: true }));
  return true;
}

/**
 * Frees the zlib stream of a connection that sent nothing for a ping interval. Safe only because
 * no context takeover is negotiated (http/app.ts): every message is compressed from a fresh
 * state, and `ws` creates the stream again for the next one. Reaches into `ws` 8 internals,
 * guarded: when they are not as expected it does nothing. Only when no compression is running
 * (the sender is idle).
 */
function releaseIdleDeflate(socket: WebSocket): void {
  const internals = socket as unknown as {
    _extensions?: Record<string, { _deflate?: { close(): void } | null; params?: Record<string, unknown> }>;
    _sender?: { _state?: number };
  };
  const deflate = internals._extensions?.["permessage-deflate"];
  if (!deflate?._deflate || deflate.params?.server_no_context_takeover !== true) return;
  if (internals._sender?._state !== 0 || socket.bufferedAmount > 0) return;
  deflate._deflate.close();
  deflate._deflate = null;
}

/** How often a paused connection looks whether its backlog drained. */
const DRAIN_CHECK_MS = 20;

interface Subscription {
  unsubscribe: () => void;
  /** What the session's feed delivers to; paused with the connection. */
  subscriber: Subscriber;
  /** Events wait here until the subscribe answer has been sent, so the answer always comes first. */
  held: ClientEvent[][] | null;
  /** Why its feed ended (`session_purged`), once it has. */
  ended?: string;
}

class SocketConnection {
  private readonly subscriptions = new Map<string, Subscription>();
  /** Calls of this socket not answered yet (bounded by MOORING_WS_MAX_IN_FLIGHT). */
  private inFlight = 0;
  private lastHeard: number;
  private readonly pingTimer: ClockTimer;
  private closed = false;
  /** Set while the connection takes no events: its deflate backlog is over the bound. */
  private drainTimer: ClockTimer | null = null;
  /** Whether anything was sent since the last ping tick (a quiet connection frees its zlib stream). */
  private sentSinceTick = true;

  constructor(
    private readonly socket: WebSocket,
    /** The TCP connection under the socket: what its write buffer holds, the peer has not read. */
    private readonly tcp: Socket,
    private readonly s: Services,
    private readonly config: Config,
    private readonly log: Logger,
    /** The hub's count of calls in flight on all sockets. */
    private readonly calls: { inFlight: number },
    /** Who connected (token label and peer, never the token), for logs of what it does. */
    private readonly who: string,
    /** The tenant the connecting token stands for; every call on the socket acts for it. */
    private readonly caller: Caller,
    /** The hub's count of stray responses dropped on all sockets. */
    private readonly strays: { count: number },
  ) {
    // Only what the contract names: host and pid tell a page nothing it needs (and an attacker much).
    const { instanceId, bootId, version } = s.identity;
    this.send({ jsonrpc: "2.0", method: "hello", params: { instanceId, bootId, version, pingMs: config.wsPingMs } });
    socket.on("message", (data, isBinary) => void this.onMessage(data.toString(), isBinary));
    const clock = s.clock;
    this.lastHeard = clock.now();
    socket.on("pong", () => {
      this.lastHeard = clock.now();
    });
    this.pingTimer = clock.setInterval(() => {
      if (clock.now() - this.lastHeard > 2 * config.wsPingMs) {
        this.log.debug("dropping a silent websocket peer");
        socket.terminate();
        return;
      }
      if (!this.sentSinceTick) releaseIdleDeflate(socket);
      this.sentSinceTick = false;
      socket.ping();
    }, config.wsPingMs);
    this.pingTimer.unref();
  }

  private async onMessage(text: string, isBinary: boolean): Promise<void> {
    this.lastHeard = this.s.clock.now();
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
    // A peer's JSON-RPC responses (to calls the gateway never made) are dropped, not answered
    // with errors: two peers answering each other's errors would bounce forever. Counted.
    const strays = strayResponses(message);
    if (strays > 0) {
      this.strays.count += strays;
      message = withoutResponses(message);
      if (message === null) return;
    }
    // A client may not queue unbounded work: past the cap the whole message is refused, unrun.
    const calls = callCount(message, { maxBatch: this.config.rpcMaxBatch });
    if (calls > 0 && this.inFlight + calls > this.config.wsMaxInFlight) {
      const busy = errors.socketCallsInFlight(this.inFlight, this.config.wsMaxInFlight);
      const data = { code: busy.code, reason: busy.reason, retryAfterSeconds: busy.retryAfterSeconds };
      const refusal = refuseAll(message, busy.rpcCode, busy.message, data);
      if (refusal !== null) this.send(refusal);
      return;
    }
    this.inFlight += calls;
    this.calls.inFlight += calls;
    try {
      await this.answer(message);
    } finally {
      this.inFlight -= calls;
      this.calls.inFlight -= calls;
    }
  }

  private async answer(message: unknown): Promise<void> {
    const released: string[] = [];
    const answer = await handleJsonRpc(
      message,
      this.s,
      {
        subscribe: async (sessionId, afterSeq, batch) => {
          const result = await this.subscribe(sessionId, afterSeq ?? 0, batch);
          released.push(sessionId);
          return result;
        },
        unsubscribe: async (sessionId) => {
          const existed = this.subscriptions.has(sessionId);
          this.subscriptions.get(sessionId)?.unsubscribe();
          this.subscriptions.delete(sessionId);
          return { sessionId, unsubscribed: existed };
        },
        who: this.who,
        caller: this.caller,
      },
      this.log,
      { maxBatch: this.config.rpcMaxBatch },
    );
    if (answer !== null) this.send(answer);
    for (const sessionId of released) this.release(sessionId);
  }

  private async subscribe(sessionId: string, afterSeq: number, batch: boolean) {
    const opened = await this.s.events.openSubscription(sessionId, afterSeq, this.caller.tenant);
    // The socket closed while the subscription was being opened: nobody would ever end it.
    if (this.closed) return { sessionId, headSeq: opened.headSeq, session: opened.session };
    this.subscriptions.get(sessionId)?.unsubscribe();
    const subscriber: Subscriber = {
      cursor: afterSeq,
      paused: this.drainTimer !== null,
      deliver: (events) => {
        // `batch: false`: a run goes out as one notification per frame (docs/api.md, Streaming).
        const frames = batch ? [events] : events.map((e) => [e]);
        if (subscription.held) subscription.held.push(...frames);
        else for (const frame of frames) this.sendEvents(frame);
      },
      // The session was purged: the subscription ends with a last notification, after every event
      // it was given (held ones included); the socket and its other subscriptions go on.
      end: (reason) => {
        if (this.subscriptions.get(sessionId) !== subscription) return;
        subscription.ended = `session_${reason}`;
        // Still before its subscribe answer: `release` sends the end after the answer and the events.
        if (!subscription.held) this.endSubscription(sessionId);
      },
    };
    const subscription: Subscription = { unsubscribe: () => {}, subscriber, held: [] };
    subscription.unsubscribe = this.s.feeds.subscribe(sessionId, opened.headSeq, subscriber);
    this.subscriptions.set(sessionId, subscription);
    return { sessionId, headSeq: opened.headSeq, session: opened.session };
  }

  private release(sessionId: string): void {
    const subscription = this.subscriptions.get(sessionId);
    if (!subscription?.held) return;
    const held = subscription.held;
    subscription.held = null;
    for (const events of held) this.sendEvents(events);
    if (subscription.ended) this.endSubscription(sessionId);
  }

  /** A subscription whose session was purged: forgotten, and the client told (`events.ended`). */
  private endSubscription(sessionId: string): void {
    const subscription = this.subscriptions.get(sessionId);
    if (!subscription?.ended) return;
    this.subscriptions.delete(sessionId);
    this.send({ jsonrpc: "2.0", method: "events.ended", params: { sessionId, reason: subscription.ended } });
  }

  /**
   * One frame per delivered run: a single notification, or a JSON-RPC batch of them. Every
   * subscriber of a session usually gets the same run (the same event objects): it is serialized
   * once, and compressed once, not once per subscriber (fan-out to 1000 sockets; compressing per
   * socket made the last of 1000 subscribers wait for 1000 zlib runs; bench/results/history.md).
   */
  private sendEvents(events: ClientEvent[]): void {
    let frame = serialized.get(events[0]);
    if (!frame || frame.last !== events[events.length - 1]) {
      const notes = events.map((params) => ({ jsonrpc: "2.0", method: "event", params }));
      frame = { last: events[events.length - 1], text: JSON.stringify(notes.length === 1 ? notes[0] : notes) };
      serialized.set(events[0], frame);
    }
    if (!this.writable()) return;
    const deflated = deflatedOf(frame);
    if (!deflated || !sendDeflated(this.socket, deflated)) this.socket.send(frame.text);
    this.afterSend();
  }

  private send(message: unknown): void {
    this.sendText(JSON.stringify(message));
  }

  /** Open and keeping up; a peer too slow to read is closed here (4008). */
  private writable(): boolean {
    if (this.closed || this.socket.readyState !== this.socket.OPEN) return false;
    if (this.tcp.writableLength > this.config.wsMaxBufferedBytes) {
      this.closeTooSlow();
      return false;
    }
    return true;
  }

  /** Compressed here when it fits (see DEFLATE_HERE_MAX), else by `ws`. */
  private sendText(text: string): void {
    if (!this.writable()) return;
    const deflated = deflate(text);
    if (!deflated || !sendDeflated(this.socket, deflated)) this.socket.send(text);
    this.afterSend();
  }

  private afterSend(): void {
    this.sentSinceTick = true;
    if (this.socket.bufferedAmount > this.config.wsMaxBufferedBytes) this.pause();
  }

  /** Take no more events until the backlog drains (or the peer turns out not to read at all). */
  private pause(): void {
    if (this.drainTimer) return;
    for (const { subscriber } of this.subscriptions.values()) subscriber.paused = true;
    this.drainTimer = this.s.clock.setInterval(() => {
      if (this.closed || this.socket.readyState !== this.socket.OPEN) return this.stopDrainCheck();
      if (this.tcp.writableLength > this.config.wsMaxBufferedBytes) return this.closeTooSlow();
      if (this.socket.bufferedAmount > this.config.wsMaxBufferedBytes / 2) return;
      this.stopDrainCheck();
      for (const [sessionId, { subscriber }] of this.subscriptions) {
        subscriber.paused = false;
        this.s.feeds.wake(sessionId);
      }
    }, DRAIN_CHECK_MS);
    this.drainTimer.unref();
  }

  private stopDrainCheck(): void {
    if (this.drainTimer) this.s.clock.clearInterval(this.drainTimer);
    this.drainTimer = null;
  }

  private closeTooSlow(): void {
    this.log.info(
      { buffered: this.tcp.writableLength, queued: this.socket.bufferedAmount },
      "closing a websocket client too slow to read (4008)",
    );
    this.closed = true;
    this.dispose();
    // The close frame goes out behind what the peer has not read yet; a reader that catches up
    // finds it there. `ws` cuts the connection if the closing handshake is not done in 30 s (its
    // close timeout), so a peer that never reads again is held that long, with what it had not
    // read, and no longer. (Cutting it a second later, as before, made it see 1006, not 4008.)
    this.socket.close(CLOSE_TOO_SLOW, "client too slow; resubscribe with your last seq");
  }

  dispose(): void {
    this.closed = true;
    this.s.clock.clearInterval(this.pingTimer);
    this.stopDrainCheck();
    for (const subscription of this.subscriptions.values()) subscription.unsubscribe();
    this.subscriptions.clear();
  }
}
