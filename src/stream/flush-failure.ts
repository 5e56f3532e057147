/**
 * What a failed event-log flush means: wait and retry the same transaction, or isolate what
 * Postgres refuses (stream/event-lane.ts).
 *
 * Retrying helps only when the failure is about the connection or the server's state at that
 * moment: the database going away, a deadlock or serialization failure (class 40), lock or
 * resource exhaustion (53, 55), an operator intervention or a timeout (57), a system error (58,
 * XX). Everything else is about the bytes of the flush and fails again on every retry: a data
 * exception (class 22, e.g. `\u0000` in jsonb, invalid JSON), a program limit (54, e.g. a value too
 * large), a constraint, or an error building the statement (a value JSON cannot encode). Retrying
 * those forever froze the whole lane, and every session on it, until a restart (issue 11).
 */
import { RolledBack } from "../db/pipeline.js";
import { isDatabaseUnavailable } from "../errors.js";

const transientClasses = new Set(["08", "40", "53", "55", "57", "58", "XX"]);

/** True when retrying the same flush cannot succeed: its content must be isolated instead. */
export function isPoisonedFlush(err: unknown): boolean {
  if (isDatabaseUnavailable(err) || err instanceof RolledBack) return false;
  const e = err as { name?: unknown; code?: unknown } | null;
  if (e?.name === "PostgresError" && typeof e.code === "string") return !transientClasses.has(e.code.slice(0, 2));
  // postgres.js and Node report connection trouble with a code of their own (CONNECTION_*, E*).
  if (typeof e?.code === "string") return false;
  // A plain error (RangeError, TypeError) came from building the statements: the data again.
  return err instanceof Error;
}

/** A short, data-free description of why Postgres refused something (for logs and notices). */
export function refusalOf(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown; name?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : String(e?.name ?? "Error");
  const message = typeof e?.message === "string" ? e.message.split("\n")[0].slice(0, 200) : "";
  return `${message} (${code})`;
}
