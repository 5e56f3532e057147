/**
 * Where the gateway is and how to authenticate: `--url` / MOORING_URL and `--token` /
 * MOORING_TOKEN. The token is never printed: not in `--help` (no default shown), not in errors
 * (every message the CLI prints passes `redact`).
 */
import { ConnectionError, MooringClient } from "../client/index.js";
import { UsageError } from "./exit-codes.js";

export const defaultUrl = "http://127.0.0.1:8787";

export interface ConnectionOptions {
  url?: string;
  token?: string;
  connectTimeout?: string;
}

export interface Connection {
  client: MooringClient;
  url: string;
  /** Replaces the token wherever it appears in a message about to be printed. */
  redact: (text: string) => string;
  /** What to print for an error: redacted, and "cannot reach <url>: why" for an unreachable gateway. */
  message: (err: unknown) => string;
}

/** An error's own message, for a command that failed before it had a connection. */
export const plainMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

// The causes fetch and sockets name (undici puts them in `cause`, as "fetch failed" says nothing).
const reasons: Record<string, string> = {
  ECONNREFUSED: "connection refused (is the gateway running? `npm start` starts one)",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found (DNS lookup failed)",
  ETIMEDOUT: "the connection timed out",
  UND_ERR_CONNECT_TIMEOUT: "the connection timed out",
  ECONNRESET: "the connection was reset",
  EHOSTUNREACH: "no route to the host",
  ENETUNREACH: "the network is unreachable",
};

/** "cannot reach http://…: connection refused" rather than the SDK's "GET /v1/tasks: fetch failed". */
export function unreachable(err: ConnectionError, url: string): string {
  let cause: unknown = err.cause;
  while (cause instanceof Error && cause.cause instanceof Error) cause = cause.cause;
  const code = (cause as { code?: string } | undefined)?.code;
  const why = (code && reasons[code]) ?? (cause instanceof Error ? cause.message : err.message);
  const shown = new URL(url);
  shown.username = "";
  shown.password = "";
  return `cannot reach ${shown.origin}${shown.pathname === "/" ? "" : shown.pathname}: ${why}`;
}

export function connect(options: ConnectionOptions, env: NodeJS.ProcessEnv = process.env): Connection {
  const url = options.url || env.MOORING_URL || defaultUrl;
  const token = options.token || env.MOORING_TOKEN || undefined;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new Error("not http");
  } catch {
    throw new UsageError(
      `--url / MOORING_URL must be an http(s) URL, got ${JSON.stringify(redactWith(token)(url))}`,
    );
  }
  const readyTimeoutMs = parseConnectTimeout(options.connectTimeout ?? env.MOORING_CONNECT_TIMEOUT_MS);
  const redact = redactWith(token);
  return {
    client: new MooringClient({ url, token, readyTimeoutMs }),
    url,
    redact,
    message: (err) => redact(err instanceof ConnectionError ? unreachable(err, url) : plainMessage(err)),
  };
}

function parseConnectTimeout(value: string | undefined): number | undefined {
  if (value === undefined || value === "") return undefined;
  if (!/^\d+$/.test(value))
    throw new UsageError(`--connect-timeout must be milliseconds (digits), got ${JSON.stringify(value)}`);
  return Number(value);
}

export function redactWith(token: string | undefined): (text: string) => string {
  if (!token) return (text) => text;
  return (text) => text.split(token).join("[token]");
}
