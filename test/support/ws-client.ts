/**
 * A small real WebSocket client for `WS /v1/ws` (the `ws` package): waits for `hello`, makes
 * JSON-RPC calls matched by id, collects `event` notifications (a frame is one notification or a
 * JSON-RPC batch array of them), and counts what crossed the wire: raw TCP bytes (after the
 * upgrade, so permessage-deflate is measured as sent), decoded message bytes and message count.
 */
import { once } from "node:events";
import type { Socket } from "node:net";
import WebSocket, { type ClientOptions } from "ws";
import { afterEach } from "vitest";
import { track } from "./leaks.js";

export interface WsEvent {
  sessionId: string;
  seq: number;
  taskId: string | null;
  type: string;
  at: string;
  data: any;
}

export interface Hello {
  instanceId: string;
  bootId: string;
  version: string;
}

export interface RpcError {
  code: number;
  message: string;
  data?: { code: string; reason?: string } & Record<string, unknown>;
}

export interface RpcAnswer<T = any> {
  id: number | string | null;
  result?: T;
  error?: RpcError;
}

/** One received WebSocket message as it arrived. */
export interface Received {
  /** Decoded (inflated) length in bytes. */
  bytes: number;
  message: any;
  at: number;
}

const TERMINAL = new Set([
  "task.completed",
  "task.failed",
  "task.cancelled",
  "task.expired",
  "task.interrupted",
]);
export const isTerminalEvent = (e: WsEvent) => TERMINAL.has(e.type);

export class WsClient {
  readonly ws: WebSocket;
  /** Every message in arrival order. */
  readonly received: Received[] = [];
  /** Every `event` notification in arrival order, batches flattened. */
  readonly events: WsEvent[] = [];
  /** Raw bytes read from the TCP socket since the upgrade (frame headers included, compressed). */
  wireBytes = 0;
  /** Sum of decoded message lengths. */
  decodedBytes = 0;
  /** Pings received from the server. */
  pings = 0;
  readonly hello: Promise<Hello>;
  readonly closed: Promise<{ code: number; reason: string }>;
  private nextId = 1;
  private readonly pending = new Map<number, (answer: RpcAnswer) => void>();
  private waiters: { match: () => boolean; resolve: () => void }[] = [];
  private closeInfo: { code: number; reason: string } | null = null;

  constructor(url: string, options: ClientOptions = {}) {
    this.ws = new WebSocket(url, options);
    let resolveHello: (h: Hello) => void;
    this.hello = new Promise((resolve) => {
      resolveHello = resolve;
    });
    this.closed = new Promise((resolve) => {
      this.ws.on("close", (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        resolve(this.closeInfo);
        this.wake();
      });
    });
    this.ws.on("error", () => {});
    this.ws.on("ping", () => {
      this.pings++;
      this.wake();
    });
    this.ws.on("open", () => {
      // Count every byte the TCP socket reads from now on. (Not from "upgrade": a listener added
      // before ws attaches its own would swallow the frames that came with the upgrade response.)
      this.socket.on("data", (chunk: Buffer) => {
        this.wireBytes += chunk.length;
      });
    });
    this.ws.on("message", (data) => {
      const buffer = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      const text = buffer.toString("utf8");
      const message = JSON.parse(text);
      this.received.push({ bytes: buffer.length, message, at: Date.now() });
      this.decodedBytes += buffer.length;
      const items = Array.isArray(message) ? message : [message];
      for (const item of items) {
        if (item?.method === "hello" && this.received.length === 1) resolveHello(item.params);
        if (item?.method === "event") this.events.push(item.params);
        if (item && "id" in item && (item.result !== undefined || item.error !== undefined)) {
          const resolve = this.pending.get(item.id);
          if (resolve) {
            this.pending.delete(item.id);
            resolve(item);
          }
        }
      }
      this.wake();
    });
  }

