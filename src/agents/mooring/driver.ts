/**
 * The `mooring` driver: another mooring gateway as the agent, reached with the client SDK
 * (docs/agents.md, Chained gateways). Sessions may choose only what applies to every driver.
 */
import { carryOverCharsProblem } from "../carry-over.js";
import type { AgentDriver } from "../driver.js";
import { UpstreamConversation } from "./conversation.js";
import { cancelUpstreamTask } from "./orphans.js";

export const mooringDriver: AgentDriver = {
  name: "mooring",
  validateConfig: (_entry, config) => {
    const cleaned: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(config)) {
      if (value === undefined) continue;
      if (field === "carryOverChars") {
        const problem = carryOverCharsProblem(value);
        if (problem) return { ok: false, problem };
        cleaned.carryOverChars = value;
        continue;
      }
      if (field !== "contextSuffix") {
        return {
          ok: false,
          problem: `agentConfig.${field} is not allowed for mooring (the registry entry sets the upstream's)`,
        };
      }
      if (typeof value !== "boolean")
        return { ok: false, problem: "agentConfig.contextSuffix must be a boolean" };
      cleaned.contextSuffix = value;
    }
    return { ok: true, config: cleaned };
  },
  open: (options) => new UpstreamConversation(options),
  abandon: cancelUpstreamTask,
};
