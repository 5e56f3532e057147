/**
 * Approvals through `/acp` (docs/acp-server.md): a turn's `permission.requested` is a
 * `session/request_permission` to the ACP client, options one to one, and the client's answer is
 * the approval's answer; a request answered over REST while the client holds it, or resolved by
 * its deadline, is withdrawn from the client (`$/cancel_request`); one still pending when the
 * client's connection drops is asked again of the client that loads the session next.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AcpTestClient, agentText } from "../../support/acp-client.js";
import { TcpProxy } from "../../support/tcp-proxy.js";
import type { TestDatabase } from "../../support/db.js";
import { call, type GatewayProcess } from "../../support/gateway.js";
import { gatewayEnv, Processes, useProcessSuite } from "../../support/lifecycle.js";

const TOKEN = "acp-permissions-token-1111";
let db: TestDatabase;
let gw: GatewayProcess;
let workspace: string;
// A gateway process per test, killed after it: a test process's closed SDK clients leave silent sockets
// that an in-process gateway's stop would wait out (Node's 60 s headers timeout).
const procs = new Processes();
useProcessSuite("mooring-acp-permissions-", procs, (d, w) => {
  db = d;
  workspace = w;
});
const clients: AcpTestClient[] = [];

const open = async (kind: "http" | "ws" = "http"): Promise<AcpTestClient> => {
  const c = kind === "http" ? AcpTestClient.http(gw.url, TOKEN) : AcpTestClient.ws(gw.url, TOKEN);
  clients.push(c);
  await c.initialize();
  return c;
};
const newSession = async (c: AcpTestClient) =>
  (await c.agent.request("session/new", { cwd: workspace, mcpServers: [], _meta: { mooring: { agent: "simulated" } } }))
    .sessionId;
const prompt = (c: AcpTestClient, sessionId: string, text: string) =>
  c.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
const metaOf = (request: { _meta?: unknown }) => (request._meta as { mooring: { taskId: string; requestId: string } }).mooring;

beforeEach(async () => {
  gw = await procs.spawn(gatewayEnv(db.url, { MOORING_API_TOKENS: TOKEN, MOORING_PERMISSION_TIMEOUT_MS: "6000" }));
  await gw.waitReady();
});
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

describe("permission requests on /acp", () => {
  it.each(["http", "ws"] as const)("over %s: asked of the client with the request's options; its answer is the approval", async (kind) => {
    const c = await open(kind);
    const sessionId = await newSession(c);
    const answer = prompt(c, sessionId, "[ask bash]");
    const ask = await c.asks.waitFor((a) => a.request.sessionId === sessionId);
    expect(ask.request.options.map((o) => [o.optionId, o.kind])).toEqual([
      ["allow", "allow_once"],
      ["allow_always", "allow_always"],
      ["deny", "reject_once"],
    ]);
    expect(ask.request.toolCall.title).toMatch(/bash/);
    ask.answer({ outcome: { outcome: "selected", optionId: "allow" } });
    expect((await answer).stopReason).toBe("end_turn");
    expect(agentText(c.of(sessionId))).toMatch(/allowed bash/);
  });

  it("answered over REST while the client holds it: withdrawn from the client, REST's answer stands", async () => {
    const c = await open();
    const sessionId = await newSession(c);
    const answer = prompt(c, sessionId, "[ask rm]");
    const ask = await c.asks.waitFor((a) => a.request.sessionId === sessionId);
    const { taskId, requestId } = metaOf(ask.request);
    const rest = await call(gw.url, "POST", `/v1/tasks/${taskId}/permissions/${requestId}`, { optionId: "deny" }, {
      authorization: `Bearer ${TOKEN}`,
    });
    expect(rest.status).toBe(200);
    await new Promise<void>((resolve) =>
      ask.withdrawn.aborted ? resolve() : ask.withdrawn.addEventListener("abort", () => resolve()),
    );
    expect((await answer).stopReason).toBe("end_turn");
    expect(agentText(c.of(sessionId))).toMatch(/denied rm/);
  });

  it("resolved by its deadline: withdrawn from the client", async () => {
    const c = await open();
    const sessionId = await newSession(c);
    const answer = prompt(c, sessionId, "[ask sleepy]");
    const ask = await c.asks.waitFor((a) => a.request.sessionId === sessionId);
    await new Promise<void>((resolve) => ask.withdrawn.addEventListener("abort", () => resolve()));
    expect((await answer).stopReason).toBe("end_turn");
    expect(agentText(c.of(sessionId))).toMatch(/denied sleepy/);
  });

  it("pending when the connection drops: asked again of the client that loads the session", async () => {
    // The first client reaches the gateway through a proxy, so its connection can really drop.
    const proxy = await TcpProxy.start(gw.url);
    const first = AcpTestClient.http(proxy.url, TOKEN);
    clients.push(first);
    await first.initialize();
    const sessionId = await newSession(first);
    void prompt(first, sessionId, "[ask deploy]").catch(() => {});
    const ask = await first.asks.waitFor((a) => a.request.sessionId === sessionId);
    proxy.cutAll();
    await proxy.close();
    const second = await open();
    await second.agent.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
    const again = await second.asks.waitFor((a) => a.request.sessionId === sessionId);
    expect(metaOf(again.request).requestId).toBe(metaOf(ask.request).requestId);
    again.answer({ outcome: { outcome: "selected", optionId: "allow" } });
    await second.updates.waitFor(
      (n) => n.sessionId === sessionId && (n.update._meta as any)?.mooring?.type === "task.completed",
      20_000,
      "task.completed",
    );
    expect(agentText(second.of(sessionId))).toMatch(/allowed deploy/);
  });
});
