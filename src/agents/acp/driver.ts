/**
 * The `acp` driver: runs any Agent Client Protocol agent the operator registered, over stdio
 * (docs/agents.md). See docs/acp.md.
 */
import type { AgentDriver } from "../driver.js";
import { validateAcpConfig } from "./config.js";
import { AcpConversation } from "./conversation.js";

export const acpDriver: AgentDriver = {
  name: "acp",
  validateConfig: validateAcpConfig,
  // Nothing is spawned here: the process starts with the first turn, which can report failures.
  open: (options) => new AcpConversation(options),
};
