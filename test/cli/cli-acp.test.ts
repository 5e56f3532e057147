/**
 * Issue 15: `mooring run` against a real Agent Client Protocol agent (the ACP test agent, a child
 * process of the gateway), not only the simulated one: text streams to stdout, the tool shows on
 * stderr, exit 0; a second turn with --continue reaches the same agent conversation.
 */
import { createRequire } from "node:module";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway.js";
import { killAllClis, runCli } from "../support/cli.js";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { startTestGateway } from "../support/gateway.js";

const agentScript = fileURLToPath(new URL("../support/acp-agent.ts", import.meta.url));
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

let db: TestDatabase;
let gw: Gateway;
let workspace: string;
let stateHome: string;

beforeAll(async () => {
  db = await createTestDatabase();
  const agents = {
    "acp-test": {
      driver: "acp",
      command: process.execPath,
      args: ["--import", tsxLoader, agentScript],
      permissions: "deny",
    },
  };
  gw = await startTestGateway(db.url, { MOORING_AGENTS: JSON.stringify(agents) });
  workspace = await mkdtemp(join(tmpdir(), "mooring-cli-acp-"));
  stateHome = await mkdtemp(join(tmpdir(), "mooring-cli-state-"));
});
afterEach(() => killAllClis());
afterAll(async () => {
  await gw?.stop();
  await db?.drop();
  await rm(workspace, { recursive: true, force: true });
  await rm(stateHome, { recursive: true, force: true });
});

describe("mooring run with an ACP agent", () => {
  it("streams the agent's text, shows its tool, exits 0; --continue reaches the same conversation", async () => {
    const env = { XDG_STATE_HOME: stateHome, MOORING_URL: gw.url };
    const args = ["run", "--workspace", workspace, "--agent", "acp-test"];
    const first = await runCli([...args, "[chunks 3] [tool 64]"], { env });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe("chunk 1/3 chunk 2/3 chunk 3/3 ");
    expect(first.stderr).toMatch(/running · tool /);
    const second = await runCli([...args, "--continue", "[history]"], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/^history: 1 \[\[chunks 3\] \[tool 64\]\]/);
  });
});
