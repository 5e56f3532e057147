/**
 * A small TCP proxy between a client and a gateway, for the client SDK's recovery tests: it cuts
 * connections (abruptly, or as a clean WebSocket close / a clean end of an SSE body), stalls them
 * (stops forwarding without closing), refuses new ones (a gateway that is down), refuses
 * streaming requests only, drops the answer to a chosen request, and can point at a new gateway
 * (a restart on another port) while the client keeps its URL.
 */
import { once } from "node:events";
import { createServer, type Server, type Socket, connect } from "node:net";

interface Link {
  client: Socket;
  upstream: Socket;
  /** Stalled: nothing is forwarded either way any more, and nothing is closed. */
  stalled: boolean;
  /** The answer to the last request on this link is to be dropped (the link cut instead). */
  dropAnswer: boolean;
  /** What this link carries, from its first request: ws, sse or http. */
  kind: "ws" | "sse" | "http";
  /** An HTTP request went upstream and no answer came back yet. */
  awaiting: boolean;
}

const requestLine = /^(GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) (\S+)/;

export class TcpProxy {
  readonly links = new Set<Link>();
  /** Every request line that passed, in order (e.g. "GET /v1/tasks/…"). */
  readonly requests: string[] = [];
  /** Connections accepted so far (also those refused or cut before a request passed). */
  accepted = 0;
  /** New connections are accepted and closed at once (the gateway is down). */
  refuse = false;
  /** WebSocket upgrades and SSE requests are cut (streaming blocked, REST allowed). */
  blockStreams = false;
  private dropMatch: ((request: string) => boolean) | null = null;
  private idleWaiters: (() => void)[] = [];
  private target: { host: string; port: number };

  private constructor(
    private readonly server: Server,
    target: string,
  ) {
    this.target = parseTarget(target);
  }

  static async start(target: string): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server, target);
    server.on("connection", (client) => proxy.accept(client));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    return proxy;
  }

  get url(): string {
    const address = this.server.address() as { port: number };
    return `http://127.0.0.1:${address.port}`;
  }

  /** Connections open through the proxy right now. */
  get open(): number {
    return this.links.size;
  }

  /** Streams (WebSocket, SSE) and HTTP requests still waiting for their answer. */
  get busy(): number {
    return [...this.links].filter((l) => l.kind !== "http" || l.awaiting).length;
  }

  /**
   * Resolves once no stream is open and no request is waiting for its answer (idle keep-alive
   * connections of the HTTP client's pool are not the client's doing).
   */
  whenQuiet(): Promise<void> {
    if (this.busy === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private checkQuiet(): void {
    if (this.busy === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  setTarget(target: string): void {
    this.target = parseTarget(target);
  }

  /** Cut the connection that carries the next request matching `match` when its answer arrives. */
  dropAnswerTo(match: (request: string) => boolean): void {
    this.dropMatch = match;
  }

  /** Destroys every connection (RST-like): the client sees an error or an abnormal close. */
  cutAll(): void {
    for (const link of [...this.links]) this.destroy(link);
  }

  /** Stops forwarding on every open connection, closing nothing. */
  stallAll(): void {
    for (const link of this.links) link.stalled = true;
  }

  /**
   * Destroys the stalled connections only (a middlebox that finally resets what it stopped
   * forwarding): what the client opened since goes on.
   */
  cutStalled(): void {
    for (const link of [...this.links]) if (link.stalled) this.destroy(link);
  }

  /**
   * Ends every stream cleanly: a WebSocket gets a close frame with code 1000, an SSE body gets the
   * final chunk of its chunked encoding, so the client sees a normal end, not an error.
   */
  endStreamsCleanly(): void {
    for (const link of [...this.links]) {
      if (link.kind === "ws") link.client.end(Buffer.from([0x88, 0x02, 0x03, 0xe8]));
      else if (link.kind === "sse") link.client.end("0\r\n\r\n");
      else continue;
      link.stalled = true;
      link.upstream.destroy();
      this.links.delete(link);
    }
    this.checkQuiet();
  }

  /** Sends every WebSocket client a close frame with `code`, as the gateway would (e.g. 4008), and ends it. */
  closeWebSockets(code: number): void {
    for (const link of [...this.links]) {
      if (link.kind !== "ws") continue;
      link.client.end(Buffer.from([0x88, 0x02, code >> 8, code & 0xff]));
      link.stalled = true;
      link.upstream.destroy();
      this.links.delete(link);
    }
    this.checkQuiet();
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    this.accepted++;
    client.setNoDelay(true);
    if (this.refuse) {
      client.destroy();
      return;
    }
    const upstream = connect(this.target.port, this.target.host);
    upstream.setNoDelay(true);
    const link: Link = { client, upstream, stalled: false, dropAnswer: false, kind: "http", awaiting: false };
    this.links.add(link);
    client.on("data", (chunk) => {
      if (link.stalled) return;
      const text = chunk.toString("latin1", 0, Math.min(chunk.length, 2048));
      const line = requestLine.exec(text);
      if (line) {
        this.requests.push(`${line[1]} ${line[2]}`);
        link.awaiting = true;
        const lower = text.toLowerCase();
        if (lower.includes("upgrade: websocket")) link.kind = "ws";
        else if (lower.includes("text/event-stream")) link.kind = "sse";
        if (this.blockStreams && link.kind !== "http") return this.destroy(link);
        if (this.dropMatch?.(`${line[1]} ${line[2]}`)) {
          this.dropMatch = null;
          link.dropAnswer = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (link.stalled) return;
      if (link.dropAnswer) return this.destroy(link);
      link.awaiting = false;
      client.write(chunk);
      this.checkQuiet();
    });
    const end = () => this.destroy(link);
    client.on("close", end);
    // A stalled path closes nothing: the client has to notice by itself.
    upstream.on("close", () => {
      if (!link.stalled) end();
    });
    client.on("error", end);
    upstream.on("error", end);
  }

  private destroy(link: Link): void {
    link.client.destroy();
    link.upstream.destroy();
    this.links.delete(link);
    this.checkQuiet();
  }
}

function parseTarget(target: string): { host: string; port: number } {
  const u = new URL(target);
  return { host: u.hostname, port: Number(u.port) };
}
