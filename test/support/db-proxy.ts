/**
 * A TCP proxy in front of the test Postgres, so a test can take "the database" away from one
 * gateway without stopping the Postgres every other test file (and every other session on the
 * machine) shares. It goes away as a Postgres server stops (fast shutdown):
 * 1. `shutDown()`: every open connection gets a FATAL 57P01 ("terminating connection due to
 *    administrator command") and is closed; a new connection is answered FATAL 57P03 ("the
 *    database system is shutting down") after its startup message, and closed;
 * 2. `refuse()`: the port closes, so new connections get ECONNREFUSED;
 * 3. `up()`: it listens again on the same port and forwards.
 * Messages from the server are forwarded whole (a Postgres server sends nothing but typed
 * messages once the client sent no SSLRequest, as postgres.js without `ssl`), so an error
 * message never lands inside another.
 */
import { once } from "node:events";
import { createServer, type Server, type Socket, connect } from "node:net";

interface Link {
  client: Socket;
  upstream: Socket;
  /** Server bytes of a message not yet complete. */
  partial: Buffer;
}

export class DatabaseProxy {
  private server: Server | null = null;
  private readonly links = new Set<Link>();
  private shuttingDown = false;
  /** Connections answered "shutting down" since the last `shutDown()`. */
  refusedWhileShuttingDown = 0;

  private constructor(
    private readonly target: URL,
    private port: number,
    private readonly terminateWhen?: (sent: Buffer) => boolean,
  ) {}

  /**
   * A proxy to the database of `databaseUrl`, listening on a free port of 127.0.0.1. With
   * `terminateWhen`, a connection whose client just sent bytes it accepts is terminated (57P01)
   * instead of forwarding them: a backend killed at that very statement.
   */
  static async start(
    databaseUrl: string,
    terminateWhen?: (sent: Buffer) => boolean,
  ): Promise<DatabaseProxy> {
    const proxy = new DatabaseProxy(new URL(databaseUrl), 0, terminateWhen);
    await proxy.up();
    return proxy;
  }

  /** The database URL through the proxy. */
  get url(): string {
    const url = new URL(this.target);
    url.hostname = "127.0.0.1";
    url.port = String(this.port);
    return url.toString();
  }

  /** Listening again on the same port, forwarding to the database. */
  async up(): Promise<void> {
    this.shuttingDown = false;
    if (this.server) return;
    const server = createServer((client) => this.accept(client));
    server.listen(this.port, "127.0.0.1");
    await once(server, "listening");
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  /** Phase one of a stop: open connections terminated (57P01), new ones told "shutting down" (57P03). */
  shutDown(): void {
    this.shuttingDown = true;
    this.refusedWhileShuttingDown = 0;
    for (const link of [...this.links]) this.terminate(link, "57P01", "terminating connection due to administrator command");
  }

  /** Phase two: the port is closed (ECONNREFUSED), and anything still open is cut. */
  async refuse(): Promise<void> {
    this.shutDown();
    const server = this.server;
    this.server = null;
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  async close(): Promise<void> {
    await this.refuse();
  }

  private accept(client: Socket): void {
    client.on("error", () => {});
    if (this.shuttingDown) {
      // Postgres reads the startup message, then answers with the error and closes.
      client.once("data", () => {
        this.refusedWhileShuttingDown++;
        client.end(postgresFatal("57P03", "the database system is shutting down"));
      });
      return;
    }
    const upstream = connect(Number(this.target.port || 5432), this.target.hostname);
    const link: Link = { client, upstream, partial: Buffer.alloc(0) };
    this.links.add(link);
    const terminateWhen = this.terminateWhen;
    if (terminateWhen) {
      client.on("data", (chunk: Buffer) => {
        if (!this.links.has(link)) return;
        if (terminateWhen(chunk)) this.terminate(link, "57P01", "terminating connection due to administrator command");
        else upstream.write(chunk);
      });
    } else {
      client.pipe(upstream);
    }
    upstream.on("data", (chunk: Buffer) => {
      const bytes = Buffer.concat([link.partial, chunk]);
      let whole = 0;
      while (bytes.length - whole >= 5) {
        const length = bytes.readUInt32BE(whole + 1);
        if (bytes.length - whole < length + 1) break;
        whole += length + 1;
      }
      link.partial = bytes.subarray(whole);
      if (whole > 0 && this.links.has(link)) client.write(bytes.subarray(0, whole));
    });
    const end = () => {
      this.links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    upstream.on("error", end);
    upstream.on("close", end);
    client.on("close", end);
  }

  private terminate(link: Link, code: string, message: string): void {
    this.links.delete(link);
    link.upstream.destroy();
    link.client.end(postgresFatal(code, message));
  }
}

/** An ErrorResponse with severity FATAL, as Postgres sends it before it closes a connection. */
export function postgresFatal(code: string, message: string): Buffer {
  const fields = [
    ["S", "FATAL"],
    ["V", "FATAL"],
    ["C", code],
    ["M", message],
  ];
  const body = Buffer.concat([...fields.map(([k, v]) => Buffer.from(`${k}${v}\0`)), Buffer.from([0])]);
  const head = Buffer.alloc(5);
  head.write("E", 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}
