/**
 * `mooring acp` (docs/acp-server.md): the real command as a child process, driven over its stdio
 * by the ACP SDK's client app (ndJsonStream), against a real gateway: prompts stream with
 * `_meta.mooring.seq` on the simulated agent and on a real ACP agent behind mooring (the test
 * agent, whose tool call shows); a second prompt reaches the same session; and a gateway killed
 * with kill -9 mid-turn and restarted: the editor's process stays up, every update arrives
 * exactly once, a restart notice shows, and the prompt answers the interruption.
 */
import { createRequire } from "node:module";
import type { ContentBlock } from "@agentclientprotocol/sdk";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { AcpTestClient, agentText, seqOf } from "../support/acp-client.js";
import { killAllClis } from "../support/cli.js";
import type { TestDatabase } from "../support/db.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";
import { TcpProxy } from "../support/tcp-proxy.js";

const agentScript = fileURLToPath(new URL("../support/acp-agent.ts", import.meta.url));
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const agents = {
  "acp-test": { driver: "acp", command: process.execPath, args: ["--import", tsxLoader, agentScript], permissions: "deny" },
};

const procs = new Processes();
let db: TestDatabase;
let workspace: string;
useProcessSuite("mooring-acp-stdio-", procs, (d, w) => {
  db = d;
  workspace = w;
});
afterEach(() => killAllClis());

const text = (t: string): ContentBlock[] => [{ type: "text", text: t }];

describe("mooring acp over stdio", () => {
  it("streams prompts on the simulated agent and on a real ACP agent; a second prompt reaches the same session", async () => {
    const gw = await procs.spawn(gatewayEnv(db.url, { MOORING_AGENTS: JSON.stringify(agents) }));
    await gw.waitReady();
    const c = AcpTestClient.stdio(["--url", gw.url, "--agent", "simulated"]);
    const init = await c.initialize();
    expect(init.agentInfo?.name).toBe("mooring");

    const { sessionId } = await c.agent.request("session/new", { cwd: workspace, mcpServers: [] });
    const first = await c.agent.request("session/prompt", { sessionId, prompt: text("[deltas 3] [tool 50]") });
    expect(first.stopReason).toBe("end_turn");
    const seqs = c.of(sessionId).map(seqOf) as number[];
    expect(seqs.every((s) => Number.isInteger(s))).toBe(true);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => seqs[0] + i));
    expect(c.of(sessionId).map((n) => n.update.sessionUpdate)).toContain("tool_call");
    const again = await c.agent.request("session/prompt", { sessionId, prompt: text("[deltas 2]") });
    expect(again.stopReason).toBe("end_turn");
    const tasks = await c.agent.request<any>("_mooring/tasks/get", { taskId: (again._meta as any).mooring.taskId });
    expect(tasks.sessionId).toBe(sessionId);
    expect(tasks.turnIndex).toBe(1);

    const real = await c.agent.request("session/new", {
      cwd: workspace,
      mcpServers: [],
      _meta: { mooring: { agent: "acp-test" } },
    });
    const answer = await c.agent.request("session/prompt", { sessionId: real.sessionId, prompt: text("[chunks 3] [tool 64]") });
    expect(answer.stopReason).toBe("end_turn");
    expect(agentText(c.of(real.sessionId))).toBe("chunk 1/3 chunk 2/3 chunk 3/3 ");
    const tool = c.of(real.sessionId).find((n) => n.update.sessionUpdate === "tool_call")!.update as any;
    expect(tool.title).toBe("generate");
    expect(tool.rawInput).toEqual({ bytes: 64 });
    const history = await c.agent.request("session/prompt", { sessionId: real.sessionId, prompt: text("[history]") });
    expect(history.stopReason).toBe("end_turn");
    expect(agentText(c.of(real.sessionId))).toMatch(/history: 1 \[\[chunks 3\] \[tool 64\]\]/);
    expect(c.child.exitCode).toBeNull();
  });

  it("a gateway killed with kill -9 mid-turn: the process stays up, each update once, a restart notice, the interruption as the answer", async () => {
    const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: "acp-stdio-restart" });
    const firstGw = await procs.spawn(env);
    await firstGw.waitReady();
    const proxy = await TcpProxy.start(firstGw.url);
    try {
      const c = AcpTestClient.stdio(["--url", proxy.url, "--agent", "simulated"]);
      await c.initialize();
      const { sessionId } = await c.agent.request("session/new", { cwd: workspace, mcpServers: [] });
      const answer = c.agent.request("session/prompt", { sessionId, prompt: text("[deltas 5] [hang]") }).then(
        (value) => ({ value }),
        (error) => ({ error }),
      );
      await c.updates.waitFor((n) => n.sessionId === sessionId && n.update.sessionUpdate === "agent_message_chunk");
      firstGw.kill("SIGKILL");
      expect(await exitedWithOutput(firstGw)).toBe("SIGKILL");
      const secondGw = await procs.spawn(env);
      proxy.setTarget(secondGw.url);

      const outcome = (await answer) as { error?: any };
      expect(outcome.error?.data).toMatchObject({ code: "GATEWAY_RESTART", status: "interrupted" });
      const taskId = outcome.error.data.taskId;
      const log = await db.sql<{ seq: number }[]>`select seq from events where task_id = ${taskId} order by seq`;
      const relayed = c.of(sessionId).map(seqOf).filter((s) => s !== undefined);
      expect(relayed).toEqual(log.map((e) => e.seq));
      const notices = c.of(sessionId).filter((n) => (n.update._meta as any)?.mooring?.restart === true);
      expect(notices).toHaveLength(1);
      expect(c.child.exitCode).toBeNull();
    } finally {
      await proxy.close();
    }
  });

  it("with MOORING_RECOVERY=continue, a kill -9 mid-turn: the prompt answers the continuation's completion", async () => {
    const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: "acp-stdio-continue", MOORING_RECOVERY: "continue" });
    const firstGw = await procs.spawn(env);
    await firstGw.waitReady();
    const proxy = await TcpProxy.start(firstGw.url);
    try {
      const c = AcpTestClient.stdio(["--url", proxy.url, "--agent", "simulated"]);
      await c.initialize();
      const { sessionId } = await c.agent.request("session/new", { cwd: workspace, mcpServers: [] });
      // A finished turn saves the conversation, so the interrupted one can be continued.
      await c.agent.request("session/prompt", { sessionId, prompt: text("hello") });
      const answer = c.agent.request("session/prompt", { sessionId, prompt: text("[deltas 2] [hang]") });
      const started = c.of(sessionId).length;
      await c.updates.waitFor(
        (n) => n.sessionId === sessionId && n.update.sessionUpdate === "agent_message_chunk" && c.of(sessionId).length > started,
      );
      firstGw.kill("SIGKILL");
      await exitedWithOutput(firstGw);
      const secondGw = await procs.spawn(env);
      proxy.setTarget(secondGw.url);
      const done = await answer;
      expect(done.stopReason).toBe("end_turn");
      const task = await c.agent.request<any>("_mooring/tasks/get", { taskId: (done._meta as any).mooring.taskId });
      expect(task.status).toBe("completed");
      expect(task.continuesTaskId).not.toBeNull();
      const types = c.of(sessionId).map((n) => (n.update._meta as any)?.mooring?.type);
      expect(types).toContain("task.interrupted");
      expect(types.at(-1)).toBe("task.completed");
      const seqs = c.of(sessionId).map(seqOf).filter((s) => s !== undefined) as number[];
      expect(new Set(seqs).size).toBe(seqs.length);
    } finally {
      await proxy.close();
    }
  });
});
