/**
 * mooring as an ACP agent on `/acp` (docs/acp-server.md), driven by the ACP SDK's own client app
 * over its Streamable HTTP and WebSocket client transports against a real gateway: initialize,
 * session/new, a prompt whose updates stream with `_meta.mooring.seq` (one per event, no hole),
 * cancel, a dropped connection resumed by `session/load` with `afterSeq` (nothing lost, nothing
 * twice), tenants (B's token on A's session answers exactly what a missing id answers; B cannot
 * use A's connection), and bad input answered with JSON-RPC errors, never a 500.
 */
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { AcpTestClient, agentText, rpcErrorOf as errorOf, seqOf } from "../support/acp-client.js";
import { useGateway } from "../support/use-gateway.js";
import { eventually } from "../support/gateway.js";

const A = "acp-tenant-alpha-token-1111";
const B = "acp-tenant-beta-token-2222";
const MISSING = "00000000-0000-4000-8000-00000000dead";
const agentScript = fileURLToPath(new URL("../support/acp-agent.ts", import.meta.url));
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const agents = {
  "acp-test": {
    driver: "acp",
    command: process.execPath,
    args: ["--import", tsxLoader, agentScript],
    permissions: "deny",
  },
};

const suite = useGateway({
  env: {
    MOORING_TENANTS: JSON.stringify({ alpha: { tokens: [A] }, beta: { tokens: [B] } }),
    MOORING_ACP_AGENT: "simulated",
  },
  agents,
  workspace: true,
});
const clients: AcpTestClient[] = [];

const open = async (kind: "http" | "ws", token = A): Promise<AcpTestClient> => {
  const c = kind === "http" ? AcpTestClient.http(suite.url, token) : AcpTestClient.ws(suite.url, token);
  clients.push(c);
  await c.initialize();
  return c;
};

const newSession = async (c: AcpTestClient): Promise<string> =>
  (
    await c.agent.request("session/new", {
      cwd: suite.workspace,
      mcpServers: [],
      _meta: { mooring: { agent: "simulated" } },
    })
  ).sessionId;

/** Every seq from..to once: the updates a client saw have neither a hole nor a repeat. */
const contiguous = (seqs: number[]) => {
  const sorted = [...seqs].sort((a, b) => a - b);
  expect(new Set(seqs).size).toBe(seqs.length);
  expect(sorted).toEqual(Array.from({ length: sorted.length }, (_, i) => sorted[0] + i));
};

afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

