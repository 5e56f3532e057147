/** pino JSON logs; readable output when stdout is a terminal. */
import { AsyncLocalStorage } from "node:async_hooks";
import { createRequire } from "node:module";
import { type DestinationStream, type Logger, pino } from "pino";
import { safeErrorSerializer } from "./log-errors.js";

/**
 * The request a piece of work belongs to. The HTTP edge enters it for each request, so lines the
 * domain logs while serving it (through the root logger) carry the request's `reqId` too.
 */
export const requestContext = new AsyncLocalStorage<{ reqId: string; tenant?: string }>();

/**
 * pino mixin adding `reqId` (and the caller's `tenant`) from the request context, unless the
 * logger already binds them. A line that names a tenant itself (a lifecycle line names its
 * resource's) keeps its own: the logged object wins over the mixin.
 */
export function requestIdMixin(_merge: object, _level: number, logger: Logger): object {
  const store = requestContext.getStore();
  if (!store || "reqId" in logger.bindings()) return {};
  return store.tenant === undefined ? { reqId: store.reqId } : { reqId: store.reqId, tenant: store.tenant };
}

/**
 * Readable lines for a terminal, formatted in this process (a person reading a terminal is the
 * bottleneck, not the formatting). Not pino's worker-thread transport: that needs pino's own files
 * on disk, and `npm start` runs pino bundled (scripts/start.mjs); pino-pretty is loaded only here.
 */
function prettyStream(): DestinationStream {
  const build = createRequire(import.meta.url)("pino-pretty") as (options: object) => DestinationStream;
  // One line per record: a request's fields spread over a dozen lines buried everything.
  return build({ colorize: true, translateTime: "SYS:HH:MM:ss.l", singleLine: true });
}

/** Whether logs are the readable lines for a person (MOORING_LOG_FORMAT, `auto` on a terminal) rather than JSON. */
export function isPrettyLog(format: "auto" | "json" | "pretty"): boolean {
  return format === "pretty" || (format === "auto" && process.stdout.isTTY === true);
}

export function createLogger(level: string, format: "auto" | "json" | "pretty" = "auto"): Logger {
  const pretty = isPrettyLog(format);
  const options = {
    level,
    base: { pid: process.pid },
    mixin: requestIdMixin,
    // Secrets never reach a log: fastify's request lines go through requestForLog (no headers),
    // and this catches an authorization header logged by anything else.
    redact: {
      paths: ["authorization", "headers.authorization", "req.headers.authorization"],
      censor: "[redacted]",
    },
    serializers: { err: safeErrorSerializer },
  };
  return pretty ? pino(options, prettyStream()) : pino(options);
}

/** A URL fit for a log: the value of every `access_token` query parameter replaced. */
export function redactUrl(url: string): string {
  const mark = url.indexOf("?");
  if (mark === -1) return url;
  const params = new URLSearchParams(url.slice(mark + 1));
  if (!params.has("access_token")) return url;
  params.set("access_token", "[redacted]"); // replaces every occurrence
  return `${url.slice(0, mark)}?${params.toString()}`;
}

/** How a request appears in fastify's `incoming request` lines: no headers, the URL redacted. */
export function requestForLog(req: {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}): Record<string, unknown> {
  return {
    method: req.method,
    url: redactUrl(req.url),
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}
