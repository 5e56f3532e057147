/**
 * One WebSocket connection of `WS /v1/ws`: its JSON-RPC calls (bounded in flight), its
 * subscriptions (events held until the subscribe answer has gone out), the ping that drops a
 * silent peer, and the two bounds on what it buffers (socket.ts says which is which).
 */
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import type { ClockTimer } from "../../clock.js";
import type { Config } from "../../config.js";
import type { Caller } from "../../domain/tenants.js";
import { errors } from "../../errors.js";
import type { ClientEvent, Subscriber } from "../../stream/session-feeds.js";
import { callCount, handleJsonRpc, parseError, refuseAll } from "../rpc/jsonrpc.js";
import type { Services } from "../services.js";
import { deflate, deflatedOf, releaseIdleDeflate, sendDeflated, serialized } from "./deflate-frames.js";
import { CLOSE_TOO_SLOW } from "./socket-constants.js";

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

export class SocketConnection {
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
    this.send({
      jsonrpc: "2.0",
      method: "hello",
      params: { instanceId, bootId, version, pingMs: config.wsPingMs },
    });
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
      this.send({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600, message: "Invalid Request: send text frames" },
      });
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
      frame = {
        last: events[events.length - 1],
        text: JSON.stringify(notes.length === 1 ? notes[0] : notes),
      };
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
