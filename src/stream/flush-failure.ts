/**
 * What a failed event-log flush means: wait and retry the same transaction, or isolate what
 * Postgres refuses (stream/event-lane.ts).
 *
 * Some failures are about the bytes of the flush and fail again on every retry: a data exception
 * (SQLSTATE class 22, e.g. `\u0000` in jsonb, invalid JSON, a lone surrogate's escape), an
 * integrity violation (23), a program limit (54, e.g. a value too large), a value the driver
 * refuses, or an error building the statement (a value JSON cannot encode). Retrying those forever
 * froze the whole lane, and every session on it, until a restart: they are isolated.
 * Everything else (the database away, a deadlock, a timeout, a server in recovery, even an
 * authentication error after a restart) may pass on a later attempt and is retried.
 */
import { RolledBack } from "../db/pipeline.js";
import { isDatabaseUnavailable } from "../errors.js";

const contentClasses = new Set(["22", "23", "54"]);
/** postgres.js refusing a value before sending it. */
const contentDriverCodes = new Set(["UNDEFINED_VALUE", "MAX_PARAMETERS_EXCEEDED"]);

/** True when retrying the same flush cannot succeed: its content must be isolated instead. */
export function isPoisonedFlush(err: unknown): boolean {
  if (isDatabaseUnavailable(err) || err instanceof RolledBack) return false;
  const e = err as { name?: unknown; code?: unknown } | null;
  if (typeof e?.code === "string") {
    if (e.name === "PostgresError") return contentClasses.has(e.code.slice(0, 2));
    return contentDriverCodes.has(e.code);
  }
  // A plain error (TypeError, RangeError) came from building the statements: the data again.
  return err instanceof Error;
}

/** A short, data-free description of why Postgres refused something (for logs and notices). */
export function refusalOf(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown; name?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : String(e?.name ?? "Error");
  const message = typeof e?.message === "string" ? e.message.split("\n")[0].slice(0, 200) : "";
  return `${message} (${code})`;
}
