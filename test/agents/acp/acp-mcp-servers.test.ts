/**
 * An ACP client's `mcpServers` through `/acp` (docs/acp-server.md): handed to a backing ACP agent
 * (the real test agent, test/support/acp-agent.ts, which reports what it received) on its
 * session/new, and again on its session/load after its process was reaped and restarted; stored
 * as the session's `agentConfig.mcpServers`, also settable on the REST create. A non-empty list for
 * an agent on another driver, a bad shape, a withheld env name and another list on session/load
 * are refused with clear errors naming the field.
 */

import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { McpServerHttp, McpServerStdio } from "@agentclientprotocol/sdk";
import { afterEach, beforeAll, expect, it } from "vitest";
import { AcpTestClient, agentText, rpcErrorOf as errorOf } from "../../support/acp-client.js";
import { getSession, LogRecorder } from "../../support/agent-gateway.js";
import { useGateway } from "../../support/use-gateway.js";
import type { TestGateway } from "../../support/gateway.js";
import { call } from "../../support/gateway.js";
import { runTurn } from "../../support/turns.js";

const agentScript = fileURLToPath(new URL("../../support/acp-agent.ts", import.meta.url));
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

const stdio: McpServerStdio = {
  name: "files",
  command: "/usr/bin/mcp-files",
  args: ["--root", "."],
  env: [{ name: "FILES_TOKEN", value: "t0k" }],
};
const http: McpServerHttp & { type: "http" } = {
  type: "http",
  name: "search",
  url: "https://mcp.example.test/search",
  headers: [{ name: "x-key", value: "k1" }],
};

const logs = new LogRecorder();
const clients: AcpTestClient[] = [];
// The agent keeps its conversations in the workspace's `.agent-state`.
const suite = useGateway({ start: false, workspace: true });
let gw: TestGateway;
beforeAll(async () => {
  const agents = {
    "acp-test": {
      driver: "acp",
      command: process.execPath,
      args: ["--import", tsxLoader, agentScript],
      env: { ACP_TEST_STATE_DIR: join(suite.workspace, ".agent-state") },
    },
  };
  gw = await suite.startGateway(
    { MOORING_AGENTS: JSON.stringify(agents), MOORING_ACP_AGENT: "simulated", MOORING_AGENT_IDLE_MS: "300" },
    { onLog: (record) => logs.push(record as never) },
  );
});
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

const open = async (): Promise<AcpTestClient> => {
  const c = AcpTestClient.http(gw.url);
  clients.push(c);
  await c.initialize();
  return c;
};

/** What the test agent's `[mcp]` reported: how the session was opened and the servers that came with it. */
const mcpIn = (text: string): { via: string; servers: unknown } => {
  const found = /mcp via (new|load): (.*?) \| /.exec(text);
  if (!found) throw new Error(`no [mcp] report in ${text}`);
  return { via: found[1], servers: JSON.parse(found[2]) };
};

const prompt = async (c: AcpTestClient, sessionId: string, text: string): Promise<string> => {
  const before = c.of(sessionId).length;
  const answer = await c.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  expect(answer.stopReason).toBe("end_turn");
  return agentText(c.of(sessionId).slice(before));
};

it("hands the mcpServers to the backing ACP agent on session/new, and again on session/load after its process is reaped", async () => {
  const c = AcpTestClient.http(gw.url);
  clients.push(c);
  const init = await c.initialize();
  expect(init.agentCapabilities?.mcpCapabilities).toEqual({ http: true, sse: true });
  const { sessionId } = await c.agent.request("session/new", {
    cwd: suite.workspace,
    mcpServers: [stdio, http],
    _meta: { mooring: { agent: "acp-test" } },
  });

  const first = await prompt(c, sessionId, "[mcp] [pid]");
  expect(mcpIn(first)).toEqual({ via: "new", servers: [stdio, http] });
  const firstPid = /pid: (\d+)/.exec(first)?.[1];
  expect((await getSession(gw.url, sessionId)).agentConfig).toEqual({ mcpServers: [stdio, http] });

  await logs.next("idle reap", { sessionId });
  await logs.next("agent exited", { sessionId });
  // The ACP client, too, comes back later: an empty list on load means "as the session was made".
  c.close();
  const later = await open();
  await later.agent.request("session/load", { sessionId, cwd: suite.workspace, mcpServers: [] });
  const second = await prompt(later, sessionId, "[mcp] [pid]");
  expect(mcpIn(second)).toEqual({ via: "load", servers: [stdio, http] });
  expect(/pid: (\d+)/.exec(second)?.[1]).not.toBe(firstPid);
  expect(logs.named("agent session resumed").filter((r) => r.sessionId === sessionId)).toHaveLength(1);

  // Another list on load is refused, not silently ignored; the same list is accepted.
  const other = await errorOf(
    later.agent.request("session/load", {
      sessionId,
      cwd: suite.workspace,
      mcpServers: [{ ...stdio, args: [] }],
    }),
  );
  expect(other).toMatchObject({ code: -32602, data: { code: "INVALID_REQUEST", field: "mcpServers" } });
  expect(other.message).toMatch(/keeps the MCP servers it was created with/);
  await later.agent.request("session/resume", { sessionId, cwd: suite.workspace, mcpServers: [stdio, http] });
});

