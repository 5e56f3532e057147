/**
 * The connection pool (postgres.js) and the drizzle handle over it. Rows come back with camelCase
 * keys and int8 as JS numbers (seqs and counters stay far below 2^53).
 */
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema.js";

export type Sql = postgres.Sql<Record<string, unknown>>;
export type Tx = postgres.TransactionSql<Record<string, unknown>>;
/** Either the pool or a transaction: named SQL functions accept both. */
export type Queryable = Sql | Tx;

export interface Database {
  sql: Sql;
  orm: ReturnType<typeof drizzle<typeof schema>>;
  url: string;
  close(): Promise<void>;
}

export function connect(url: string, options: { max?: number; applicationName?: string } = {}): Database {
  const sql = postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    transform: postgres.camel,
    connection: { application_name: options.applicationName ?? "mooring" },
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
  // drizzle rewires its client's type parsers (dates come back as strings), so it gets a small
  // pool of its own and the named SQL keeps postgres.js' native types.
  const ormClient = postgres(url, {
    max: 2,
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? "mooring" },
  });
  const orm = drizzle(ormClient, { schema });
  return {
    sql,
    orm,
    url,
    close: async () => {
      await Promise.all([sql.end({ timeout: 5 }), ormClient.end({ timeout: 5 })]);
    },
  };
}