describe.each(["http", "ws"] as const)("/acp over %s", (kind) => {
  it("initializes as mooring with loadSession and the session capabilities", async () => {
    const c = kind === "http" ? AcpTestClient.http(suite.url, A) : AcpTestClient.ws(suite.url, A);
    clients.push(c);
    const init = await c.initialize();
    expect(init.protocolVersion).toBe(1);
    expect(init.agentInfo?.name).toBe("mooring");
    expect(init.agentCapabilities?.loadSession).toBe(true);
    expect(init.agentCapabilities?.sessionCapabilities).toMatchObject({ list: {}, resume: {}, close: {} });
  });

  it("streams a prompt's events as updates, one per event with its seq, and answers end_turn", async () => {
    const c = await open(kind);
    const sessionId = await newSession(c);
    const answer = await c.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "[deltas 3] [tool 100] [tokens 1000]" }],
    });
    expect(answer.stopReason).toBe("end_turn");
    const updates = c.of(sessionId);
    const kinds = updates.map((n) => n.update.sessionUpdate);
    const task = await c.agent.request<any>("_mooring/tasks/get", {
      taskId: (answer._meta as any).mooring.taskId,
    });
    expect(agentText(updates)).toBe(task.result.text);
    expect(task.result.text).not.toBe("");
    expect(kinds).toContain("tool_call");
    expect(kinds).toContain("tool_call_update");
    expect(kinds).toContain("usage_update");
    const seqs = updates.map(seqOf) as number[];
    expect(seqs.every((s) => typeof s === "number")).toBe(true);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    contiguous(seqs);
    const result = updates.find((n) => n.update.sessionUpdate === "tool_call_update")!.update as any;
    expect(result.status).toBe("completed");
    expect(result.content[0].content.text).toHaveLength(100);
  });

  it("streams a turn through the gateway's own feeds, with no loopback WebSocket", async () => {
    const c = await open(kind);
    const sessionId = await newSession(c);
    const running = c.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "[deltas 1] [hang]" }],
    });
    await c.updates.waitFor(
      (n) => n.sessionId === sessionId && n.update.sessionUpdate === "agent_message_chunk",
    );
    expect(suite.gw.holding()).toMatchObject({ localSubscriptions: 1, subscribers: 1, sockets: 0 });
    await c.agent.notify("session/cancel", { sessionId });
    expect((await running).stopReason).toBe("cancelled");
    await eventually(async () => suite.gw.holding().localSubscriptions === 0);
    expect(suite.gw.holding().subscribers).toBe(0);
  });

  it("cancels the running turn: the prompt answers cancelled", async () => {
    const c = await open(kind);
    const sessionId = await newSession(c);
    const prompt = c.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "[deltas 1] [hang]" }],
    });
    await c.updates.waitFor(
      (n) => n.sessionId === sessionId && n.update.sessionUpdate === "agent_message_chunk",
    );
    await c.agent.notify("session/cancel", { sessionId });
    expect((await prompt).stopReason).toBe("cancelled");
  });

  it("a dropped connection resumed by session/load with afterSeq misses nothing and repeats nothing", async () => {
    const first = await open(kind);
    const sessionId = await newSession(first);
    void first.agent
      .request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "[deltas 3] [sleep 1500] [deltas 4]" }],
      })
      .catch(() => {});
    await first.updates.waitFor(
      (n) => n.sessionId === sessionId && n.update.sessionUpdate === "agent_message_chunk",
    );
    first.close();
    const seen = first.of(sessionId).map(seqOf) as number[];
    const afterSeq = Math.max(...seen);

    const second = await open(kind);
    await second.agent.request("session/load", {
      sessionId,
      cwd: suite.workspace,
      mcpServers: [],
      _meta: { mooring: { afterSeq } },
    });
    await second.updates.waitFor(
      (n) => n.sessionId === sessionId && (n.update._meta as any)?.mooring?.type === "task.completed",
      30_000,
      "task.completed",
    );
    const later = second.of(sessionId).map(seqOf) as number[];
    expect(Math.min(...later)).toBe(afterSeq + 1);
    contiguous([...seen, ...later]);
    const taskId = (second.of(sessionId).at(-1)!.update._meta as any).mooring.taskId;
    const task = await second.agent.request<any>("_mooring/tasks/get", { taskId });
    expect(task.status).toBe("completed");
    expect(agentText(first.of(sessionId)) + agentText(second.of(sessionId))).toBe(task.result.text);
  });

  it("a real ACP agent behind mooring (the test agent): its chunks and its tool call reach the client", async () => {
    const c = await open(kind);
    const { sessionId } = await c.agent.request("session/new", {
      cwd: suite.workspace,
      mcpServers: [],
      _meta: { mooring: { agent: "acp-test" } },
    });
    const answer = await c.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "[chunks 3] [tool 32]" }],
    });
    expect(answer.stopReason).toBe("end_turn");
    expect(agentText(c.of(sessionId))).toBe("chunk 1/3 chunk 2/3 chunk 3/3 ");
    const tool = c.of(sessionId).find((n) => n.update.sessionUpdate === "tool_call")!.update as any;
    expect(tool).toMatchObject({ title: "generate", rawInput: { bytes: 32 } });
  });

  it("a load without afterSeq replays the whole session, each prompt as the user's message", async () => {
    const c = await open(kind);
    const sessionId = await newSession(c);
    await c.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "first [deltas 2]" }],
    });
    const other = await open(kind);
    await other.agent.request("session/load", { sessionId, cwd: suite.workspace, mcpServers: [] });
    const replayed = other.of(sessionId);
    expect(replayed.map(seqOf)).toEqual(c.of(sessionId).map(seqOf));
    expect(replayed[0].update).toMatchObject({
      sessionUpdate: "user_message_chunk",
      content: { text: "first [deltas 2]" },
    });
  });
});

