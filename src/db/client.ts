/**
 * The one connection pool (postgres.js). Rows come back with camelCase keys and int8 as JS numbers
 * (seqs and counters stay far below 2^53). The tables are declared once, in drizzle's schema
 * (schema.ts, from which drizzle-kit generates the migrations); every statement is named SQL in
 * sql/ over this pool, and the migrations are applied over it too (migrate.ts). No drizzle handle:
 * drizzle rewires its client's type parsers (dates come back as strings), which would need a
 * second pool.
 */
import postgres from "postgres";

export type Sql = postgres.Sql<Record<string, unknown>>;
export type Tx = postgres.TransactionSql<Record<string, unknown>>;
/** Either the pool or a transaction: named SQL functions accept both. */
export type Queryable = Sql | Tx;

export interface Database {
  sql: Sql;
  url: string;
  close(): Promise<void>;
}

/**
 * Seconds postgres.js waits before reconnecting after a failed attempt. Its default grows to 20 s,
 * and every query on a closed connection waits that long before it can even fail, so while the
 * database is away a readiness probe or a submit would hang for tens of seconds and a recovered
 * database would be noticed late. Capped at 1 s: quick to fail, quick to recover, and at most a
 * few attempts per second per connection against a database that is down.
 */
export const reconnectBackoff = (retries: number): number => Math.min(0.05 * 2 ** retries, 1);

/**
 * postgres.js 3.4.9 bug (porsager/postgres#1154, #1208, unfixed upstream): when a connection
 * closes under a transaction, `begin` sends its ROLLBACK on that closed connection; the write is
 * deferred with setImmediate and then dereferences the connection's null socket, an uncaught
 * TypeError that would end the process whenever the database goes away. Nothing waits on that
 * write: the connection's queries were already rejected (CONNECTION_CLOSED) and `begin` rejects
 * through the connection's onclose. The entry point ignores exactly this error and replaces the
 * pools (main.ts, `recyclePools`).
 */
export function isClosedSocketWrite(err: unknown): boolean {
  if (!(err instanceof TypeError) || !err.message.includes("'write'")) return false;
  const stack = err.stack ?? "";
  return stack.includes("nextWrite") && /postgres[\\/](cjs[\\/])?src[\\/]connection\.js/.test(stack);
}

/**
 * postgres.js 3.4.9 bug (porsager/postgres#1192, #1205, #1223, open upstream): every new connection
 * first fetches the array types (`fetch_types`) in a promise nothing awaits, so when the database
 * goes away during that query (CONNECTION_CLOSED, 57P01, a cancel) its rejection is unhandled and
 * would end the process. The queries waiting for that connection fail on their own and are retried
 * as "database away"; the entry point ignores exactly this rejection (main.ts). Seen when Postgres
 * stopped just as a pool opened a connection.
 */
export function isDroppedTypeFetch(err: unknown): boolean {
  const query = (err as { query?: unknown } | null)?.query;
  return (
    typeof query === "string" && /^\s*select b\.oid, b\.typarray\s+from pg_catalog\.pg_type\b/.test(query)
  );
}

/** Every open Database, so pools holding a connection broken by that bug can be replaced. */
const openDatabases = new Set<{ recycle(): void }>();
let recycleScheduled = false;

/**
 * Replace every open pool with a fresh one and end the old ones (their running queries fail with
 * CONNECTION_DESTROYED, which callers treat as "database away" and retry).
 * Called after an `isClosedSocketWrite` error: the connection that threw keeps a stale write
 * buffer and timer, so it would never send its next startup message and every query routed to it
 * would wait for connect_timeout; measured, that held readiness and lease renewal back ~10 s.
 * Calls within one tick are coalesced.
 */
export function recyclePools(): void {
  if (recycleScheduled) return;
  recycleScheduled = true;
  setImmediate(() => {
    recycleScheduled = false;
    for (const db of openDatabases) db.recycle();
  });
}

export function connect(url: string, options: { max?: number; applicationName?: string } = {}): Database {
  const applicationName = options.applicationName ?? "mooring";
  const pool = () =>
    postgres(url, {
      backoff: reconnectBackoff,
      max: options.max ?? 10,
      onnotice: () => {},
      // Column names only. `postgres.camel` also rewrote every key inside json/jsonb values on
      // read (a client's metadata `my_key` came back `myKey`, an agent's tool input `file_path`
      // became `filePath`) and recursed into them (deep values overflowed the stack).
      transform: { column: { from: postgres.toCamel, to: postgres.fromCamel } },
      connection: { application_name: applicationName },
      types: {
        int8: {
          to: 20,
          from: [20],
          serialize: (value: number) => String(value),
          parse: (value: string) => Number(value),
        },
      },
      // Reconnects are handled per query by postgres.js; keep idle connections so LISTEN-free pools stay warm.
      idle_timeout: 0,
      connect_timeout: 10,
    }) as unknown as Sql;
  let current = pool();
  const database = {
    // Read at every use, so a recycled pool takes over for every caller.
    get sql() {
      return current;
    },
    url,
    recycle() {
      const old = current;
      current = pool();
      // timeout 0: end at once. With a grace, postgres.js ends idle connections and never rejects
      // a `reserve` still queued in the old pool, whose caller would then wait forever.
      void old.end({ timeout: 0 }).catch(() => {});
    },
    close: async () => {
      openDatabases.delete(database);
      await current.end({ timeout: 5 });
    },
  };
  openDatabases.add(database);
  return database;
}
