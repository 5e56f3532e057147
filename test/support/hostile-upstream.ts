/**
 * A hostile upstream gateway for chained-gateway tests (driver `mooring`): a real node http and
 * `ws` server speaking just enough of the mooring API for a downstream's driver (create a session,
 * submit a turn, read and long-poll the task, read an events page, cancel, `WS /v1/ws` with hello
 * and `events.subscribe`), then misbehaving as `mode` says:
 *
 * - `ws-oversize`: one uncompressed WebSocket message of `bytes` bytes;
 * - `ws-inflate`: one compressed message that inflates to `bytes` bytes (a few KB on the wire);
 * - `event-oversize`: one `message.delta` event whose text is `bytes` long, in a small message;
 * - `rest-oversize`: `GET /v1/tasks/:id` answers a JSON body of `bytes` bytes, streamed;
 * - `poll-tight`: the upgrade is refused (503) and every long-poll answers at once, unchanged,
 *   with `pollAfterMs: 0`.
 *
 * It records every request and counts what it wrote, so a test can assert what the downstream did.
 */
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type WebSocket, WebSocketServer } from "ws";

export type HostileMode = "ws-oversize" | "ws-inflate" | "event-oversize" | "rest-oversize" | "poll-tight";

const SESSION_ID = "ses_hostile";
const TASK_ID = "tsk_hostile";

export class HostileUpstream {
  /** Every request line (`GET /v1/tasks/…?waitMs=25000`), upgrades included. */
  readonly requests: string[] = [];
  /** Bytes of the oversize REST body written before the downstream stopped reading. */
  bodyBytesWritten = 0;
  /** Bytes the last WebSocket wrote on the wire (after compression). */
  wsBytesOnWire = 0;
  /** WebSockets the downstream closed (or cut). */
  wsClosed = 0;
  mode: HostileMode = "ws-oversize";
  bytes = 0;
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: { threshold: 0 } });
  private status = "running";

  private constructor(private readonly server: Server) {
    server.on("request", (req, res) => this.answer(req, res));
    server.on("upgrade", (req, socket, head) => {
      this.requests.push(`${req.method} ${req.url}`);
      if (this.mode === "poll-tight") {
        socket.end("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => this.speak(ws));
    });
  }

  static async start(): Promise<HostileUpstream> {
    const server = createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    return new HostileUpstream(server);
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  /** Misbehave as `mode` from the next turn on. */
  set(mode: HostileMode, bytes = 0): void {
    this.mode = mode;
    this.bytes = bytes;
    this.status = "running";
    this.requests.length = 0;
    this.bodyBytesWritten = 0;
    this.wsBytesOnWire = 0;
    this.wsClosed = 0;
  }

  /** Requests so far whose line matches. */
  count(match: RegExp): number {
    return this.requests.filter((r) => match.test(r)).length;
  }

  async close(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, "close");
  }

  private task(): Record<string, unknown> {
    const now = Date.now();
    return {
      id: TASK_ID,
      sessionId: SESSION_ID,
      status: this.status,
      firstSeq: 1,
      lastSeq: 0,
      createdAt: new Date(now).toISOString(),
      queueDeadlineAt: new Date(now + 600_000).toISOString(),
      deadlineAt: new Date(now + 600_000).toISOString(),
      result: null,
      error: this.status === "cancelled" ? { code: "CANCELLED", message: "cancelled" } : null,
      pollAfterMs: this.mode === "poll-tight" ? 0 : null,
    };
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.requests.push(`${req.method} ${req.url}`);
    for await (const _ of req) {
      // the body is not needed
    }
    const path = (req.url ?? "").split("?")[0];
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.method === "POST" && path === "/v1/sessions") return json(201, { id: SESSION_ID, status: "idle" });
    if (req.method === "POST" && path === `/v1/sessions/${SESSION_ID}/turns`) return json(202, this.task());
    if (req.method === "POST" && path === `/v1/tasks/${TASK_ID}/cancel`) {
      this.status = "cancelled";
      return json(200, this.task());
    }
    if (req.method === "GET" && path === `/v1/sessions/${SESSION_ID}/events`) {
      return json(200, { items: [], nextAfterSeq: null });
    }
    if (req.method === "GET" && path === `/v1/tasks/${TASK_ID}`) {
      if (this.mode === "rest-oversize") return this.flood(res);
      return json(200, this.task());
    }
    json(404, { error: { code: "NOT_FOUND", message: "no such route" } });
  }

  /** `bytes` of one JSON object, written as fast as the peer reads, until it stops. */
  private async flood(res: ServerResponse): Promise<void> {
    res.writeHead(200, { "content-type": "application/json" });
    const chunk = Buffer.alloc(64 * 1024, "x");
    res.write('{"pad":"');
    let closed = false;
    let wake = () => {};
    res.on("close", () => {
      closed = true;
      wake();
    });
    res.on("drain", () => wake());
    while (!closed && this.bodyBytesWritten < this.bytes) {
      this.bodyBytesWritten += chunk.length;
      if (!res.write(chunk)) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    }
    if (!closed) res.end('"}');
  }

  private speak(ws: WebSocket): void {
    ws.on("close", () => this.wsClosed++);
    const send = (message: unknown, compress = false) => ws.send(JSON.stringify(message), { compress });
    send({ jsonrpc: "2.0", method: "hello", params: { instanceId: "hostile", bootId: "b1", version: "0", pingMs: 15_000 } });
    ws.on("message", (data) => {
      const call = JSON.parse(String(data));
      if (call.method !== "events.subscribe") {
        return send({ jsonrpc: "2.0", id: call.id, result: {} });
      }
      send({ jsonrpc: "2.0", id: call.id, result: { sessionId: SESSION_ID, headSeq: 0 } });
      const event = (text: string) => ({
        jsonrpc: "2.0",
        method: "event",
        params: { sessionId: SESSION_ID, seq: 1, taskId: TASK_ID, type: "message.delta", at: new Date().toISOString(), data: { text } },
      });
      const text = "a".repeat(this.bytes);
      const before = (ws as unknown as { _socket: { bytesWritten: number } })._socket.bytesWritten;
      const sent = () => {
        this.wsBytesOnWire = (ws as unknown as { _socket: { bytesWritten: number } })._socket.bytesWritten - before;
      };
      if (this.mode === "ws-inflate") ws.send(JSON.stringify(event(text)), { compress: true }, sent);
      else ws.send(JSON.stringify(event(text)), { compress: false }, sent);
    });
  }
}
