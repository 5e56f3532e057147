/**
 * What a client may choose for a session on an ACP agent. The operator's registry entry decides
 * whether the session may pick its permission answer at all (`permissions: "client"`).
 */
import type { AgentEntry } from "../registry.js";

type Validation = { ok: true; config: Record<string, unknown> } | { ok: false; problem: string };

export function validateAcpConfig(entry: AgentEntry, config: Record<string, unknown>): Validation {
  for (const [field, value] of Object.entries(config)) {
    if (field === "permissions" && entry.permissions === "client") {
      if (value !== "allow" && value !== "deny" && value !== "ask") {
        return { ok: false, problem: "agentConfig.permissions must be allow, deny or ask" };
      }
    } else if (field === "contextSuffix") {
      if (typeof value !== "boolean")
        return { ok: false, problem: "agentConfig.contextSuffix must be a boolean" };
    } else {
      return { ok: false, problem: `agentConfig.${field} is not allowed for acp` };
    }
  }
  return { ok: true, config: { ...config } };
}
