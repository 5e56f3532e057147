/**
 * `mooring run` against a real Agent Client Protocol agent (the ACP test agent, a child
 * process of the gateway), not only the simulated one: text streams to stdout, the tool shows on
 * stderr, exit 0; a second turn with --continue reaches the same agent conversation.
 */
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";

const agentScript = fileURLToPath(new URL("../support/acp-agent.ts", import.meta.url));
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const t = cliFixture(
  {},
  {
    agents: {
      "acp-test": {
        driver: "acp",
        command: process.execPath,
        args: ["--import", tsxLoader, agentScript],
        permissions: "deny",
      },
    },
  },
);

describe("mooring run with an ACP agent", () => {
  it("streams the agent's text, shows its tool, exits 0; --continue reaches the same conversation", async () => {
    const env = t.env();
    const args = ["run", "--workspace", t.workspace, "--agent", "acp-test"];
    const first = await runCli([...args, "[chunks 3] [tool 64]"], { env });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe("chunk 1/3 chunk 2/3 chunk 3/3 ");
    expect(first.stderr).toMatch(/running · tool /);
    const second = await runCli([...args, "--continue", "[history]"], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/^history: 1 \[\[chunks 3\] \[tool 64\]\]/);
  });
});
