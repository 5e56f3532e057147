/**
 * One JSON-RPC connection over `WS /v1/ws`: waits for `hello`, matches answers to calls, hands
 * `event` notifications (single or batched) to its owner, and notices a dead socket by itself.
 * Node uses the `ws` package (imported only there, so a browser bundle does not need it) with the
 * token in a header; a browser uses its global WebSocket with `?access_token=`.
 *
 * Liveness: a browser cannot see WebSocket pings, so after `pingMs` without any message the
 * connection sends the `ping` method; no answer within `pingMs + 4 s` and it is dead. A socket
 * that stops carrying anything is thus noticed within 2 × pingMs + 5 s.
 */
import type { Clock } from "./clock.js";
import { apiError, ConnectionError, MooringApiError } from "./errors.js";
import type { Hello, MooringEvent } from "./types.js";

/** What `WebSocket` offers in both worlds (the `ws` package implements the same surface). */
export interface WebSocketLike {
  readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  terminate?: () => void;
}

/**
 * Opens the socket in Node instead of the run-time `import("ws")`: for a host whose loader cannot
 * import at run time (the gateway's code-cached bundle), or that wants its own `ws` options
 * (limits). `headers` carry the token.
 */
export type WebSocketFactory = (url: string, headers: Record<string, string>) => WebSocketLike;

export interface SocketClose {
  code: number;
  reason: string;
  /** The socket never opened (the upgrade failed or was refused). */
  beforeOpen: boolean;
  /** The gateway answered the upgrade with an HTTP error status (a refused transport). */
  refusedStatus?: number;
}

export interface SocketOptions {
  url: string;
  token?: string;
  clock: Clock;
  /** Used until `hello` says the gateway's interval. */
  pingMs: number;
  webSocket?: WebSocketFactory;
  onEvents(events: MooringEvent[]): void;
  onClose(close: SocketClose): void;
}

declare const __mooringImport: ((specifier: string) => Promise<unknown>) | undefined;

const isNode = typeof process !== "undefined" && !!process.versions?.node;
const DEAD_MARGIN_MS = 4000;

