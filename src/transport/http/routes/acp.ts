/**
 * `/acp`: mooring as an ACP agent over the network (docs/acp-server.md), on the SDK's server
 * transport (`AcpServer`): Streamable HTTP (POST, the SSE GETs, DELETE) and WebSocket (an upgrade
 * of the same path). The route has passed the checks every route passes (Host, Origin, the token);
 * what an ACP method does is the mapping's (acp-server/agent.ts), which calls this gateway through
 * the client SDK with the caller's own token: the tenant, the roots, the limits and every other
 * rule apply exactly as on the REST routes, and no rule lives here.
 *
 * A Streamable HTTP connection is bound to the caller that opened it: a request naming its
 * `Acp-Connection-Id` with another token is answered as an unknown connection (404).
 */
import { Readable } from "node:stream";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { mooringAcpAgent } from "../../../acp-server/agent.js";
import { MooringClient } from "../../../client/client.js";
import type { Config } from "../../../config.js";
import type { Service } from "../../../lib/service.js";
import type { Caller } from "../../../domain/tenants.js";
import type { Services } from "../../services.js";
import { localEventSource } from "../../local-events.js";
import { callerOf, rawToken } from "../auth.js";
import { deflateSendsHere } from "../../ws/deflate-frames.js";

const CONNECTION_HEADER = "acp-connection-id";

/** Who a connection belongs to: the tenant and the token's place (never the token). */
const ownerOf = (caller: Caller | null): string =>
  caller ? `${caller.tenant.name}\u0000${caller.label}` : "";

/** The route's connections; `stop` ends them all (the SDK's server, then the SSE responses left). */
export interface AcpRoute extends Service {
  /** Event subscriptions of the connections' runs open now, on the gateway's own feeds. */
  readonly localSubscriptions: number;
}

export function registerAcpRoute(app: FastifyInstance, s: Services, config: Config, log: Logger): AcpRoute {
  const server = new AcpServer({
    createAgent: () => {
      throw new Error("every /acp connection is made with its caller's agent");
    },
    maxIdLength: 200,
  });
  const owners = new Map<string, string>();
  /** The SSE responses open now: a shutdown ends them (a client gone without a word keeps its socket). */
  const streams = new Set<FastifyReply["raw"]>();

  /** This gateway as its loopback clients reach it (a wildcard listen address is reached on loopback). */
  const selfUrl = (): string => {
    const address = app.server.address();
    const port = typeof address === "object" && address ? address.port : config.port;
    const host = config.host === "0.0.0.0" ? "127.0.0.1" : config.host === "::" ? "::1" : config.host;
    return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  };

  const local = { open: 0 };

  /**
   * The ACP agent of one connection, acting with the token of the request that opened it. Its runs
   * follow their events on this gateway's own feeds, as the caller's socket would (the same
   * checks), not through a socket to itself; every other call goes over HTTP to itself.
   */
  const agentFor = (req: FastifyRequest, onClosed: () => void) => {
    const token = rawToken(req.raw) ?? undefined;
    const acpLog = log.child({ component: "acp" });
    const caller = callerOf(req) ?? s.tenants.openCaller;
    const appForConnection = mooringAcpAgent({
      mooring: new MooringClient({ url: selfUrl(), token, localEvents: localEventSource(s, caller, local) }),
      defaultAgent: config.acpAgent,
      version: s.identity.version,
      warn: (msg, fields) => acpLog.warn(fields ?? {}, msg),
    });
    appForConnection.onConnect((connection) => {
      void connection.closed.finally(onClosed);
    });
    return appForConnection;
  };

  app.register(async (scope) => {
    // The SDK reads the body itself (its own JSON and batch errors): hand it the text, bounded.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(
      "*",
      { parseAs: "string", bodyLimit: config.bodyLimitBytes },
      (_req, body, done) => done(null, body),
    );

    const http = async (req: FastifyRequest, reply: FastifyReply) => {
      const connectionId = req.headers[CONNECTION_HEADER];
      const owner = ownerOf(callerOf(req));
      // Any connection id this caller did not open is unknown to it (a made-up one is unknown to all).
      if (typeof connectionId === "string" && owners.get(connectionId) !== owner) {
        return reply.status(404).type("text/plain").send("Unknown Acp-Connection-Id");
      }
      const slot: { id?: string } = {};
      const abort = new AbortController();
      // The client went away before its answer (the request's own "close" only says its body was read).
      reply.raw.once("close", () => {
        if (!reply.raw.writableFinished) abort.abort();
      });
      const request = new Request(`http://acp.local${req.url}`, {
        method: req.method,
        headers: req.headers as Record<string, string>,
        body: req.method === "POST" ? String(req.body ?? "") : undefined,
        signal: abort.signal,
      });
      const response = await server.handleRequest(request, {
        createAgent: () =>
          agentFor(req, () => {
            if (slot.id) owners.delete(slot.id);
          }),
      });
      const opened = response.headers.get(CONNECTION_HEADER);
      if (opened && response.status === 200) {
        slot.id = opened;
        owners.set(opened, owner);
      }
      if (req.method === "DELETE" && response.status === 202 && typeof connectionId === "string")
        owners.delete(connectionId);
      return send(reply, response, streams);
    };

    scope.route({ method: ["POST", "DELETE"], url: "/acp", schema: { hide: true }, handler: http });
    scope.route({
      method: "GET",
      url: "/acp",
      schema: { hide: true },
      handler: http,
      wsHandler: (socket, req) => {
        // A WebSocket connection is in the same registry as HTTP ones: bound to its caller too,
        // so its id cannot be used over HTTP with another token.
        const slot: { id?: string } = {};
        const prepared = server.prepareWebSocketUpgrade({
          agent: agentFor(req, () => {
            if (slot.id) owners.delete(slot.id);
          }),
        });
        slot.id = prepared.connectionId;
        owners.set(prepared.connectionId, ownerOf(callerOf(req)));
        deflateSendsHere(socket);
        prepared.accept(socket as never);
      },
    });
  });

  return {
    get localSubscriptions() {
      return local.open;
    },
    name: "acp connections",
    start() {},
    stop: async () => {
      await server.close();
      for (const raw of streams) raw.destroy();
    },
  };
}

/** A Web Response onto fastify's reply: the SSE streams as a stream, the rest as it is. */
async function send(
  reply: FastifyReply,
  response: Response,
  streams: Set<FastifyReply["raw"]>,
): Promise<FastifyReply> {
  reply.status(response.status);
  response.headers.forEach((value, name) => {
    reply.header(name, value);
  });
  if (!response.body) return reply.send();
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) {
    // Headers go out now, not with the first event: the SDK's client waits for the stream to open
    // before it posts a session's requests, and an idle stream may say nothing for a while.
    reply.hijack();
    reply.raw.writeHead(response.status, reply.getHeaders() as Record<string, string>);
    reply.raw.flushHeaders();
    const body = Readable.fromWeb(response.body as never);
    streams.add(reply.raw);
    reply.raw.once("close", () => {
      streams.delete(reply.raw);
      body.destroy();
    });
    body.on("error", () => reply.raw.destroy());
    body.pipe(reply.raw);
    return reply;
  }
  return reply.send(Buffer.from(await response.arrayBuffer()));
}
