/**
 * The HTTP edge: fastify with auth, readiness, one error shape for everything, OpenAPI at /docs,
 * and the REST, JSON-RPC, SSE and WebSocket routes. No business rules live here.
 */
import { boundConnections, serverTimeouts } from "./connection-bounds.js";
import { AsyncResource } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import websocket from "@fastify/websocket";
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from "fastify";
import type { Logger } from "pino";
import type { Config } from "../../config.js";
import { errors, MooringError, toMooringError } from "../../errors.js";
import { isPrettyLog, requestContext, requestForLog } from "../../log.js";
import { notReady } from "../readiness.js";
import type { Services } from "../services.js";
import { describeError, fieldOf } from "../validate.js";
import { refuse, registerAccessChecks } from "./access.js";
import { callerForLog, callerOf, rawCallerOf, resolveRawCaller, takeQueryToken } from "./auth.js";
import { ACCEPTED_CONTENT_TYPE, bodyEncodingRefusal } from "./body-encoding.js";
import { registerCompression } from "./compression.js";
import { pathOf, RPC_PATH, sendError } from "./error-answer.js";
import { completeOpenApi } from "./openapi-document.js";
import { trackRouteMethods } from "./route-methods.js";
import { type AcpRoute, registerAcpRoute } from "./routes/acp.js";
import { isConsolePath, registerConsoleRoutes } from "./routes/console.js";
import { registerDocsRoutes } from "./routes/docs.js";
import { registerEventRoutes, SseStreams } from "./routes/events.js";
import { type ReadyzView, registerHealthRoutes } from "./routes/health.js";
import { type MetricsSource, registerMetricsRoute } from "./routes/metrics.js";
import { registerInstanceRoutes } from "./routes/instances.js";
import { registerWebhookRoutes } from "./routes/webhooks.js";
import { registerRpcRoute } from "./routes/rpc.js";
import { registerSessionRoutes } from "./routes/sessions.js";
import { registerTaskRoutes } from "./routes/tasks.js";
import { quietPolledRoutes } from "./poll-log-level.js";
import { registerRequestLines } from "./request-lines.js";
import { validatorCompiler } from "./validator.js";
import { SocketErrorLog } from "../ws/protocol-errors.js";
import { onSocketError, registerSocketRoute, type SocketHub, WS_SUBPROTOCOL } from "../ws/socket.js";

const openRoutes = new Set(["/healthz", "/readyz"]);

/**
 * Response schemas document answers (contract/responses.ts); fast-json-stringify would also drop
 * every field a schema does not name. Answers stay plain JSON, checked by a test instead.
 */
const serializeJson = () => (data: unknown) => JSON.stringify(data);

export interface HttpApp {
  app: FastifyInstance;
  sockets: SocketHub;
  sse: SseStreams;
  acp: AcpRoute;
}

