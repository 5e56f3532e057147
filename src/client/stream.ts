/**
 * The two streaming transports of a run: `WS /v1/ws` (JSON-RPC `events.subscribe`) and Server-Sent
 * Events over fetch. Each takes events through its host's `accept` (cursor, order, buffer bound)
 * until the terminal event, and ends any other way by throwing `Disconnect` with its reason (or the
 * gateway's error, e.g. RESYNC_REQUIRED); the host's state machine decides what comes next.
 * A full buffer stops reading (unsubscribe, or end the request) until the consumer caught up.
 */
import type { RunBuffer } from "./buffer.js";
import { apiError, MooringApiError } from "./errors.js";
import type { Clock } from "./clock.js";
import type { FetchLike } from "./http.js";
import { errorOf } from "./http.js";
import { RpcSocket, type WebSocketFactory } from "./socket.js";
import { sseRecords } from "./sse.js";
import type { MooringEvent } from "./types.js";

/** What a stream needs of its follower's settings (client/follow.ts, FollowSettings). */
export interface StreamSettings {
  url: string;
  token?: string;
  fetch: FetchLike;
  clock: Clock;
  pingMs: number;
  webSocket?: WebSocketFactory;
  local?: LocalEventSource;
}

/**
 * A session's events from inside the gateway that serves them (its `/acp` connections' clients):
 * the same replay-then-live feed a socket's `events.subscribe` joins, with no socket in between.
 * `subscribe` checks what the socket's subscribe checks for this client's token and rejects with
 * the gateway's error (`{ code, message, status?, details? }`, e.g. RESYNC_REQUIRED) when it
 * refuses; then every event after `afterSeq` reaches `onEvents` in contiguous runs, until the
 * returned unsubscribe, or `onEnd` (the session was purged). Events are shared with the gateway's
 * other subscribers: read them, never change them.
 */
export interface LocalEventSource {
  /** The gateway's boot id (what its socket's hello says). */
  readonly bootId?: string;
  subscribe(
    sessionId: string,
    afterSeq: number,
    onEvents: (events: MooringEvent[]) => void,
    onEnd: (reason: string) => void,
  ): Promise<() => void>;
}

/** What a transport needs of the run it streams for (the Follower). */
export interface StreamHost {
  readonly settings: StreamSettings;
  readonly sessionId: string;
  readonly cursor: number;
  /** The task's terminal event was taken. */
  readonly reachedTerminal: boolean;
  readonly signal: AbortSignal;
  readonly stopReason: unknown;
  readonly buffer: RunBuffer;
  accept(e: MooringEvent): "ok" | "gap" | "full";
  noteBoot(bootId: string): void;
  /** Now streaming: the state changes and the failure count starts over. */
  streaming(reason: string): void;
  /** Registers what closes this transport at once on abort; returns its removal. */
  track(close: () => void): () => void;
}

/**
 * A stream ended: `immediate` skips the backoff (4008, a gap), `pause` is the run's own doing (a
 * full buffer), `refused` an upgrade answered with an HTTP error status.
 */
export class Disconnect extends Error {
  constructor(
    reason: string,
    readonly immediate = false,
    readonly pause = false,
    readonly refused = false,
  ) {
    super(reason);
  }
}

/** Follows over `WS /v1/ws` until the terminal event; throws Disconnect (or the API error) when it ends earlier. */
export async function streamWs(host: StreamHost): Promise<void> {
  let finish!: (err?: unknown) => void;
  const ended = new Promise<void>((resolve, reject) => {
    finish = (err) => (err ? reject(err) : resolve());
  });
  ended.catch(() => {});
  let subscribed = false;
  let socket: RpcSocket | null = null;
  const subscribe = () =>
    socket!.call("events.subscribe", { sessionId: host.sessionId, afterSeq: host.cursor });
  const pauseThenResume = async () => {
    try {
      await socket!.call("events.unsubscribe", { sessionId: host.sessionId });
      await host.buffer.drained();
      if (host.signal.aborted) throw host.stopReason;
      subscribed = true;
      await subscribe();
    } catch (err) {
      finish(err);
    }
  };
  try {
    socket = await RpcSocket.open(
      {
        url: host.settings.url,
        token: host.settings.token,
        clock: host.settings.clock,
        pingMs: host.settings.pingMs,
        webSocket: host.settings.webSocket,
        onEvents: (events) => {
          if (!subscribed) return;
          for (const e of events) {
            const taken = host.accept(e);
            if (taken === "gap") return finish(new Disconnect("a gap in the event seqs", true));
            if (host.reachedTerminal) return finish();
            if (taken === "full") {
              subscribed = false;
              void pauseThenResume();
              return;
            }
          }
        },
        onClose: (c) =>
          finish(
            new Disconnect(
              c.code === 4008
                ? "closed 4008: too slow"
                : `socket closed (${c.code}${c.reason ? `: ${c.reason}` : ""})`,
              c.code === 4008,
            ),
          ),
      },
      host.signal,
    );
  } catch (err) {
    const close = (err as { close?: { refusedStatus?: number } }).close;
    throw new Disconnect(
      `websocket failed: ${(err as Error).message}`,
      false,
      false,
      close?.refusedStatus !== undefined,
    );
  }
  const open = socket;
  const close = () => {
    open.terminate();
    finish(host.stopReason);
  };
  const untrack = host.track(close);
  try {
    host.noteBoot(open.hello.bootId);
    subscribed = true;
    await subscribe();
    if (host.reachedTerminal) return;
    host.streaming("subscribed over WebSocket");
    await ended;
  } finally {
    untrack();
    open.terminate();
  }
}

