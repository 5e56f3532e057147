/**
 * At startup the database may still be coming up, or go away again between the first answer and
 * the migrations (a restart, a failover, a connection terminated while it opened). Each startup
 * step that needs it (migrate, register the instance, reconcile) waits for it and starts over with
 * backoff whenever it is away, instead of crashing the start.
 */
import type { Logger } from "pino";
import { isDatabaseUnavailable } from "../errors.js";
import { retrying, retryPolicies } from "../lib/retry.js";
import type { Database } from "./client.js";

/**
 * `select 1`, then `steps` (each safe to repeat), and what they answer; started over while the
 * database is away, until `stopping()` (a shutdown ends the startup instead). Any other error from
 * `steps` fails the startup.
 */
export async function untilDatabaseAnswers<T>(
  db: Database,
  log: Logger,
  stopping: () => boolean,
  steps: () => Promise<T>,
): Promise<T> {
  let answered = false;
  return await retrying(
    retryPolicies.startup,
    async () => {
      answered = false;
      await db.sql`select 1`;
      answered = true;
      return await steps();
    },
    {
      retryable: (err) => !stopping() && (!answered || isDatabaseUnavailable(err)),
      onRetry: (err, retryInMs) =>
        log.warn({ err: String(err), retryInMs }, "database unreachable at startup; retrying"),
    },
  );
}
