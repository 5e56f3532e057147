/**
 * Interactive approvals with a real ACP agent (test/support/acp-agent.ts on the SDK's agent side):
 * `session/request_permission` is relayed with the agent's options as they are, the chosen
 * optionId is the answer, and a cancel answers `cancelled`.
 */
import { beforeEach, expect, it } from "vitest";
import { taskEvents } from "../../support/agent-gateway.js";
import { call } from "../../support/gateway.js";
import { createSessionWith, submitPrompt, waitPermission, waitTerminal } from "../../support/turns.js";
import { WsClient } from "../../support/ws-client.js";
import { useAcpAgents } from "../../support/acp-gateway.js";
import type { TestGateway } from "../../support/gateway.js";

const t = useAcpAgents("mooring-perm-acp-");

let gw: TestGateway;
beforeEach(async () => {
  ({ gw } = await t.boot({
    "acp-ask": t.entry({ permissions: "ask" }),
    "acp-client": t.entry({ permissions: "client" }),
  }));
});

it("relays the agent's request with its options as they are; Allow → the agent gets the chosen optionId", async () => {
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "acp-ask" });
  const ws = await WsClient.connect(gw.url);
  await ws.call("events.subscribe", { sessionId: session.id });
  const task = await submitPrompt(gw.url, session.id, "[permission]");
  const requested = await ws.waitForEvent(session.id, (e) => e.type === "permission.requested", 30_000);
  expect(requested.data.toolCall).toMatchObject({ id: "call-1", title: "Delete everything" });
  expect(requested.data.options).toEqual([
    { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
    { optionId: "allow-always", name: "Always allow", kind: "allow_always" },
    { optionId: "reject-once", name: "Reject", kind: "reject_once" },
  ]);
  expect((await waitPermission(gw.url, task.id, 30_000)).requestId).toBe(requested.data.requestId);
  const ok = await call(gw.url, "POST", `/v1/tasks/${task.id}/permissions/${requested.data.requestId}`, {
    optionId: "allow-always",
  });
  expect(ok.status).toBe(200);
  const done = await waitTerminal(gw.url, task.id);
  expect(done.status).toBe("completed");
  expect(done.result.text).toBe("permission: allow-always ");
  await ws.close();
});

it("Deny (a session choosing `ask` on a `client` entry): the agent gets the reject option", async () => {
  const session = await createSessionWith(gw.url, {
    workspace: t.workspace,
    agent: "acp-client",
    agentConfig: { permissions: "ask" },
  });
  const task = await submitPrompt(gw.url, session.id, "[permission]");
  const request = await waitPermission(gw.url, task.id, 30_000);
  await call(gw.url, "POST", `/v1/tasks/${task.id}/permissions/${request.requestId}`, {
    optionId: "reject-once",
  });
  const done = await waitTerminal(gw.url, task.id);
  expect(done.result.text).toBe("permission: reject-once ");
  const resolved = (await taskEvents(t.db.sql, task.id)).find((e) => e.type === "permission.resolved")!;
  expect(resolved.data).toEqual({ requestId: request.requestId, optionId: "reject-once", by: "client" });
  // `allow`/`deny` still answer at once, without asking.
  const allow = await createSessionWith(gw.url, {
    workspace: t.workspace,
    agent: "acp-client",
    agentConfig: { permissions: "allow" },
  });
  const fixed = await waitTerminal(gw.url, (await submitPrompt(gw.url, allow.id, "[permission]")).id);
  expect(fixed.result.text).toBe("permission: allow-once ");
  expect((await taskEvents(t.db.sql, fixed.id)).map((e) => e.type)).not.toContain("permission.requested");
});

it("cancel while the agent waits: the request resolves `cancel` and the agent is answered `cancelled`", async () => {
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "acp-ask" });
  const task = await submitPrompt(gw.url, session.id, "[permission]");
  const request = await waitPermission(gw.url, task.id, 30_000);
  await call(gw.url, "POST", `/v1/tasks/${task.id}/cancel`);
  const done = await waitTerminal(gw.url, task.id);
  expect(done.status).toBe("cancelled");
  const events = await taskEvents(t.db.sql, task.id);
  const resolved = events.find((e) => e.type === "permission.resolved")!;
  expect(resolved.data).toEqual({ requestId: request.requestId, optionId: "reject-once", by: "cancel" });
  expect(events.at(-1)!.type).toBe("task.cancelled");
  // The agent's own report of the outcome it got.
  const said = events
    .filter((e) => e.type === "message.delta")
    .map((e) => e.data.text)
    .join("");
  expect(said).toBe("permission: cancelled ");
});

it("the agent dies while it waits: the turn fails and its request resolves `cancel` before the terminal event", async () => {
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "acp-ask" });
  const task = await submitPrompt(gw.url, session.id, "[permission]");
  const request = await waitPermission(gw.url, task.id, 30_000);
  process.kill([...t.agentPids].at(-1)!, "SIGKILL");
  const done = await waitTerminal(gw.url, task.id);
  expect(done.status).toBe("failed");
  expect(done.pendingPermissions).toEqual([]);
  const events = await taskEvents(t.db.sql, task.id);
  expect(events.slice(-2).map((e) => e.type)).toEqual(["permission.resolved", "task.failed"]);
  expect(events.at(-2)!.data).toEqual({
    requestId: request.requestId,
    optionId: "reject-once",
    by: "cancel",
  });
});
