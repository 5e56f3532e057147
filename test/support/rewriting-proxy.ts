/**
 * A hostile gateway for client tests: an HTTP proxy in front of a real gateway that rewrites the
 * body of every answer (e.g. a tool name into an escape sequence) before the client sees it. REST
 * and long polls only: a WebSocket upgrade is refused, so clients use `--transport poll`.
 */
import { once } from "node:events";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export class RewritingProxy {
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /** Starts a proxy to `target` that passes each answer body through `rewrite`. */
  static async start(target: string, rewrite: (body: string) => string): Promise<RewritingProxy> {
    const upstream = new URL(target);
    const server = createServer((req, res) => {
      const headers = { ...req.headers, host: upstream.host, "accept-encoding": "identity" };
      const forward = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
        async (answer) => {
          const chunks: Buffer[] = [];
          for await (const chunk of answer) chunks.push(chunk as Buffer);
          const body = Buffer.from(rewrite(Buffer.concat(chunks).toString("utf8")), "utf8");
          const out = { ...answer.headers, "content-length": String(body.length) };
          delete out["transfer-encoding"];
          res.writeHead(answer.statusCode ?? 502, out).end(body);
        },
      );
      forward.on("error", () => res.destroy());
      req.pipe(forward);
    });
    server.on("upgrade", (_req, socket) => socket.destroy());
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    return new RewritingProxy(server, `http://127.0.0.1:${port}`);
  }

  /** `text` as it must appear inside a JSON string, to put it in a body by replacing a marker. */
  static jsonText(text: string): string {
    return JSON.stringify(text).slice(1, -1);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