async function createWebSocket(
  url: string,
  token: string | undefined,
  factory: WebSocketFactory | undefined,
): Promise<WebSocketLike> {
  const base = `${url.replace(/^http/, "ws")}/v1/ws`;
  if (factory) return factory(base, token ? { authorization: `Bearer ${token}` } : {});
  if (isNode) {
    // A name bundlers do not follow: a browser build never tries to resolve `ws`.
    const wsPackage = ["w", "s"].join("");
    // Inside the gateway's `npm start` bundle a plain import() fails (code cache, Node 20): the
    // bundle passes its own as `__mooringImport` (src/lib/import-module.ts); anywhere else it is undeclared.
    const load = typeof __mooringImport === "function" ? __mooringImport : (name: string) => import(/* @vite-ignore */ name);
    const mod = (await load(wsPackage)) as { WebSocket?: unknown; default?: unknown };
    const WS = (mod.WebSocket ?? mod.default) as new (url: string, options: unknown) => WebSocketLike;
    return new WS(base, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  }
  const WS = (globalThis as unknown as { WebSocket: new (url: string) => WebSocketLike }).WebSocket;
  return new WS(token ? `${base}?access_token=${encodeURIComponent(token)}` : base);
}

export class RpcSocket {
  hello!: Hello;
  private ws!: WebSocketLike;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
  private lastHeard = 0;
  private pingMs: number;
  private watchdog: unknown;
  private pingSentAt = 0;
  private closed = false;

  private constructor(private readonly options: SocketOptions) {
    this.pingMs = options.pingMs;
  }

  /** Resolves once `hello` arrived; rejects with the close when the socket does not get that far. */
  static async open(options: SocketOptions, signal?: AbortSignal): Promise<RpcSocket> {
    const socket = new RpcSocket(options);
    await socket.connect(signal);
    return socket;
  }

  private async connect(signal?: AbortSignal): Promise<void> {
    const ws = await createWebSocket(this.options.url, this.options.token, this.options.webSocket);
    this.ws = ws;
    let opened = false;
    let refusedStatus: number | undefined;
    // `ws` tells the status of a refused upgrade; a browser only sees the close.
    (ws as unknown as { on?: (e: string, f: (req: unknown, res: { statusCode?: number }) => void) => void }).on?.(
      "unexpected-response",
      (_req, res) => {
        refusedStatus = res.statusCode;
        this.terminate();
      },
    );
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.terminate();
        reject(new ConnectionError("aborted"));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      ws.onopen = () => {
        opened = true;
        this.lastHeard = this.options.clock.now();
      };
      ws.onerror = () => {};
      ws.onclose = (ev) => {
        signal?.removeEventListener("abort", onAbort);
        const wasClosed = this.closed;
        this.shutdown();
        const close: SocketClose = { code: ev.code, reason: String(ev.reason ?? ""), beforeOpen: !opened, refusedStatus };
        if (!this.hello) reject(Object.assign(new ConnectionError(`websocket closed (${ev.code})`), { close }));
        else if (!wasClosed) this.options.onClose(close);
      };
      ws.onmessage = (ev) => {
        this.lastHeard = this.options.clock.now();
        const message = safeParse(String(ev.data));
        if (!this.hello) {
          if (message?.method === "hello") {
            this.hello = message.params as Hello;
            if (this.hello.pingMs) this.pingMs = this.hello.pingMs;
            signal?.removeEventListener("abort", onAbort);
            this.arm();
            resolve();
          }
          return;
        }
        this.onMessage(message);
      };
    });
  }

  private onMessage(message: any): void {
    const list = Array.isArray(message) ? message : [message];
    const events: MooringEvent[] = [];
    for (const m of list) {
      if (m?.method === "event") events.push(m.params as MooringEvent);
      else if (typeof m?.id === "number" && this.pending.has(m.id)) {
        const p = this.pending.get(m.id)!;
        this.pending.delete(m.id);
        if (m.error) {
          const { code, reason, ...details } = (m.error.data ?? {}) as Record<string, unknown>;
          p.reject(
            apiError(String(code ?? "INTERNAL"), m.error.message, {
              reason: typeof reason === "string" ? reason : undefined,
              details,
              retryAfterMs: typeof details.retryAfterSeconds === "number" ? details.retryAfterSeconds * 1000 : undefined,
            }),
          );
        } else p.resolve(m.result);
      }
    }
    if (events.length > 0) this.options.onEvents(events);
  }

  call<T = unknown>(method: string, params: unknown = {}): Promise<T> {
    if (this.closed) return Promise.reject(new ConnectionError("websocket closed"));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      try {
        this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
      } catch (err) {
        this.pending.delete(id);
        reject(new ConnectionError(`websocket send failed: ${String(err)}`));
      }
    });
  }

  /** Checks liveness a few times per ping interval (see the module comment). */
  private arm(): void {
    const step = Math.max(25, Math.min(500, this.pingMs / 4));
    const tick = () => {
      if (this.closed) return;
      const now = this.options.clock.now();
      if (this.pingSentAt > 0 && this.lastHeard < this.pingSentAt && now - this.pingSentAt > this.pingMs + DEAD_MARGIN_MS) {
        return this.fail(4000, "no answer to ping: the connection is dead");
      }
      if (now - this.lastHeard >= this.pingMs && (this.pingSentAt === 0 || this.lastHeard >= this.pingSentAt)) {
        this.pingSentAt = now;
        this.call("ping").catch(() => {});
      }
      this.watchdog = this.options.clock.setTimeout(tick, step);
    };
    this.watchdog = this.options.clock.setTimeout(tick, step);
  }

  private fail(code: number, reason: string): void {
    const wasClosed = this.closed;
    this.terminate();
    if (!wasClosed) this.options.onClose({ code, reason, beforeOpen: false });
  }

  private shutdown(): void {
    this.closed = true;
    if (this.watchdog !== undefined) this.options.clock.clearTimeout(this.watchdog);
    for (const p of this.pending.values()) p.reject(new ConnectionError("websocket closed"));
    this.pending.clear();
  }

  /** Closes at once (no closing handshake): nothing is left open after this returns. */
  terminate(): void {
    this.shutdown();
    if (this.ws?.terminate) this.ws.terminate();
    else this.ws?.close(1000, "client closed");
  }
}

function safeParse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export const isApiError = (err: unknown): err is MooringApiError => err instanceof MooringApiError;
