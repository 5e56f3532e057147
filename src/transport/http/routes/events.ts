import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { Config } from "../../../config.js";
import { invalid } from "../../../errors.js";
import type { Service } from "../../../lib/service.js";
import type { ClientEvent } from "../../../stream/session-feeds.js";
import { routeResponses } from "../../../contract/responses.js";
import { EventPayloadParams, EventsQuery, SessionIdParams } from "../../../contract/requests.js";
import type { Services } from "../../services.js";
import { tenantOf } from "../auth.js";

const SSE_RETRY_MS = 2_000;

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
};

/**
 * Open SSE streams, so the HTTP server's stop can end them first (a hijacked response would hold
 * `app.close()` open). Streams are taken from the route's registration on; `stop` ends those open.
 */
export class SseStreams implements Service {
  readonly name = "sse streams";
  private readonly closers = new Set<() => void>();
  add(close: () => void): () => void {
    this.closers.add(close);
    return () => this.closers.delete(close);
  }
  start(): void {}
  async stop(): Promise<void> {
    for (const close of [...this.closers]) close();
  }
  get count(): number {
    return this.closers.size;
  }
}

export function registerEventRoutes(
  app: FastifyInstance,
  s: Services,
  config: Config,
  streams: SseStreams,
): void {
  app.get<{ Params: Static<typeof EventPayloadParams> }>(
    "/sessions/:id/events/:seq/payload",
    {
      schema: {
        summary: "The full payload behind an event's preview",
        tags: ["events"],
        params: EventPayloadParams,
        response: routeResponses["GET /v1/sessions/:id/events/:seq/payload"],
      },
    },
    async (req) => s.events.payload(req.params.id, req.params.seq, tenantOf(req, s.tenants)),
  );

  /**
   * Server-Sent Events: `id:` is the seq, so a browser's EventSource resumes by itself with
   * Last-Event-ID; `afterSeq` does the same for other clients. Events have no `event:` field, so
   * `onmessage` receives all of them; the type is inside the data.
   */
  app.get<{ Params: Static<typeof SessionIdParams>; Querystring: Static<typeof EventsQuery> }>(
    "/sessions/:id/events",
    {
      schema: {
        summary: "Server-Sent Events of a session, replayed then live",
        tags: ["events"],
        params: SessionIdParams,
        querystring: EventsQuery,
        response: routeResponses["GET /v1/sessions/:id/events"],
      },
    },
    async (req, reply) => {
      // A polling client asks for JSON: one page of events, no stream held open.
      if (wantsJson(req.headers.accept)) {
        const { afterSeq, limit } = req.query;
        return s.events.page(req.params.id, afterSeq ?? 0, limit ?? 200, tenantOf(req, s.tenants));
      }
      const lastEventId = req.headers["last-event-id"];
      let afterSeq = req.query.afterSeq ?? 0;
      if (typeof lastEventId === "string" && lastEventId !== "") {
        const n = /^[0-9]+$/.test(lastEventId) ? Number(lastEventId) : Number.NaN;
        if (!Number.isSafeInteger(n)) throw invalid("Last-Event-ID must be a seq", "Last-Event-ID");
        afterSeq = Math.max(afterSeq, n);
      }
      const { headSeq } = await s.events.openStream(req.params.id, afterSeq, tenantOf(req, s.tenants));
      // HEAD (health checkers, proxies): what a GET would get, checks and headers, and no stream.
      if (req.method === "HEAD") return reply.headers(SSE_HEADERS).status(200).send();
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        // Headers hooks set (CORS for a listed origin) are fastify's until sent: a hijacked reply
        // must carry them itself, or a browser page of that origin cannot read the stream.
        ...(reply.getHeaders() as OutgoingHttpHeaders),
        ...SSE_HEADERS,
      });
      res.write(`retry: ${SSE_RETRY_MS}\n\n`);
      let closed = false;
      const close = () => {
        if (closed) return;
        closed = true;
        s.clock.clearInterval(heartbeat);
        unsubscribe();
        forget();
        res.end();
        // The client may not read the end; don't let its socket outlive the stream.
        res.socket?.destroySoon?.();
      };
      const forget = streams.add(close);
      const unsubscribe = s.feeds.subscribe(req.params.id, headSeq, {
        cursor: afterSeq,
        deliver: (events: ClientEvent[]) => {
          if (closed) return;
          let chunk = "";
          for (const e of events) chunk += `id: ${e.seq}\ndata: ${JSON.stringify(e)}\n\n`;
          res.write(chunk);
          // A reader this far behind gets dropped; it resumes with Last-Event-ID.
          if (res.writableLength > config.wsMaxBufferedBytes) close();
        },
        // The session was purged: a last record named `end` (not a message: no `id:`, so the
        // cursor stays), then the stream ends. A reconnect finds the session gone (404).
        end: (reason) => {
          if (closed) return;
          res.write(
            `event: end\ndata: ${JSON.stringify({ sessionId: req.params.id, reason: `session_${reason}` })}\n\n`,
          );
          close();
        },
      });
      const heartbeat = s.clock.setInterval(() => res.write(": ping\n\n"), config.sseHeartbeatMs);
      heartbeat.unref();
      req.raw.on("close", close);
      res.on("error", close);
      // The client may have gone while the subscription was being opened: its close is past.
      if (res.destroyed || req.raw.socket?.destroyed !== false) {
        close();
        res.destroy();
      }
    },
  );
}

/** JSON when the client accepts it and does not ask for an event stream (EventSource sends text/event-stream). */
function wantsJson(accept: string | undefined): boolean {
  return !!accept && accept.includes("application/json") && !accept.includes("text/event-stream");
}