  /** Connect and wait for `hello` (which must be the first message). */
  static async connect(baseUrl: string, options: ClientOptions = {}): Promise<WsClient> {
    const client = new WsClient(`${baseUrl.replace(/^http/, "ws")}/v1/ws`, options);
    track({
      kind: "websocket",
      what: `WebSocket to ${baseUrl}`,
      alive: () => client.ws.readyState === client.ws.OPEN || client.ws.readyState === client.ws.CONNECTING,
      release: () => client.ws.terminate(),
    });
    await Promise.race([
      once(client.ws, "open"),
      client.closed.then((c) => {
        throw new Error(`socket closed before open (${c.code})`);
      }),
    ]);
    await client.hello;
    return client;
  }

  get socket(): Socket {
    return (this.ws as unknown as { _socket: Socket })._socket;
  }

  get closeEvent(): { code: number; reason: string } | null {
    return this.closeInfo;
  }

  /** Send raw text (for malformed or oversized frames). */
  sendRaw(text: string | Buffer): void {
    this.ws.send(text);
  }

  /** A JSON-RPC request; resolves with the whole answer (result or error). */
  request<T = any>(method: string, params?: unknown): Promise<RpcAnswer<T>> {
    const id = this.nextId++;
    const answer = new Promise<RpcAnswer<T>>((resolve, reject) => {
      this.pending.set(id, resolve as (a: RpcAnswer) => void);
      void this.closed.then((c) =>
        reject(new Error(`socket closed (${c.code}) before the answer to ${method}`)),
      );
    });
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }));
    return answer;
  }

  /** A JSON-RPC request that must succeed; resolves with its result. */
  async call<T = any>(method: string, params?: unknown): Promise<T> {
    const answer = await this.request<T>(method, params);
    if (answer.error) {
      const e = new Error(`${method} failed: ${answer.error.message}`) as Error & { rpc: RpcError };
      e.rpc = answer.error;
      throw e;
    }
    return answer.result as T;
  }

  /** Resolves once `match()` holds (checked after every message and on close). */
  until(match: () => boolean, timeoutMs = 20_000, what = "condition"): Promise<void> {
    if (match()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(
          new Error(
            `${what} not met in ${timeoutMs} ms (events: ${this.events.length}, closed: ${JSON.stringify(this.closeInfo)})`,
          ),
        );
      }, timeoutMs);
      const waiter = {
        match,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** Events of one session, in arrival order. */
  eventsOf(sessionId: string): WsEvent[] {
    return this.events.filter((e) => e.sessionId === sessionId);
  }

  /** Wait for an event of `sessionId` matching `match`; resolves with it. */
  async waitForEvent(
    sessionId: string,
    match: (e: WsEvent) => boolean,
    timeoutMs = 20_000,
  ): Promise<WsEvent> {
    let found: WsEvent | undefined;
    await this.until(
      () => {
        found = this.events.find((e) => e.sessionId === sessionId && match(e));
        return found !== undefined;
      },
      timeoutMs,
      `event of ${sessionId}`,
    );
    return found!;
  }

  /** Wait for the terminal event of `taskId`. */
  waitForTerminal(sessionId: string, taskId: string, timeoutMs = 20_000): Promise<WsEvent> {
    return this.waitForEvent(sessionId, (e) => e.taskId === taskId && isTerminalEvent(e), timeoutMs);
  }

  /** Reset the wire counters (and remember where the message list stood). */
  resetCounters(): number {
    this.wireBytes = 0;
    this.decodedBytes = 0;
    return this.received.length;
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    const done = this.closed;
    this.ws.terminate();
    await done;
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) {
      if (waiter.match()) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }
}

/** Seqs of `events`, for comparisons. */
/**
 * A test file's sockets: `connect` opens one (to the file's gateway unless told another) and keeps
 * it, so the file's `afterAll` closes them all with `closeAll`.
 */
export class WsClients {
  private readonly open: WsClient[] = [];

  /** Made at a file's top level: what a test connected is closed when that test ends (the leak guard checks). */
  constructor(private readonly defaultBase: () => string) {
    afterEach(() => this.closeAll());
  }

  async connect(base = this.defaultBase(), options: ClientOptions = {}): Promise<WsClient> {
    const client = await WsClient.connect(base, options);
    this.open.push(client);
    return client;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.open.splice(0).map((c) => c.close()));
  }
}

export const seqs = (events: { seq: number }[]) => events.map((e) => e.seq);

/** 1..n */
export const range = (from: number, to: number) =>
  Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
