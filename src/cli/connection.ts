/**
 * Where the gateway is and how to authenticate: `--url` / MOORING_URL and `--token` /
 * MOORING_TOKEN. The token is never printed: not in `--help` (no default shown), not in errors
 * (every message the CLI prints passes `redact`).
 */
import { MooringClient } from "../client/index.js";
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
  return {
    client: new MooringClient({ url, token, readyTimeoutMs }),
    url,
    redact: redactWith(token),
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