export async function buildHttpApp(
  config: Config,
  services: Services,
  log: Logger,
  health: { readyz(view: ReadyzView): Promise<{ ok: boolean; body: unknown }> },
  metrics: MetricsSource,
): Promise<HttpApp> {
  const identify = (reply: FastifyReply, reqId: string) => {
    reply.header("x-request-id", reqId);
    // Which boot answered: a client on REST or SSE tells a restart from a network flap by it.
    reply.header("x-mooring-boot-id", services.identity.bootId);
  };
  const onePerRequest = isPrettyLog(config.logFormat);
  const app: FastifyInstance = Fastify({
    // Request lines log no headers and no access_token (log.ts).
    loggerInstance: log.child({}, { serializers: { req: requestForLog } }) as unknown as FastifyBaseLogger,
    // Read by a person: one line per request instead (request-lines.ts).
    ...(onePerRequest ? { logController: new LogController({ disableRequestLogging: true }) } : {}),
    bodyLimit: config.bodyLimitBytes,
    ...serverTimeouts(config),
    // The gateway's own id correlates the logs; a client's id could name another request's.
    genReqId: () => randomUUID(),
    childLoggerFactory: (logger, bindings, options, raw) => {
      const given = clientRequestId(raw.headers["x-request-id"]);
      // Every line of the request names its tenant (docs/tenants.md); the token is resolved here,
      // once, and the auth hook takes the caller from here.
      const who = callerForLog(resolveRawCaller(raw, services.tenants));
      return logger.child({ ...bindings, ...who, ...(given ? { clientRequestId: given } : {}) }, options);
    },
    // Our own compilers from the start (below): fastify then never loads ajv and
    // fast-json-stringify, whose evaluation was a measurable part of a warm start (bench/README.md).
    // (fastify's types describe only ajv-shaped factories; at run time a factory returns any compiler.)
    schemaController: {
      compilersFactory: {
        buildValidator: (() => validatorCompiler) as never,
        buildSerializer: () => serializeJson,
      },
    },
    // The router refuses a malformed or overlong path segment (bad percent-encoding, a parameter
    // past 100 characters) before any route runs; answer it in the one error shape, not fastify's.
    frameworkErrors: (error, req, reply) => {
      const refused = errors.invalidUrl(
        error.code === "FST_ERR_MAX_PARAM_LENGTH" ? "param_too_long" : "bad_encoding",
      );
      // No hook runs for a request the router refused: it names itself and its boot here.
      identify(reply as FastifyReply, req.id);
      sendError(reply as FastifyReply, refused);
    },
  });
  // Bodies are JSON only: without fastify's default text/plain parser, any other type answers 415.
  app.removeContentTypeParser("text/plain");

  // Enter the request's context so domain log lines carry its reqId. Body parsing resumes in the
  // socket's async context, so preValidation re-enters it (as @fastify/request-context does).
  const scope = new WeakMap<object, AsyncResource>();
  app.addHook("onRequest", (req, _reply, done) => {
    const tenant = rawCallerOf(req.raw)?.tenant.name;
    requestContext.run(tenant === undefined ? { reqId: req.id } : { reqId: req.id, tenant }, () => {
      const resource = new AsyncResource("mooring-request");
      scope.set(req, resource);
      resource.runInAsyncScope(done, req.raw);
    });
  });
  app.addHook("preValidation", (req, _reply, done) => {
    const resource = scope.get(req);
    if (resource) resource.runInAsyncScope(done, req.raw);
    else done();
  });

  // First of all hooks: every answer names its request and boot, refusals and preflights included.
  app.addHook("onRequest", async (req, reply) => {
    identify(reply, req.id);
  });
  // Before the routes: the not-found handler tells 405 from 404 by them.
  const methodsOf = trackRouteMethods(app);

  await registerAccessChecks(app, config);

  const unauthorized = (req: FastifyRequest): MooringError | null => {
    const path = pathOf(req.url);
    if (openRoutes.has(path)) return null;
    // The console's pages and scripts hold no data; the API calls they make carry the token.
    if ((req.method === "GET" || req.method === "HEAD") && isConsolePath(path)) return null;
    // Scrapers on a private network may be let in without a token (MOORING_METRICS_PUBLIC).
    if (path === "/metrics" && config.metricsPublic) return null;
    if (callerOf(req)) return null;
    return errors.unauthorized();
  };

  app.addHook("onRequest", async (req, reply) => {
    // The token left the parsed query; the caller it stands for (every request's on an open
    // gateway) was resolved when the request's logger was made (auth.ts).
    takeQueryToken(req);
    if (rawCallerOf(req.raw) === undefined) resolveRawCaller(req.raw, services.tenants);
    // POST /v1/rpc refuses after reading the body, so its envelope carries the request's ids.
    const refused = isRpcCall(req) ? null : unauthorized(req);
    if (refused) return refuse(reply, refused);
    const encoding = bodyEncodingRefusal(req.headers);
    if (encoding) {
      if (encoding.reason === "content_encoding") reply.header("accept-encoding", "identity");
      return refuse(reply, encoding);
    }
    // `/v1/sessions/` matches `/sessions/:id` with an empty id: a trailing slash is no route, as
    // everywhere else (the wildcard `*` of /docs and the console may be empty).
    const params = req.params as Record<string, string> | undefined;
    if (params && Object.entries(params).some(([name, value]) => name !== "*" && value === "")) {
      return refuse(reply, noRoute(req));
    }
  });

  // A WebSocket upgrade refused before @fastify/websocket's own onRequest hook ran (e.g. 401) is
  // answered over the raw socket but never closed by that plugin: close it here, or the connection
  // lingers and holds up app.close() at shutdown.
  app.addHook("onResponse", async (req) => {
    const socket = req.raw.socket;
    if (req.headers.upgrade && socket && !socket.destroyed) socket.destroy();
  });

  registerCompression(app);

  app.setErrorHandler((error: FastifyError, req, reply) => {
    const mapped = mapFastifyError(error);
    if (mapped.code === "INTERNAL") req.log.error({ err: error }, "request failed");
    else req.log.debug({ code: mapped.code, msg: mapped.message }, "request refused");
    sendError(reply, mapped);
  });

  app.setNotFoundHandler((req, reply) => {
    const allowed = methodsOf(pathOf(req.url));
    if (allowed.length === 0 || allowed.includes(req.method)) return sendError(reply, noRoute(req));
    reply.header("allow", allowed.join(", "));
    return sendError(reply, errors.methodNotAllowed(req.method, pathOf(req.url), allowed));
  });

  // Before any route, like the docs below: probes, scrapes and the console's heartbeat log quietly.
  quietPolledRoutes(app, config.logLevel);
  if (onePerRequest) registerRequestLines(app);
  // Before any route: the docs record every route's schema as it is added (routes/docs.ts).
  registerDocsRoutes(app, {
    openapi: {
      info: {
        title: "mooring",
        version: services.identity.version,
        description: "Durable gateway for AI coding-agent sessions",
      },
      components: {
        securitySchemes: {
          bearer: { type: "http", scheme: "bearer" },
          accessToken: { type: "apiKey", in: "query", name: "access_token" },
        },
      },
    },
    transform: (doc) =>
      completeOpenApi(doc, {
        tokensRequired: services.tenants.tokensRequired,
        metricsPublic: config.metricsPublic,
      }),
  });
  const socketErrors = new SocketErrorLog();
  await app.register(websocket, {
    // As the plugin's default (log, terminate), with client-caused errors at warn level, throttled.
    errorHandler: (error, socket, req) => onSocketError(socketErrors, req.log, error, socket),
    options: {
      maxPayload: config.wsMaxPayloadBytes,
      // Only the documented subprotocol is accepted; one the client offers for something else
      // (`graphql-ws`) is not echoed back, so that client sees the server does not speak it.
      handleProtocols: (offered) => (offered.has(WS_SUBPROTOCOL) ? WS_SUBPROTOCOL : false),
      // No context takeover either way: each message is compressed on its own, so frames under
      // the threshold (hello, small answers) go out as they are and need no zlib stream, and a
      // quiet connection's zlib stream can be freed between messages (ws/socket.ts). A zlib
      // stream costs ~250 KiB of RSS; kept per connection it was 245 KiB per idle subscriber
      // (bench/results/history.md). Measured cost on the wire: see bench/README.md.
      perMessageDeflate: {
        threshold: 256,
        zlibDeflateOptions: { level: 6 },
        serverNoContextTakeover: true,
        clientNoContextTakeover: true,
      },
    },
  });

  registerHealthRoutes(app, health, (req) =>
    !services.tenants.tokensRequired ? "instance" : callerOf(req) ? "operator" : "status",
  );
  registerMetricsRoute(app, metrics);
  await yieldToIo();
  await registerConsoleRoutes(app, log);
  await yieldToIo();
  const sse = new SseStreams();
  await app.register(
    async (v1) => {
      // API routes answer NOT_READY until startup is done or while the database is away.
      v1.addHook("onRequest", async (req) => {
        const refusal = notReady(services);
        // POST /v1/rpc refuses after reading the body, so its envelope carries the request's ids.
        if (refusal && !isRpcCall(req)) throw refusal;
      });
      registerSessionRoutes(v1, services);
      await yieldToIo();
      registerTaskRoutes(v1, services);
      await yieldToIo();
      registerEventRoutes(v1, services, config, sse);
      registerInstanceRoutes(v1, services);
      registerWebhookRoutes(v1, services);
      await yieldToIo();
      registerRpcRoute(
        v1,
        services,
        log,
        { maxBatch: config.rpcMaxBatch },
        (req) => unauthorized(req) ?? notReady(services),
      );
    },
    { prefix: "/v1" },
  );
  const sockets = registerSocketRoute(app, services, config, log, socketErrors);
  const bounds = boundConnections(app.server, config);
  // Just before fastify closes the server (the SSE streams, sockets and ACP connections ended
  // first, gateway/http-server.ts): without this, a connection that never sent a request held
  // the close until its client dropped it. Requests in flight are still answered.
  app.addHook("preClose", (done) => {
    bounds.closeSilent();
    done();
  });
  // ACP clients (docs/acp-server.md): the gateway's stop ends their connections first.
  const acp = registerAcpRoute(app, services, config, log);
  return { app, sockets, sse, acp };
}

