/**
 * A `mooring` registry entry (docs/agents.md, Chained gateways): another mooring gateway as the
 * agent. The token is read once, here, and kept in a `Secret` that never serializes, so no log
 * line, error or registry dump can carry it.
 */
import { isAbsolute } from "node:path";

/** A value that prints as `[redacted]` everywhere (JSON, inspection, string conversion). */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return "[redacted]";
  }
  toString(): string {
    return "[redacted]";
  }
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return "[redacted]";
  }
}

export interface UpstreamEntry {
  /** The upstream gateway's base URL. */
  url: string;
  token: Secret | undefined;
  /** The agent's name on the upstream gateway. */
  agent: string;
  /** Sent as the upstream session's `agentConfig`. */
  agentConfig: Record<string, unknown>;
  /** Workspace prefixes, downstream → upstream, longest first. */
  workspaceMap: [string, string][];
  /** Reconnect backoff (full jitter): the first wait is at most `reconnectBaseMs`, doubling to `reconnectMaxMs`. */
  reconnectBaseMs: number;
  reconnectMaxMs: number;
}

export const upstreamFields = [
  "driver",
  "url",
  "token",
  "tokenEnv",
  "agent",
  "agentConfig",
  "workspaceMap",
  "reconnectBaseMs",
  "reconnectMaxMs",
];

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Parses the fields of a `mooring` entry; `fail` throws the registry's error naming the entry. */
export function parseUpstreamEntry(
  v: Record<string, unknown>,
  fail: (problem: string) => never,
  env: NodeJS.ProcessEnv = process.env,
): UpstreamEntry {
  for (const key of Object.keys(v)) {
    if (!upstreamFields.includes(key))
      fail(`unknown field "${key}" (accepted: ${upstreamFields.join(", ")})`);
  }
  let url: URL | null = null;
  try {
    url = typeof v.url === "string" ? new URL(v.url) : null;
  } catch {
    url = null;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) fail("url must be an http(s) URL");
  // The URL is logged with every upstream line: credentials belong in token / tokenEnv.
  if (url && (url.username || url.password || url.search))
    fail("url must carry no credentials or query (use token or tokenEnv)");
  if (v.token !== undefined && v.tokenEnv !== undefined) fail("give token or tokenEnv, not both");
  if (v.token !== undefined && (typeof v.token !== "string" || v.token === ""))
    fail("token must be a non-empty string");
  let token = typeof v.token === "string" ? new Secret(v.token) : undefined;
  if (v.tokenEnv !== undefined) {
    if (typeof v.tokenEnv !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.tokenEnv)) {
      fail("tokenEnv must be an environment variable name");
    }
    const value = env[v.tokenEnv as string];
    if (!value) fail(`tokenEnv names ${v.tokenEnv}, which is not set`);
    token = new Secret(value as string);
  }
  if (typeof v.agent !== "string" || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(v.agent)) {
    fail("agent must name an agent of the upstream gateway");
  }
  const agentConfig = v.agentConfig ?? {};
  if (!isObject(agentConfig)) fail("agentConfig must be an object");
  const map = v.workspaceMap ?? {};
  if (!isObject(map)) fail("workspaceMap must be an object of path prefixes");
  const workspaceMap: [string, string][] = [];
  for (const [from, to] of Object.entries(map as Record<string, unknown>)) {
    if (!isAbsolute(from) || typeof to !== "string" || !isAbsolute(to)) {
      fail("workspaceMap must map absolute path prefixes to absolute path prefixes");
    }
    workspaceMap.push([from.replace(/\/+$/, ""), (to as string).replace(/\/+$/, "")]);
  }
  workspaceMap.sort((a, b) => b[0].length - a[0].length);
  const ms = (key: string, fallback: number) => {
    const value = v[key] ?? fallback;
    if (!Number.isInteger(value) || (value as number) < 1) fail(`${key} must be a positive integer`);
    return value as number;
  };
  return {
    url: (url as URL).toString().replace(/\/+$/, ""),
    token,
    agent: v.agent as string,
    agentConfig: agentConfig as Record<string, unknown>,
    workspaceMap,
    reconnectBaseMs: ms("reconnectBaseMs", 2_000),
    reconnectMaxMs: ms("reconnectMaxMs", 30_000),
  };
}

/** The upstream path of a downstream workspace: the longest matching prefix replaced, else the same path. */
export function mapWorkspace(workspace: string, map: [string, string][]): string {
  for (const [from, to] of map) {
    if (workspace === from) return to;
    if (workspace.startsWith(`${from}/`)) return to + workspace.slice(from.length);
  }
  return workspace;
}
