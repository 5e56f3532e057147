/**
 * The setting of a test file that runs the real Claude Code CLI through gateways, as one setup
 * call: useAgentGateways (a pooled database, a folder and workspace per test, gateways and CLIs
 * stopped after it) plus the loopback fake of the Anthropic API for the file, answering nothing
 * until the test says what.
 *
 *   const t = useClaudeCode("mooring-claude-fork-");
 *   it("…", async () => {
 *     t.fake.respond((r) => ({ text: `Answer to ${r.lastUserText}` }));
 *     const { url, logs } = await t.boot();
 *     const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
 *   });
 */
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach } from "vitest";
import type { LogRecorder } from "./agent-gateway.js";
import { type AgentGatewaysBundle, useAgentGateways } from "./agent-gateways.js";
import { type FakeAnthropic, startFakeAnthropic } from "./fake-anthropic.js";
import { repoRoot, type TestGateway } from "./gateway.js";

export const claudeBin = join(repoRoot, "node_modules/.bin/claude");

export interface ClaudeCodeBundle extends Omit<AgentGatewaysBundle, "boot"> {
  readonly fake: FakeAnthropic;
  /** `root/config`: the CLI's CLAUDE_CONFIG_DIR. */
  readonly configDir: string;
  /** The `claude` registry entry: the real CLI on this fake and config folder, `more` over it. */
  entry(more?: Record<string, unknown>): Record<string, unknown>;
  /** A gateway (useAgentGateways' boot) with `agents`, by default `claude` as entry() makes it. */
  boot(
    env?: Record<string, string>,
    agents?: Record<string, unknown>,
  ): Promise<{ gw: TestGateway; url: string; logs: LogRecorder }>;
}

export function useClaudeCode(prefix = "mooring-claude-"): ClaudeCodeBundle {
  const base = useAgentGateways(prefix, "claude-code spawned");
  let fake: FakeAnthropic | undefined;
  beforeAll(async () => {
    fake = await startFakeAnthropic();
  });
  afterAll(async () => {
    await fake?.close();
  });
  beforeEach(() => {
    fake?.respond(() => undefined);
  });
  const bundle: ClaudeCodeBundle = Object.create(base, {
    fake: {
      get() {
        if (!fake) throw new Error("the fake Anthropic API is there only in a test or a hook");
        return fake;
      },
    },
    configDir: {
      get: () => join(base.root, "config"),
    },
    entry: {
      value: (more: Record<string, unknown> = {}) => ({
        driver: "claude-code",
        command: claudeBin,
        env: {
          ANTHROPIC_BASE_URL: bundle.fake.url,
          ANTHROPIC_API_KEY: "test",
          CLAUDE_CONFIG_DIR: bundle.configDir,
        },
        ...more,
      }),
    },
    boot: {
      value: (
        env: Record<string, string> = {},
        agents: Record<string, unknown> = { claude: bundle.entry() },
      ) => base.boot(agents, env),
    },
  });
  return bundle;
}
