/**
 * The MCP servers a session hands to its ACP agent (`agentConfig.mcpServers`, docs/acp-server.md):
 * ACP's own `McpServer` union (stdio `{name, command, args, env}`, `{type: "http" | "sse", name,
 * url, headers}`), checked here and stored with the session, so every `session/new` and
 * `session/load` of the agent, after any restart, gets the same list.
 *
 * An entry is a command line the agent will run. That is no privilege beyond a prompt's (the
 * caller's own agent in the caller's own workspace can already be asked to run anything), but the
 * environment it names passes through the gateway, so the names the gateway withholds from agents
 * (agents/agent-env.ts) are refused here too.
 */
import type { McpServer } from "@agentclientprotocol/sdk";
import { GATEWAY_SECRETS, matches } from "../agent-env.js";

export type { McpServer };

export const MAX_MCP_SERVERS = 16;
const MAX_NAME_CHARS = 128;
const MAX_TEXT_CHARS = 4096;
const MAX_LIST = 64;

type Checked = { ok: true; servers: McpServer[] } | { ok: false; problem: string };

class Problem extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function text(value: unknown, where: string, max: number): string {
  if (typeof value !== "string" || value === "") throw new Problem(`${where} must be a non-empty string`);
  if (value.length > max) throw new Problem(`${where} must be at most ${max} characters`);
  if (value.includes("\u0000")) throw new Problem(`${where} must not contain NUL`);
  return value;
}

function only(server: Record<string, unknown>, allowed: string[], where: string): void {
  const extra = Object.keys(server).find((k) => !allowed.includes(k));
  if (extra !== undefined) throw new Problem(`${where}.${extra.slice(0, 64)} is not an MCP server field (accepted: ${allowed.join(", ")})`);
}

/** `[{name, value}]` (env, headers), bounded; `nameOk` refuses names that may not pass. */
function pairs(value: unknown, where: string, nameOk: (name: string) => string | null): { name: string; value: string }[] {
  if (!Array.isArray(value)) throw new Problem(`${where} must be an array of {name, value}`);
  if (value.length > MAX_LIST) throw new Problem(`${where} must have at most ${MAX_LIST} entries`);
  return value.map((pair, i) => {
    if (!isObject(pair)) throw new Problem(`${where}[${i}] must be an object {name, value}`);
    only(pair, ["name", "value"], `${where}[${i}]`);
    const name = text(pair.name, `${where}[${i}].name`, MAX_NAME_CHARS);
    const refused = nameOk(name);
    if (refused) throw new Problem(`${where}[${i}].name ${refused}`);
    if (typeof pair.value !== "string" || pair.value.length > MAX_TEXT_CHARS)
      throw new Problem(`${where}[${i}].value must be a string of at most ${MAX_TEXT_CHARS} characters`);
    return { name, value: pair.value };
  });
}

function server(value: unknown, where: string, withheld: readonly string[]): McpServer {
  if (!isObject(value)) throw new Problem(`${where} must be an object`);
  const name = text(value.name, `${where}.name`, MAX_NAME_CHARS);
  if (value.type === "http" || value.type === "sse") {
    only(value, ["type", "name", "url", "headers"], where);
    const url = text(value.url, `${where}.url`, MAX_TEXT_CHARS);
    if (!/^https?:\/\//i.test(url)) throw new Problem(`${where}.url must be an http or https URL`);
    const headers = pairs(value.headers ?? [], `${where}.headers`, (n) =>
      /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(n) ? null : "must be an HTTP header name",
    );
    return { type: value.type, name, url, headers };
  }
  if (value.type !== undefined && value.type !== "stdio")
    throw new Problem(`${where}.type must be http or sse (or absent, for a stdio server)`);
  only(value, ["type", "name", "command", "args", "env"], where);
  const command = text(value.command, `${where}.command`, MAX_TEXT_CHARS);
  const args = value.args ?? [];
  if (!Array.isArray(args) || args.length > MAX_LIST || !args.every((a) => typeof a === "string" && a.length <= MAX_TEXT_CHARS))
    throw new Problem(`${where}.args must be an array of at most ${MAX_LIST} strings of at most ${MAX_TEXT_CHARS} characters`);
  const env = pairs(value.env ?? [], `${where}.env`, (n) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(n)) return "must be an environment variable name";
    return withheld.some((p) => matches(n, p)) ? `${n} is withheld from agents by the gateway` : null;
  });
  return { name, command, args: args as string[], env };
}

/**
 * Checks a session's `mcpServers` (problems name the field, e.g. `agentConfig.mcpServers[1].command`).
 * `deny` is the operator's MOORING_AGENT_ENV_DENY, refused in a server's `env` as the gateway's own secrets are.
 */
export function checkMcpServers(value: unknown, deny: readonly string[] = []): Checked {
  const where = "agentConfig.mcpServers";
  try {
    if (!Array.isArray(value)) throw new Problem(`${where} must be an array of MCP servers`);
    if (value.length > MAX_MCP_SERVERS) throw new Problem(`${where} must list at most ${MAX_MCP_SERVERS} servers`);
    const withheld = [...GATEWAY_SECRETS, ...deny];
    const servers = value.map((s, i) => server(s, `${where}[${i}]`, withheld));
    const names = new Set(servers.map((s) => s.name));
    if (names.size !== servers.length) throw new Problem(`${where} names a server twice`);
    return { ok: true, servers };
  } catch (err) {
    if (err instanceof Problem) return { ok: false, problem: err.message };
    throw err;
  }
}

/** The stored list of a session's (validated at create), or none. */
export function mcpServersOf(agentConfig: Record<string, unknown>): McpServer[] {
  return Array.isArray(agentConfig.mcpServers) ? (agentConfig.mcpServers as McpServer[]) : [];
}

/** The transports among `servers` that an agent's `mcpCapabilities` does not accept. */
export function unsupportedTransports(
  servers: McpServer[],
  capabilities: { http?: boolean; sse?: boolean } | null | undefined,
): string[] {
  const needed = new Set(servers.flatMap((s) => ("type" in s ? [s.type] : [])));
  return [...needed].filter((t) => capabilities?.[t] !== true);
}
