/**
 * What a client may choose for a session on an ACP agent. The operator's registry entry decides
 * whether the session may pick its permission answer at all (`permissions: "client"`).
 */
import type { ConfigRules, ConfigValidation } from "../driver.js";
import { carryOverCharsProblem } from "../carry-over.js";
import type { AgentEntry } from "../registry.js";
import { checkMcpServers } from "./mcp-servers.js";

export function validateAcpConfig(entry: AgentEntry, config: Record<string, unknown>, rules?: ConfigRules): ConfigValidation {
  const cleaned: Record<string, unknown> = { ...config };
  for (const [field, value] of Object.entries(config)) {
    if (field === "permissions" && entry.permissions === "client") {
      if (value !== "allow" && value !== "deny" && value !== "ask") {
        return { ok: false, problem: "agentConfig.permissions must be allow, deny or ask" };
      }
    } else if (field === "contextSuffix") {
      if (typeof value !== "boolean")
        return { ok: false, problem: "agentConfig.contextSuffix must be a boolean" };
    } else if (field === "mcpServers") {
      const checked = checkMcpServers(value, rules?.agentEnvDeny);
      if (!checked.ok) return { ok: false, problem: checked.problem, field: "agentConfig.mcpServers" };
      if (checked.servers.length === 0) delete cleaned.mcpServers;
      else cleaned.mcpServers = checked.servers;
    } else if (field === "carryOverChars") {
      const problem = carryOverCharsProblem(value);
      if (problem) return { ok: false, problem };
    } else {
      return { ok: false, problem: `agentConfig.${field} is not allowed for acp` };
    }
  }
  return { ok: true, config: cleaned };
}
