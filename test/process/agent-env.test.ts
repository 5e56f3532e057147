/**
 * Agents never inherit the gateway's secrets: the environment a real gateway process
 * gives a real ACP agent and a claude-code `command` (each records what it got), with tokens, a
 * database URL and Postgres variables in the gateway's own environment; `inheritEnv` allowlists;
 * and the rules of agents/agent-env.ts and the registry's validation on their own.
 */
import { chmod, readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { agentEnvironment } from "../../src/agents/agent-env.js";
import { loadAgentRegistry } from "../../src/agents/registry.js";
import { type GatewayProcess, repoRoot } from "../support/gateway.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";
import { useProcessGateway } from "../support/use-gateway.js";

const TOKEN = "agent-env-gateway-token-9f8e7d";
const agentScript = join(repoRoot, "test/support/acp-agent.ts");
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

describe("agentEnvironment", () => {
  const parent = {
    PATH: "/usr/bin",
    HOME: "/home/op",
    ANTHROPIC_API_KEY: "sk-ant",
    CLAUDE_CONFIG_DIR: "/cfg",
    HTTPS_PROXY: "http://proxy:3128",
    NO_PROXY: "localhost",
    MOORING_API_TOKENS: "t1,t2",
    MOORING_AGENTS: "{}",
    DATABASE_URL: "postgres://u:p@db/x",
    PGPASSWORD: "p",
    PGHOST: "db",
    AWS_SECRET_ACCESS_KEY: "aws",
    AWS_REGION: "eu",
    DEPLOY_KEY: "k",
  };

  it("passes what agents need and withholds MOORING_*, DATABASE_URL, PG* and the deny list", () => {
    const env = agentEnvironment({ env: { EXTRA: "1" } }, ["AWS_*", "DEPLOY_KEY"], parent);
    expect(env).toEqual({
      PATH: "/usr/bin",
      HOME: "/home/op",
      ANTHROPIC_API_KEY: "sk-ant",
      CLAUDE_CONFIG_DIR: "/cfg",
      HTTPS_PROXY: "http://proxy:3128",
      NO_PROXY: "localhost",
      EXTRA: "1",
    });
  });

  it("with inheritEnv passes only the names listed (never a withheld one), then the entry's env", () => {
    const env = agentEnvironment(
      {
        env: { CLAUDE_CONFIG_DIR: "/mine" },
        inheritEnv: ["PATH", "ANTHROPIC_API_KEY", "DEPLOY_KEY", "PGHOST"],
      },
      ["DEPLOY_KEY"],
      parent,
    );
    expect(env).toEqual({ PATH: "/usr/bin", ANTHROPIC_API_KEY: "sk-ant", CLAUDE_CONFIG_DIR: "/mine" });
  });

  it("the registry validates inheritEnv", () => {
    const entry = (inheritEnv: unknown) => () =>
      loadAgentRegistry(JSON.stringify({ a: { driver: "acp", command: "x", inheritEnv } }));
    expect(entry(["PATH", "HOME"])().get("a")?.inheritEnv).toEqual(["PATH", "HOME"]);
    expect(entry("PATH")).toThrow(/entry "a": inheritEnv must be an array of environment variable names/);
    expect(entry(["PATH", "not a name"])).toThrow(/inheritEnv must be an array/);
    expect(entry(["PATH", "MOORING_API_TOKENS"])).toThrow(
      /may not pass the gateway's own MOORING_API_TOKENS/,
    );
    expect(entry(["DATABASE_URL"])).toThrow(/DATABASE_URL/);
    expect(entry(["PGPASSWORD"])).toThrow(/PGPASSWORD/);
  });
});

describe("through a real gateway process", () => {
  // The agents' workspace holds the fake CLI and the files each agent writes its environment to.
  const suite = useProcessGateway({ workspace: true });
  let gw: GatewayProcess;
  const envFile = (name: string) => join(suite.workspace, `${name}.json`);

  beforeAll(async () => {
    // A claude-code `command` that records its environment and stops (the turn then fails).
    const fakeClaude = join(suite.workspace, "fake-claude.sh");
    await writeFile(
      fakeClaude,
      `#!/bin/sh\n"${process.execPath}" -e 'require("fs").writeFileSync(process.env.ENV_DUMP_FILE, JSON.stringify(process.env))'\nexit 3\n`,
    );
    await chmod(fakeClaude, 0o755);
    const acp = (name: string, extra: Record<string, unknown> = {}) => ({
      driver: "acp",
      command: process.execPath,
      args: ["--import", tsxLoader, agentScript],
      env: { ACP_TEST_ENV_FILE: envFile(name) },
      ...extra,
    });
    const agents = {
      "acp-default": acp("acp-default"),
      "acp-strict": acp("acp-strict", { inheritEnv: ["PATH", "ANTHROPIC_API_KEY"] }),
      "claude-fake": {
        driver: "claude-code",
        command: fakeClaude,
        env: { ENV_DUMP_FILE: envFile("claude-fake") },
      },
    };
    gw = await suite.spawn({
      LOG_LEVEL: "info",
      MOORING_API_TOKENS: TOKEN,
      MOORING_AGENTS: JSON.stringify(agents),
      MOORING_AGENT_ENV_DENY: "DEPLOY_*",
      PGPASSWORD: "pg-secret-password",
      PGUSER: "postgres",
      DEPLOY_SIGNING_KEY: "deploy-secret",
      ANTHROPIC_API_KEY: "sk-ant-for-agents",
      CLAUDE_CODE_SAMPLE: "claude-setting",
      HTTPS_PROXY: "http://proxy.example:3128",
    });
    await gw.waitReady();
  });

  const auth = { authorization: `Bearer ${TOKEN}` };
  async function turnOn(agent: string): Promise<Record<string, string>> {
    const sessionId = await createSession(gw.url, suite.workspace, { agent }, auth);
    const task = await submitPrompt(gw.url, sessionId, "hi", auth);
    await waitTask(gw.url, task.id, undefined, undefined, auth);
    return JSON.parse(await readFile(envFile(agent), "utf8"));
  }

  /** Nothing of the gateway's own: no token, no database URL or Postgres variable, no denied name. */
  function expectNoGatewaySecrets(env: Record<string, string>): void {
    const names = Object.keys(env);
    expect(
      names.filter((n) => n.startsWith("MOORING_") || n.startsWith("PG") || n.startsWith("DEPLOY_")),
    ).toEqual([]);
    expect(names).not.toContain("DATABASE_URL");
    const values = JSON.stringify(env);
    for (const secret of [TOKEN, suite.databaseUrl, "pg-secret-password", "deploy-secret"])
      expect(values).not.toContain(secret);
  }

  it("an ACP agent gets what agents need and none of the gateway's secrets", async () => {
    const env = await turnOn("acp-default");
    expectNoGatewaySecrets(env);
    expect(env).toMatchObject({
      ANTHROPIC_API_KEY: "sk-ant-for-agents",
      CLAUDE_CODE_SAMPLE: "claude-setting",
      HTTPS_PROXY: "http://proxy.example:3128",
      PATH: process.env.PATH,
      ACP_TEST_ENV_FILE: envFile("acp-default"),
    });
  });

  it("a claude-code command gets none of them either", async () => {
    const env = await turnOn("claude-fake");
    expectNoGatewaySecrets(env);
    expect(env).toMatchObject({
      ANTHROPIC_API_KEY: "sk-ant-for-agents",
      ENV_DUMP_FILE: envFile("claude-fake"),
    });
  });

  it("an entry with inheritEnv gets exactly the listed names and its own env", async () => {
    const env = await turnOn("acp-strict");
    expectNoGatewaySecrets(env);
    expect(Object.keys(env).sort()).toEqual(["ACP_TEST_ENV_FILE", "ANTHROPIC_API_KEY", "PATH"]);
  });
});
