/**
 * A whole transaction in one round trip: BEGIN, the statements and COMMIT are written to one
 * reserved connection at once (postgres.js pipelines them) and Postgres runs them in order.
 *
 * Why: a transaction that takes the gate lock holds it until it commits. Sent one statement at a
 * time, it also holds it while the gateway's event loop gets round to sending the next statement,
 * which under load takes milliseconds per statement and serializes every submit and claim behind
 * it (bench/results/history.md). Pipelined, the lock is held only while Postgres executes.
 *
 * The statements cannot look at each other's answers, so whatever decides must happen in SQL: a
 * statement that finds the transaction must not commit raises an error, Postgres skips everything
 * after it (each answers "current transaction is aborted") and turns the COMMIT into a ROLLBACK.
 * `pipelined` then throws the first error in statement order, i.e. the cause.
 *
 * Each statement must be one tagged-template query issued synchronously by `build` (the named SQL
 * functions in sql/ that run a single statement qualify; one that awaits a first query before
 * sending a second would send it after the COMMIT), or `q.unsafe(text)` without parameters.
 * Nested query fragments are not supported.
 */
import { isDatabaseUnavailable } from "../errors.js";
import type { Sql, Tx } from "./client.js";

export class RolledBack extends Error {}

export async function pipelined<T extends readonly unknown[]>(
  sql: Sql,
  build: (q: Tx) => { [K in keyof T]: Promise<T[K]> },
): Promise<T> {
  const connection = await reserve(sql);
  let broken = false;
  try {
    // Every query is executed as it is created, so the order on the wire is the order of the calls.
    type Executable = { execute(): unknown };
    const raw = connection as unknown as ((s: TemplateStringsArray, ...a: unknown[]) => Executable) & {
      unsafe(text: string): Executable;
    };
    const q = Object.assign(
      (strings: TemplateStringsArray, ...args: unknown[]) => raw(strings, ...args).execute(),
      { unsafe: (text: string) => raw.unsafe(text).execute() },
    ) as unknown as Tx;
    const begin = q`begin` as unknown as Promise<unknown>;
    let statements: Promise<unknown>[];
    try {
      statements = build(q) as unknown as Promise<unknown>[];
      // A statement that could not even be built (e.g. a value JSON cannot encode, thrown inside
      // an async named-SQL function) is a promise rejected before anything was sent: the others
      // are on the wire, and a COMMIT now would commit the transaction without it.
      await unbuilt(statements);
    } catch (err) {
      // End the open transaction before the connection goes back to the pool, or its next user
      // runs inside it.
      await Promise.allSettled([begin, q`rollback` as unknown as Promise<unknown>]);
      throw err;
    }
    const commit = q`commit` as unknown as Promise<{ command: string }>;
    const settled = await settleUnlessBroken([begin, ...statements, commit]).catch((err) => {
      broken = true;
      throw err;
    });
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
    const committed = (settled[settled.length - 1] as PromiseFulfilledResult<{ command: string }>).value;
    if (committed.command !== "COMMIT") throw new RolledBack(`transaction ended with ${committed.command}`);
    return settled.slice(1, -1).map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
  } finally {
    // A connection that died under us is not released: postgres.js already took it back as
    // closed (and may be reconnecting it for someone else); `release` would put it among the
    // open ones with no socket, where the next query on it is lost (or crashes, see client.ts).
    if (!broken) connection.release();
  }
}

/**
 * Rejects with the error of a statement that already failed without reaching Postgres. Rejections
 * already there run their handlers within a microtask, queued before this function's own
 * continuation; a statement sent to Postgres cannot settle that fast (it needs I/O).
 */
async function unbuilt(statements: Promise<unknown>[]): Promise<void> {
  let failed: { err: unknown } | null = null;
  for (const statement of statements) {
    statement.then(
      () => {},
      (err) => {
        failed ??= { err };
      },
    );
  }
  await Promise.resolve();
  if (failed) throw (failed as { err: unknown }).err;
}

/**
 * `Promise.allSettled`, except that it rejects as soon as one statement fails because the
 * connection died. postgres.js queues the statements behind a parameterized one on the reserved
 * connection itself, and when that connection closes it never settles them: waiting for all would
 * hang the caller (a claim, a settlement, an event flush, a submit) forever.
 */
function settleUnlessBroken(all: Promise<unknown>[]): Promise<PromiseSettledResult<unknown>[]> {
  return new Promise((resolve, reject) => {
    for (const p of all) p.catch((err) => isDatabaseUnavailable(err) && reject(err));
    void Promise.allSettled(all).then(resolve);
  });
}

/** How long `pipelined` waits for a connection before it gives up with a retryable error. */
const RESERVE_TIMEOUT_MS = 5000;

class ReserveTimeout extends Error {
  /** Counts as "database away" (errors.ts): submits answer NOT_READY, background work retries. */
  readonly code = "CONNECT_TIMEOUT";
}

/**
 * `sql.reserve()` with a deadline. postgres.js 3.4.9 can strand a queued reserve forever when a
 * connection closes while it waits (porsager/postgres#1195: the reconnect takes it as its initial
 * query and drops it), which happens when the database restarts under load; an event-log flush
 * stuck there would hold every settlement behind it. A reserve that resolves after the deadline
 * is released at once.
 */
async function reserve(sql: Sql): Promise<Awaited<ReturnType<Sql["reserve"]>>> {
  const pending = sql.reserve();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ReserveTimeout("no database connection became free in time")), RESERVE_TIMEOUT_MS);
  });
  try {
    return await Promise.race([pending, deadline]);
  } catch (err) {
    if (err instanceof ReserveTimeout) void pending.then((c) => c.release(), () => {});
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
