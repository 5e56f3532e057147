/** A small JSON-RPC WebSocket client on `ws`, counting what crosses the wire. */
import WebSocket from "ws";
import { wallMs } from "./stats.js";

export interface WireEvent {
  sessionId: string;
  seq: number;
  taskId: string | null;
  type: string;
  at: string;
  data: any;
}

export interface RpcSocketOptions {
  /** Negotiate permessage-deflate (browsers do). Default true. */
  deflate?: boolean;
  /** Called for each event with the wall-clock ms of the frame's arrival. */
  onEvent?: (event: WireEvent, receivedAt: number) => void;
}

export class RpcSocket {
  /** WebSocket messages received (frames carrying one notification or a batch). */
  messages = 0;
  /** Decoded (inflated) bytes of those messages. */
  decodedBytes = 0;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();

  private constructor(
    readonly ws: WebSocket,
    private readonly options: RpcSocketOptions,
  ) {
    ws.on("message", (data: Buffer) => this.onMessage(data));
    ws.on("close", () => {
      for (const p of this.pending.values()) p.reject(new Error("socket closed"));
      this.pending.clear();
    });
  }

  static connect(baseUrl: string, options: RpcSocketOptions = {}): Promise<RpcSocket> {
    const url = `${baseUrl.replace(/^http/, "ws")}/v1/ws`;
    const ws = new WebSocket(url, { perMessageDeflate: options.deflate ?? true });
    const socket = new RpcSocket(ws, options);
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve(socket));
      ws.once("error", reject);
    });
  }

  /** Bytes read from the TCP connection so far (frames as sent, compressed or not). */
  get wireBytesRead(): number {
    return (this.ws as unknown as { _socket: { bytesRead: number } })._socket?.bytesRead ?? 0;
  }

  call<T = any>(method: string, params: unknown): Promise<T> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }

  subscribe(sessionId: string, afterSeq?: number) {
    return this.call<{ sessionId: string; headSeq: number }>("events.subscribe", { sessionId, afterSeq });
  }

  close(): void {
    this.ws.terminate();
  }

  private onMessage(data: Buffer): void {
    const at = wallMs();
    this.messages++;
    this.decodedBytes += data.length;
    const parsed = JSON.parse(data.toString("utf8"));
    for (const message of Array.isArray(parsed) ? parsed : [parsed]) {
      if (message.method === "event") this.options.onEvent?.(message.params, at);
      else if (message.id !== undefined && message.id !== null) {
        const p = this.pending.get(message.id);
        if (!p) continue;
        this.pending.delete(message.id);
        if (message.error)
          p.reject(new Error(`${message.error.message} (${JSON.stringify(message.error.data)})`));
        else p.resolve(message.result);
      }
    }
  }
}

/** The first `clock <ms>` stamp in a text (the simulated agent's [clock] directive), or null. */
export function clockOf(text: unknown): number | null {
  if (typeof text !== "string") return null;
  const match = text.match(/clock (\d+(?:\.\d+)?)/);
  return match ? Number(match[1]) : null;
}
