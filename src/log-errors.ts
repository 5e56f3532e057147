/**
 * Errors in the log without client data. A failed query's error carries what the client sent:
 * drizzle's message and stack end with `params: …` and it keeps `params`; postgres.js keeps
 * `parameters`/`args`/`query` (hidden unless debug) and Postgres' `detail`/`where` quote the
 * offending input (a JSON parse error quotes the document up to the error). Logged as they were,
 * five 900 KB bodies added 13 MB of client data to the log. This serializer (pino's
 * `err`, installed by the gateway on its logger) keeps what an operator needs: the error's type,
 * its SQLSTATE code, its message with quoted values cut, a short identity of the statement (its
 * first words, never its parameters), the schema names Postgres reports, and the stack frames.
 */

const MAX_MESSAGE = 300;
const MAX_QUERY = 120;
const MAX_FRAMES = 12;

export interface LoggedError {
  type: string;
  message: string;
  code?: string;
  query?: string;
  constraint?: string;
  table?: string;
  column?: string;
  stack?: string;
  cause?: LoggedError;
}

/** pino serializer for `err`: an Error (with its causes) or a string made from one. */
export function safeErrorSerializer(value: unknown): unknown {
  if (typeof value === "string") return safeMessage(value);
  if (value instanceof Error) return describe(value, 0);
  return value;
}

function describe(err: Error, depth: number): LoggedError {
  const e = err as Error & Record<string, unknown>;
  const query = typeof e.query === "string" ? e.query : undefined;
  const out: LoggedError = {
    type: err.constructor?.name ?? err.name,
    // drizzle's message is "Failed query: <sql>\nparams: <values>": the statement identity is
    // kept below, the values never.
    message: query && err.message.startsWith("Failed query:") ? "Failed query" : safeMessage(err.message),
  };
  if (typeof e.code === "string") out.code = e.code;
  if (query) out.query = shortQuery(query);
  for (const key of ["constraint_name", "table_name", "column_name"] as const) {
    const name = e[key];
    if (typeof name === "string") out[key.replace("_name", "") as "constraint" | "table" | "column"] = name;
  }
  const frames = (err.stack ?? "").split("\n").filter((line) => line.startsWith("    at "));
  if (frames.length > 0) out.stack = frames.slice(0, MAX_FRAMES).join("\n");
  if (err.cause instanceof Error && depth < 4) out.cause = describe(err.cause, depth + 1);
  return out;
}

/**
 * A message with what may be client data cut: anything after drizzle's `params:`, quoted values
 * after a colon (`invalid input syntax for type uuid: "…"`), quoted strings that are not plain
 * identifiers; at most MAX_MESSAGE characters.
 */
export function safeMessage(message: string): string {
  let text = message;
  const params = text.indexOf("\nparams:");
  if (params >= 0) text = text.slice(0, params);
  text = text
    .replace(/: "(?:[^"\\]|\\.)*"/g, ': "…"')
    .replace(/"((?:[^"\\]|\\.)*)"/g, (quoted, inner: string) =>
      /^[A-Za-z_][A-Za-z0-9_.$]{0,62}$/.test(inner) ? quoted : '"…"',
    );
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}

/** The statement's first words, whitespace collapsed: enough to tell which one failed. */
function shortQuery(query: string): string {
  const text = query.replace(/\s+/g, " ").trim();
  return text.length > MAX_QUERY ? `${text.slice(0, MAX_QUERY)}…` : text;
}
