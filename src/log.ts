/** pino JSON logs; readable output when stdout is a terminal. */
import { AsyncLocalStorage } from "node:async_hooks";
import { type Logger, pino } from "pino";
import { safeErrorSerializer } from "./log-errors.js";

/**
 * The request a piece of work belongs to. The HTTP edge enters it for each request, so lines the
 * domain logs while serving it (through the root logger) carry the request's `reqId` too.
 */
export const requestContext = new AsyncLocalStorage<{ reqId: string }>();

/** pino mixin adding `reqId` from the request context, unless the logger already binds one. */
export function requestIdMixin(_merge: object, _level: number, logger: Logger): object {
  const store = requestContext.getStore();
  if (!store || "reqId" in logger.bindings()) return {};
  return { reqId: store.reqId };
}

export function createLogger(level: string, format: "auto" | "json" | "pretty" = "auto"): Logger {
  const pretty = format === "pretty" || (format === "auto" && process.stdout.isTTY === true);
  return pino({
    level,
    base: { pid: process.pid },
    mixin: requestIdMixin,
    serializers: { err: safeErrorSerializer },
    ...(pretty ? { transport: { target: "pino-pretty", options: { colorize: true, translateTime: "SYS:HH:MM:ss.l" } } } : {}),
  });
}