/**
 * Let pending I/O run between the parts of the app: building it is CPU work of a few hundred ms at
 * start, during which the database steps (connect, migrate: gateway.ts) wait on Postgres's answers;
 * each turn here lets them take their next step instead of all of them waiting for the end.
 */
function yieldToIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A client's own `x-request-id`, kept as a log field when it is short printable ASCII. */
function clientRequestId(given: string | string[] | undefined): string | null {
  return typeof given === "string" && /^[\x21-\x7e]{1,100}$/.test(given) ? given : null;
}

/** A call to the JSON-RPC route, which decides 401 and 503 itself once the body is read. */
const isRpcCall = (req: FastifyRequest) => req.method === "POST" && pathOf(req.url) === RPC_PATH;

const noRoute = (req: FastifyRequest) => errors.noRoute(req.method, pathOf(req.url));

function mapFastifyError(error: FastifyError): MooringError {
  if (error instanceof MooringError) return error;
  if (error.validation) {
    const first = error.validation[0] as Parameters<typeof fieldOf>[0];
    const field = fieldOf(first);
    const where = error.validationContext === "body" ? "" : `${error.validationContext} `;
    return errors.invalidRequest(`${where}${describeError(first)}`, field);
  }
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return errors.payloadTooLarge();
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return errors.unsupportedMediaType(ACCEPTED_CONTENT_TYPE);
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return errors.emptyBody();
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return errors.invalidJson();
  }
  if (error.statusCode === 400 && error instanceof SyntaxError) {
    return errors.invalidJson();
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return errors.invalidRequest(error.message);
  }
  return toMooringError(error);
}