it("refuses a non-empty mcpServers for an agent on another driver, naming the field and the agent", async () => {
  const c = await open();
  const refused = await errorOf(
    c.agent.request("session/new", {
      cwd: suite.workspace,
      mcpServers: [stdio],
      _meta: { mooring: { agent: "simulated" } },
    }),
  );
  expect(refused).toMatchObject({ code: -32602, data: { code: "INVALID_REQUEST", field: "mcpServers" } });
  expect(refused.message).toMatch(/agent "simulated" uses the simulated driver/);
  const sessions = await call(gw.url, "GET", "/v1/sessions");
  expect(sessions.status).toBe(200);
  expect(sessions.body.items.filter((s: { agent: string }) => s.agent === "simulated")).toEqual([]);

  const rest = await call(gw.url, "POST", "/v1/sessions", {
    workspace: suite.workspace,
    agent: "simulated",
    agentConfig: { mcpServers: [stdio] },
  });
  expect(rest.status).toBe(400);
  expect(rest.body.error).toMatchObject({ code: "INVALID_REQUEST", field: "agentConfig.mcpServers" });
  expect(rest.body.error.message).toMatch(/agent "simulated"/);
});

it.each([
  [
    "a stdio server without a command",
    [{ name: "x", args: [], env: [] }],
    /mcpServers\[0\]\.command must be a non-empty string/,
  ],
  ["a server named twice", [stdio, { ...stdio }], /names a server twice/],
  ["an unknown transport", [{ ...http, type: "websocket" }], /mcpServers\[0\]\.type must be http or sse/],
  [
    "the gateway's own env name",
    [{ ...stdio, env: [{ name: "DATABASE_URL", value: "postgres://x" }] }],
    /DATABASE_URL is withheld/,
  ],
  [
    "too many servers",
    Array.from({ length: 17 }, (_, i) => ({ ...stdio, name: `s${i}` })),
    /at most 16 servers/,
  ],
])("refuses %s with a clear error", async (_what, servers, message) => {
  const rest = await call(gw.url, "POST", "/v1/sessions", {
    workspace: suite.workspace,
    agent: "acp-test",
    agentConfig: { mcpServers: servers },
  });
  expect(rest.status).toBe(400);
  expect(rest.body.error).toMatchObject({ code: "INVALID_REQUEST", field: "agentConfig.mcpServers" });
  expect(rest.body.error.message).toMatch(message);
});

it("takes agentConfig.mcpServers on the REST create, and fails the turn clearly when the agent lacks a server's transport", async () => {
  const made = await call(gw.url, "POST", "/v1/sessions", {
    workspace: suite.workspace,
    agent: "acp-test",
    agentConfig: { mcpServers: [stdio] },
  });
  expect(made.status).toBe(201);
  const turn = await runTurn(gw.url, made.body.id, "[mcp]");
  expect(mcpIn(turn.result.text)).toEqual({ via: "new", servers: [stdio] });

  const sse = await call(gw.url, "POST", "/v1/sessions", {
    workspace: suite.workspace,
    agent: "acp-test",
    agentConfig: { mcpServers: [{ ...http, type: "sse" }] },
  });
  expect(sse.status).toBe(201);
  const failed = await runTurn(gw.url, sse.body.id, "[mcp]");
  expect(failed.status).toBe("failed");
  expect(failed.error).toMatchObject({ code: "AGENT_START_FAILED" });
  expect(failed.error.message).toMatch(/does not accept sse MCP servers/);
});
