/**
 * The HTTP server (REST, JSON-RPC, WebSocket, SSE, ACP, /metrics) as a service. It starts ahead of
 * its place in the gateway's list, first of all, so /healthz and /readyz answer while the rest
 * starts; its place says when it stops: after running turns drained and the event log flushed
 * (subscribers get the last events), before the feeds, the LISTEN connection and the pool they read.
 *
 * Its open connections (the ACP connections, the WebSocket hub, the SSE streams) are services too,
 * but its own, not the gateway list's: they are built with the app at each listen and live no
 * longer than it, and `app.close()` waits for them (a hijacked SSE response holds it open for
 * good), so the server's stop is whole only with theirs first. It stops them as a list of its own.
 */
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { type Service, ServiceList } from "../lib/service.js";
import { buildHttpApp, type HttpApp } from "../transport/http/app.js";
import type { MetricsSource } from "../transport/http/routes/metrics.js";
import type { ReadyzView } from "../transport/http/routes/health.js";
import type { Services } from "../transport/services.js";

export class HttpServer implements Service {
  readonly name = "http server";
  private listening: Promise<HttpApp> | null = null;
  private http: HttpApp | null = null;
  /** The base URL, once listening. */
  url = "";

  constructor(
    private readonly config: Config,
    private readonly services: Services,
    private readonly log: Logger,
    private readonly health: { readyz(view: ReadyzView): Promise<{ ok: boolean; body: unknown }> },
    private readonly metrics: MetricsSource,
  ) {}

  /** Builds the app and listens; a second start while listening does nothing. */
  async start(): Promise<void> {
    this.listening ??= this.listen();
    await this.listening;
  }

  private async listen(): Promise<HttpApp> {
    const http = await buildHttpApp(this.config, this.services, this.log, this.health, this.metrics);
    await http.app.listen({ host: this.config.host, port: this.config.port });
    this.http = http;
    const address = http.app.server.address();
    const port = typeof address === "object" && address ? address.port : this.config.port;
    const host = this.config.host.includes(":") ? `[${this.config.host}]` : this.config.host;
    this.url = `http://${host}:${port}`;
    return http;
  }

  /** Sockets, SSE streams and ACP connections open now (null before listening). */
  get connections(): Pick<HttpApp, "sockets" | "sse" | "acp"> | null {
    return this.http;
  }

  async stop(): Promise<void> {
    await this.listening?.catch(() => {});
    this.listening = null;
    const http = this.http;
    this.http = null;
    if (!http) return;
    // Stopped in reverse: ACP connections first, since they follow turns through this gateway's
    // own sockets, which would otherwise reconnect as those close.
    await new ServiceList([http.sse, http.sockets, http.acp], this.log).stop();
    await http.app.close();
  }
}
