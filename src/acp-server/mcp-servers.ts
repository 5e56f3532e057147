/**
 * An ACP client's `mcpServers` (docs/acp-server.md): on `session/new` they become the session's
 * `agentConfig.mcpServers`, which the gateway checks (the shape, the bounds, the withheld env names)
 * and refuses for any agent not on the acp driver, and which the ACP driver sends with every
 * `session/new` and `session/load` of the backing agent. A session keeps the list it was made with:
 * a `session/load` or `session/resume` naming another list is refused, never silently ignored.
 */
import { type McpServer, RequestError } from "@agentclientprotocol/sdk";
import type { Session } from "../client/types.js";

const refusal = (message: string) => RequestError.invalidParams({ code: "INVALID_REQUEST", field: "mcpServers" }, message);

/** The agentConfig to create the session with: the client's `mcpServers` added to it. */
export function withMcpServers(agentConfig: unknown, servers: McpServer[]): unknown {
  if (servers.length === 0) return agentConfig;
  if (agentConfig === undefined) return { mcpServers: servers };
  // Not an object: left as it is for the gateway to refuse in its own words.
  if (typeof agentConfig !== "object" || agentConfig === null || Array.isArray(agentConfig)) return agentConfig;
  const given = (agentConfig as Record<string, unknown>).mcpServers;
  if (Array.isArray(given) && given.length > 0)
    throw refusal("give MCP servers once: in mcpServers or in _meta.mooring.agentConfig.mcpServers, not both");
  return { ...agentConfig, mcpServers: servers };
}

/** The gateway's refusal of `agentConfig.mcpServers`, in the words of the ACP field the list came in. */
export function namingMcpServers(err: unknown): unknown {
  if (!(err instanceof RequestError)) return err;
  const data = err.data as Record<string, unknown> | undefined;
  if (data?.field !== "agentConfig.mcpServers") return err;
  return RequestError.invalidParams({ ...data, field: "mcpServers" }, err.message.replaceAll("agentConfig.mcpServers", "mcpServers"));
}

/** One server as comparable text: the fields ACP defines, in a fixed order. */
function canonical(server: McpServer): string {
  const s = server as Record<string, unknown>;
  const pairs = (v: unknown) => (Array.isArray(v) ? v.map((p) => [p?.name, p?.value]) : []);
  return "url" in s
    ? JSON.stringify([s.type, s.name, s.url, pairs(s.headers)])
    : JSON.stringify(["stdio", s.name, s.command, s.args ?? [], pairs(s.env)]);
}

/** Refuses a load or resume that names MCP servers other than the session's own (an empty list means "as made"). */
export function sameMcpServers(session: Session, given: McpServer[]): void {
  if (given.length === 0) return;
  const stored = (session.agentConfig as Record<string, unknown> | undefined)?.mcpServers;
  const own = Array.isArray(stored) ? (stored as McpServer[]) : [];
  const same = own.length === given.length && own.every((s, i) => canonical(s) === canonical(given[i]));
  if (!same)
    throw refusal(
      "a session keeps the MCP servers it was created with; send an empty mcpServers list or the same list on session/load and session/resume",
    );
}
