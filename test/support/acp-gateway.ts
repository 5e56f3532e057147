/**
 * The setting of a test file that runs the ACP test agent (test/support/acp-agent.ts) through
 * gateways, as one setup call: useAgentGateways (a pooled database, a folder and workspace per
 * test, gateways and agents stopped after it) plus the agent's registry entry.
 *
 *   const t = useAcpAgents("mooring-gw-acp-");
 *   it("…", async () => {
 *     const { url } = await t.boot({ "acp-test": t.entry({ permissions: "deny" }) });
 *   });
 */
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { type AgentGatewaysBundle, useAgentGateways } from "./agent-gateways.js";
import { repoRoot } from "./gateway.js";

export const acpAgentScript = join(repoRoot, "test/support/acp-agent.ts");
/** Absolute: the agent runs in a temp workspace where a bare `tsx` would not resolve. */
export const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

export interface AcpAgentsBundle extends AgentGatewaysBundle {
  /** `root/agent-state`: where the test agent keeps its conversations (ACP_TEST_STATE_DIR). */
  readonly stateDir: string;
  /** The test agent's registry entry (its state in stateDir), `more` over it. */
  entry(more?: Record<string, unknown>): Record<string, unknown>;
}

export function useAcpAgents(prefix = "mooring-acp-"): AcpAgentsBundle {
  const base = useAgentGateways(prefix, "agent spawned");
  const bundle: AcpAgentsBundle = Object.create(base, {
    stateDir: { get: () => join(base.root, "agent-state") },
    entry: {
      value: (more: Record<string, unknown> = {}) => ({
        driver: "acp",
        command: process.execPath,
        args: ["--import", tsxLoader, acpAgentScript],
        env: { ACP_TEST_STATE_DIR: bundle.stateDir },
        ...more,
      }),
    },
  });
  return bundle;
}