describe("tenants on /acp", () => {
  it("B's token on A's session answers what a missing id answers, for load, resume, prompt and close; B's cancels change nothing", async () => {
    const a = await open("http", A);
    const sessionId = await newSession(a);
    const b = await open("http", B);
    const calls = (id: string) => [
      b.agent.request("session/load", { sessionId: id, cwd: suite.workspace, mcpServers: [] }),
      b.agent.request("session/resume", { sessionId: id, cwd: suite.workspace }),
      b.agent.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "[deltas 1]" }] }),
      b.agent.request("session/close", { sessionId: id }).then(() => {
        throw Object.assign(new Error("closed"), { code: 0 });
      }),
    ];
    const foreign = await Promise.all(calls(sessionId).map(errorOf));
    const missing = await Promise.all(calls(MISSING).map(errorOf));
    for (let i = 0; i < 3; i++) {
      expect(foreign[i].code).toBe(-32002);
      expect(JSON.stringify(foreign[i]).replaceAll(sessionId, "ID")).toBe(
        JSON.stringify(missing[i]).replaceAll(MISSING, "ID"),
      );
    }
    const list = await b.agent.request("session/list", {});
    expect(list.sessions.map((s) => s.sessionId)).not.toContain(sessionId);
    const own = await a.agent.request("session/list", {});
    expect(own.sessions.map((s) => s.sessionId)).toContain(sessionId);
    // B's cancel changes nothing: A's running turn goes on until A cancels it.
    const running = a.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "[deltas 1] [hang]" }],
    });
    const chunk = await a.updates.waitFor(
      (n) => n.sessionId === sessionId && n.update.sessionUpdate === "agent_message_chunk",
    );
    const taskId = (chunk.update._meta as any).mooring.taskId;
    await b.agent.notify("session/cancel", { sessionId });
    expect((await errorOf(b.agent.request("_mooring/tasks/get", { taskId }))).code).toBe(-32002);
    expect((await errorOf(b.agent.request("_mooring/tasks/cancel", { taskId }))).code).toBe(-32002);
    expect((await a.agent.request<any>("_mooring/tasks/get", { taskId })).status).toBe("running");
    await a.agent.notify("session/cancel", { sessionId });
    expect((await running).stopReason).toBe("cancelled");
  });

  it("B cannot post to A's connection: an unknown connection to B", async () => {
    const init = await fetch(`${suite.url}/acp`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${A}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } }),
    });
    expect(init.status).toBe(200);
    const connectionId = init.headers.get("acp-connection-id")!;
    const asB = await fetch(`${suite.url}/acp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${B}`,
        "acp-connection-id": connectionId,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "session/list", params: {} }),
    });
    expect(asB.status).toBe(404);
    const noToken = await fetch(`${suite.url}/acp`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } }),
    });
    expect(noToken.status).toBe(401);
  });
});

describe("bad ACP input", () => {
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${suite.url}/acp`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${A}`, ...headers },
      body,
    });

  it("malformed JSON, batches and non-objects are 400s with a reason, never a 500", async () => {
    const malformed = await post("{not json");
    expect(malformed.status).toBe(400);
    const batch = await post(JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }]));
    expect(batch.status).toBe(400);
    expect((await batch.json()).error.code).toBe(-32600);
    const scalar = await post("42");
    expect(scalar.status).toBe(400);
    const oversized = await post(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { pad: "x".repeat(2_000_000) } }),
    );
    expect(oversized.status).toBe(413);
    expect((await oversized.json()).error.code).toBe("PAYLOAD_TOO_LARGE");
    const unknown = await post(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "session/list", params: {} }),
      {
        "acp-connection-id": "no-such-connection",
      },
    );
    expect(unknown.status).toBe(404);
  });

  it("over WebSocket, malformed JSON and a batch are answered with JSON-RPC errors; the socket stays open", async () => {
    const socket = new WebSocket(`${suite.url.replace(/^http/, "ws")}/acp`, {
      headers: { authorization: `Bearer ${A}` },
    });
    await once(socket, "open");
    const answers: any[] = [];
    socket.on("message", (data) => answers.push(JSON.parse(String(data))));
    const next = async () => {
      while (answers.length === 0) await once(socket, "message");
      return answers.shift();
    };
    socket.send("{not json");
    expect((await next()).error.code).toBe(-32700);
    socket.send(JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }]));
    expect((await next()).error.code).toBe(-32600);
    socket.send(
      JSON.stringify({ jsonrpc: "2.0", id: 7, method: "initialize", params: { protocolVersion: 1 } }),
    );
    const init = await next();
    expect(init.id).toBe(7);
    expect(init.result.agentInfo.name).toBe("mooring");
    socket.close();
  });

  it("unknown methods, bad params and refused blocks are JSON-RPC errors on a connection that stays usable", async () => {
    const c = await open("http");
    expect((await errorOf(c.agent.request("no/such/method", {}))).code).toBe(-32601);
    expect((await errorOf(c.agent.request("session/new", { cwd: 42 } as never))).code).toBe(-32602);
    const outside = await errorOf(c.agent.request("session/new", { cwd: "relative/path", mcpServers: [] }));
    expect(outside.code).toBe(-32602);
    const mcp = await errorOf(
      c.agent.request("session/new", {
        cwd: suite.workspace,
        mcpServers: [{ name: "x", command: "x", args: [], env: [] }],
      }),
    );
    expect(mcp.message).toMatch(/MCP servers/);
    const sessionId = await newSession(c);
    const image = await errorOf(
      c.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "image", data: "AA==", mimeType: "image/png" }],
      }),
    );
    expect(image.code).toBe(-32602);
    expect(image.message).toMatch(/"image"/);
    expect(
      (await c.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "[deltas 1]" }] }))
        .stopReason,
    ).toBe("end_turn");
    const archived = await fetch(`${suite.url}/v1/sessions/${sessionId}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${A}` },
    });
    expect(archived.status).toBe(200);
    const refused = await errorOf(
      c.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "[deltas 1]" }] }),
    );
    expect(refused.data).toMatchObject({ code: "SESSION_ARCHIVED" });
  });
});