/** A local source's refusal as the API error the REST and socket paths raise for it. */
function refusalOf(err: unknown): unknown {
  const e = err as { code?: unknown; message?: unknown; status?: unknown; details?: unknown };
  if (!e || typeof e.code !== "string") return err;
  return apiError(e.code, String(e.message ?? e.code), {
    status: typeof e.status === "number" ? e.status : undefined,
    details: (e.details as Record<string, unknown> | undefined) ?? {},
  });
}

/**
 * Follows through the gateway's own feeds (a local source) until the terminal event; throws like
 * streamWs. A full buffer unsubscribes, and the stream subscribes again from the cursor once the
 * consumer caught up, as the socket does.
 */
export async function streamLocal(host: StreamHost, source: LocalEventSource): Promise<void> {
  let finish!: (err?: unknown) => void;
  let settled = false;
  const ended = new Promise<void>((resolve, reject) => {
    finish = (err) => {
      settled = true;
      if (err) reject(err);
      else resolve();
    };
  });
  ended.catch(() => {});
  /** The subscription taking events now; each one stops taking them once stopped. */
  let current: { live: boolean; stop: () => void } | null = null;
  const stopCurrent = () => {
    if (!current) return;
    current.live = false;
    current.stop();
  };
  const open = async (): Promise<void> => {
    const sub = { live: true, stop: () => {} };
    current = sub;
    const take = (events: MooringEvent[]) => {
      if (!sub.live || settled) return;
      for (const e of events) {
        const taken = host.accept(e);
        if (taken === "gap") return finish(new Disconnect("a gap in the event seqs", true));
        if (host.reachedTerminal) return finish();
        if (taken === "full") {
          stopCurrent();
          void pauseThenResume();
          return;
        }
      }
    };
    const end = (reason: string) => {
      if (sub.live) finish(new Disconnect(`the session's feed ended (${reason})`));
    };
    let unsubscribe: () => void;
    try {
      unsubscribe = await source.subscribe(host.sessionId, host.cursor, take, end);
    } catch (err) {
      throw refusalOf(err);
    }
    sub.stop = unsubscribe;
    // Stopped (full, terminal, aborted) before the subscription was even answered.
    if (!sub.live || settled) {
      sub.live = false;
      unsubscribe();
    }
  };
  const pauseThenResume = async () => {
    try {
      await host.buffer.drained();
      if (host.signal.aborted) throw host.stopReason;
      await open();
    } catch (err) {
      finish(err);
    }
  };
  const untrack = host.track(() => finish(host.stopReason));
  try {
    if (source.bootId) host.noteBoot(source.bootId);
    await open();
    if (host.reachedTerminal) return;
    host.streaming("subscribed in process");
    await ended;
  } finally {
    untrack();
    stopCurrent();
  }
}

/** Follows over Server-Sent Events until the terminal event; throws like streamWs. */
export async function streamSse(host: StreamHost): Promise<void> {
  const controller = new AbortController();
  const untrack = host.track(() => controller.abort());
  // The gateway writes at least a heartbeat every interval; checked every ≤ 250 ms, a silent
  // stream is noticed within 2 × pingMs + 5 s, as a silent socket is.
  const idleMs = 2 * host.settings.pingMs + 4000;
  let lastActivity = host.settings.clock.now();
  let idle = false;
  let watchdog: unknown;
  const watch = () => {
    if (host.settings.clock.now() - lastActivity > idleMs) {
      idle = true;
      controller.abort();
      return;
    }
    watchdog = host.settings.clock.setTimeout(watch, Math.min(250, idleMs / 4));
  };
  try {
    // From the request on: a stalled path may swallow the request itself (a pooled keep-alive
    // connection that stopped forwarding), and then no headers ever come.
    watch();
    const headers: Record<string, string> = { accept: "text/event-stream" };
    if (host.settings.token) headers.authorization = `Bearer ${host.settings.token}`;
    let res: Response;
    try {
      res = await host.settings.fetch(
        `${host.settings.url}/v1/sessions/${host.sessionId}/events?afterSeq=${host.cursor}`,
        { headers, signal: controller.signal },
      );
    } catch (err) {
      throw new Disconnect(
        idle ? `no answer for ${idleMs} ms` : `event stream failed: ${(err as Error).message}`,
      );
    }
    const bootId = res.headers.get("x-mooring-boot-id");
    if (bootId) host.noteBoot(bootId);
    if (res.status !== 200 || !res.body) {
      const body = await res.json().catch(() => null);
      throw errorOf(res, body);
    }
    host.streaming("reading Server-Sent Events");
    for await (const data of sseRecords(res.body, () => {
      lastActivity = host.settings.clock.now();
    })) {
      const taken = host.accept(JSON.parse(data) as MooringEvent);
      if (taken === "gap") throw new Disconnect("a gap in the event seqs", true);
      if (host.reachedTerminal) return;
      if (taken === "full") {
        controller.abort();
        await host.buffer.drained();
        throw new Disconnect("paused for a slow consumer", true, true);
      }
    }
    throw new Disconnect("the event stream ended before the terminal event");
  } catch (err) {
    if (err instanceof Disconnect || err instanceof MooringApiError) throw err;
    if (host.signal.aborted) throw host.stopReason;
    if (idle) throw new Disconnect(`no data for ${idleMs} ms`);
    throw new Disconnect(`event stream broke: ${(err as Error).message}`);
  } finally {
    if (watchdog !== undefined) host.settings.clock.clearTimeout(watchdog);
    untrack();
    controller.abort();
  }
}
