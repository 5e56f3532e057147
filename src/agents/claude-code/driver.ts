/**
 * The `claude-code` driver: runs the Claude Code CLI in stream-json mode, one warm process per
 * mooring session (docs/agents.md). See docs/claude-code.md for the CLI behaviour it relies on.
 */
import type { AgentDriver } from "../driver.js";
import { validateClaudeCodeConfig } from "./config.js";
import { ClaudeConversation } from "./conversation.js";

export const claudeCodeDriver: AgentDriver = {
  name: "claude-code",
  validateConfig: validateClaudeCodeConfig,
  open: (options) => new ClaudeConversation(options),
  steer: true,
};
