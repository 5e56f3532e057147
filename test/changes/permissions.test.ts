/**
 * Interactive approvals with the simulated agent's `[ask NAME]`: the request is
 * durable and visible (WebSocket, task snapshot), the first answer wins from any instance, and
 * the deadline and a cancel resolve it.
 */
import { Value } from "typebox/value";
import { beforeAll, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { PermissionResolution, Task } from "../../src/contract/responses.js";
import { call, eventually, type TestGateway } from "../support/gateway.js";
import { createSession, submitPrompt, waitPermission, waitTask } from "../support/turns.js";
import { WsClient } from "../support/ws-client.js";

const gt = useGateway({ workspace: true, start: false });
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  // Polling backstops at a minute, longer than any wait here: only notifications carry answers
  // between the instances in time.
  a = await gt.startGateway({ MOORING_INSTANCE_ID: "perm-a", MOORING_POLL_MS: "60000" });
  b = await gt.startGateway({ MOORING_INSTANCE_ID: "perm-b", MOORING_POLL_MS: "60000" });
});

/** Submit `[ask NAME]` on `base` and wait until the task shows its pending request. */
async function asking(base: string, prompt = "[ask bash]") {
  const sessionId = await createSession(base, gt.workspace);
  const task = await submitPrompt(base, sessionId, prompt);
  // A pending request changes no task state, so a long-poll would not wake for it: poll.
  const waiting = await eventually(async () => {
    const t = (await call(base, "GET", `/v1/tasks/${task.id}`)).body;
    return t.pendingPermissions?.length > 0 || !["queued", "running"].includes(t.status) ? t : null;
  });
  expect(waiting.status).toBe("running");
  const request = waiting.pendingPermissions[0];
  // Its event follows the row by one event-log flush.
  await eventually(async () => (await eventsOf(task.id)).some((e) => e.type === "permission.requested"));
  return { sessionId, task: waiting, request };
}

const answer = (base: string, taskId: string, requestId: string, body: unknown) =>
  call(base, "POST", `/v1/tasks/${taskId}/permissions/${requestId}`, body);

async function eventsOf(taskId: string) {
  return gt.sql<
    { type: string; data: any }[]
  >`select type, data from events where task_id = ${taskId} order by seq`;
}

it("reaches a WebSocket subscriber and the task snapshot; Allow lets the tool run", async () => {
  const sessionId = await createSession(a.url, gt.workspace);
  const ws = await WsClient.connect(a.url);
  await ws.call("events.subscribe", { sessionId });
  const task = await submitPrompt(a.url, sessionId, "[ask bash]");
  const requested = await ws.waitForEvent(sessionId, (e) => e.type === "permission.requested");
  expect(requested.taskId).toBe(task.id);
  expect(requested.data).toMatchObject({
    toolCall: { name: "bash", title: "Run bash", kind: "execute", input: { command: "run bash" } },
    options: [
      { optionId: "allow", name: "Allow", kind: "allow_once" },
      { optionId: "allow_always", name: "Allow always", kind: "allow_always" },
      { optionId: "deny", name: "Deny", kind: "reject_once" },
    ],
  });
  const snapshot = await call(a.url, "GET", `/v1/tasks/${task.id}`);
  expect(snapshot.body.status).toBe("running");
  expect(snapshot.body.pendingPermissions).toEqual([requested.data]);
  expect(Value.Check(Task, snapshot.body)).toBe(true);
  expect(Date.parse(requested.data.expiresAt)).toBeGreaterThan(Date.now() + 500_000);
  // The session snapshot shows it too, and the gate counts the turn as active and waiting for input.
  const session = await call(b.url, "GET", `/v1/sessions/${sessionId}`);
  expect(session.body.status).toBe("busy");
  expect(session.body.turns.at(-1).pendingPermissions).toEqual([requested.data]);
  const gate = await call(b.url, "GET", "/v1/gate");
  expect(gate.body).toMatchObject({ active: 1, waitingForInput: 1 });

  const ok = await answer(a.url, task.id, requested.data.requestId, { optionId: "allow" });
  expect(ok.status).toBe(200);
  expect(ok.body).toMatchObject({
    requestId: requested.data.requestId,
    taskId: task.id,
    optionId: "allow",
    by: "client",
  });
  expect(Value.Check(PermissionResolution, ok.body)).toBe(true);
  await ws.waitForTerminal(sessionId, task.id);
  const done = await waitTask(a.url, task.id);
  expect(done.status).toBe("completed");
  expect(done.result.text).toBe("allowed bash ");
  expect(done.pendingPermissions).toEqual([]);
  const types = ws.eventsOf(sessionId).map((e) => e.type);
  expect(types.slice(types.indexOf("permission.requested"))).toEqual([
    "permission.requested",
    "permission.resolved",
    "tool.call",
    "tool.result",
    "message.delta",
    "message",
    "usage",
    "task.completed",
  ]);
  const resolved = ws.eventsOf(sessionId).find((e) => e.type === "permission.resolved")!;
  expect(resolved.data).toEqual({ requestId: requested.data.requestId, optionId: "allow", by: "client" });
  await ws.close();
});

it("Deny: the agent gets the reject option and the message verbatim", async () => {
  const { task, request } = await asking(a.url);
  const no = await answer(a.url, task.id, request.requestId, {
    optionId: "deny",
    message: "not on prod, «please»",
  });
  expect(no.status).toBe(200);
  const done = await waitTask(a.url, task.id);
  expect(done.status).toBe("completed");
  expect(done.result.text).toBe("denied bash: not on prod, «please» ");
  const events = await eventsOf(task.id);
  expect(events.map((e) => e.type)).not.toContain("tool.call");
  expect(events.find((e) => e.type === "permission.resolved")!.data).toEqual({
    requestId: request.requestId,
    optionId: "deny",
    by: "client",
    message: "not on prod, «please»",
  });
});

it("takes the answer on instance B while the turn runs on A (JSON-RPC over the socket), answers included", async () => {
  const { task, request } = await asking(a.url);
  const [owner] = await gt.sql`select owner_instance from tasks where id = ${task.id}`;
  expect(owner.ownerInstance).toBe("perm-a");
  const ws = await WsClient.connect(b.url);
  const resolution = await ws.call("permissions.respond", {
    taskId: task.id,
    requestId: request.requestId,
    optionId: "allow_always",
    answers: { "Which shell?": "zsh" },
  });
  expect(resolution).toMatchObject({
    optionId: "allow_always",
    by: "client",
    answers: { "Which shell?": "zsh" },
  });
  // Within waitTask's 30 s, well before the one-minute poll: the notification brought it to A.
  const done = await waitTask(a.url, task.id);
  expect(done.result.text).toBe('allowed bash answers {"Which shell?":"zsh"} ');
  await ws.close();
});

it("two answers at once: one wins, the other gets 409 PERMISSION_RESOLVED with the winning answer", async () => {
  const { task, request } = await asking(a.url);
  const [x, y] = await Promise.all([
    answer(a.url, task.id, request.requestId, { optionId: "allow" }),
    answer(b.url, task.id, request.requestId, { optionId: "deny", message: "no" }),
  ]);
  const statuses = [x.status, y.status].sort();
  expect(statuses).toEqual([200, 409]);
  const [won, lost] = x.status === 200 ? [x, y] : [y, x];
  expect(lost.body.error.code).toBe("PERMISSION_RESOLVED");
  expect(lost.body.error.resolution).toEqual(won.body);
  const done = await waitTask(a.url, task.id);
  expect(done.result.text).toBe(won.body.optionId === "allow" ? "allowed bash " : "denied bash: no ");
  const resolvedEvents = (await eventsOf(task.id)).filter((e) => e.type === "permission.resolved");
  expect(resolvedEvents).toHaveLength(1);
  // A third answer after the turn ended: still the winner.
  const late = await answer(b.url, task.id, request.requestId, { optionId: "deny" });
  expect(late.status).toBe(409);
  expect(late.body.error.resolution.optionId).toBe(won.body.optionId);
});

it("bad answers get their codes and change nothing", async () => {
  const { task, request } = await asking(a.url);
  const before = await gt.sql`select count(*)::int as n from events`;
  const unknown = await answer(a.url, task.id, "0b8b4c1e-6a51-4f3e-9e39-0d5e1b1a7f00", { optionId: "allow" });
  expect(unknown.status).toBe(404);
  expect(unknown.body.error.code).toBe("PERMISSION_NOT_FOUND");
  const notUuid = await answer(a.url, task.id, "nope", { optionId: "allow" });
  expect(notUuid.body.error.code).toBe("PERMISSION_NOT_FOUND");
  const otherTask = await answer(a.url, "0b8b4c1e-6a51-4f3e-9e39-0d5e1b1a7f00", request.requestId, {
    optionId: "allow",
  });
  expect(otherTask.body.error.code).toBe("TASK_NOT_FOUND");
  const wrong = await answer(a.url, task.id, request.requestId, { optionId: "maybe" });
  expect(wrong.status).toBe(400);
  expect(wrong.body.error).toMatchObject({ code: "INVALID_REQUEST", field: "optionId" });
  for (const body of [
    {},
    { optionId: "allow", extra: 1 },
    { optionId: "allow", message: "x".repeat(4001) },
    { optionId: "allow", message: "nul\u0000" },
    { optionId: "allow", answers: { q: 1 } },
    { optionId: "allow", answers: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`q${i}`, "a"])) },
    "{not json",
  ]) {
    const bad = await answer(a.url, task.id, request.requestId, body);
    expect(bad.status, JSON.stringify(body)).toBe(400);
    expect(bad.body.error.code).toBe("INVALID_REQUEST");
  }
  const rpc = await call(a.url, "POST", "/v1/rpc", {
    jsonrpc: "2.0",
    id: 1,
    method: "permissions.respond",
    params: { taskId: task.id, requestId: request.requestId, optionId: "nope" },
  });
  expect(rpc.body.error).toMatchObject({ code: -32602, data: { code: "INVALID_REQUEST" } });
  const after = await gt.sql`select count(*)::int as n from events`;
  expect(after[0].n).toBe(before[0].n);
  const [row] = await gt.sql`select resolved_at from permission_requests where id = ${request.requestId}`;
  expect(row.resolvedAt).toBeNull();
  expect((await call(a.url, "GET", `/v1/tasks/${task.id}`)).body.pendingPermissions).toHaveLength(1);
  const rpcOk = await call(a.url, "POST", "/v1/rpc", {
    jsonrpc: "2.0",
    id: 2,
    method: "permissions.respond",
    params: { taskId: task.id, requestId: request.requestId, optionId: "allow" },
  });
  expect(rpcOk.body.result).toMatchObject({ optionId: "allow", by: "client" });
  const rpcLate = await call(a.url, "POST", "/v1/rpc", {
    jsonrpc: "2.0",
    id: 3,
    method: "permissions.respond",
    params: { taskId: task.id, requestId: request.requestId, optionId: "allow" },
  });
  expect(rpcLate.body.error).toMatchObject({ code: -32009, data: { code: "PERMISSION_RESOLVED" } });
  expect((await waitTask(a.url, task.id)).status).toBe("completed");
});

it("cancel while waiting resolves the request `cancel`", async () => {
  const { task, request } = await asking(a.url);
  const cancelled = await call(b.url, "POST", `/v1/tasks/${task.id}/cancel`);
  expect(cancelled.status).toBe(200);
  const done = await waitTask(a.url, task.id);
  expect(done.status).toBe("cancelled");
  const types = (await eventsOf(task.id)).map((e) => e.type);
  expect(types.slice(-2)).toEqual(["permission.resolved", "task.cancelled"]);
  const resolved = (await eventsOf(task.id)).find((e) => e.type === "permission.resolved")!;
  expect(resolved.data).toEqual({ requestId: request.requestId, optionId: "deny", by: "cancel" });
  const late = await answer(a.url, task.id, request.requestId, { optionId: "allow" });
  expect(late.status).toBe(409);
  expect(late.body.error.resolution.by).toBe("cancel");
});

it("no answer within MOORING_PERMISSION_TIMEOUT_MS: the reject option, `by: timeout`", async () => {
  const c = await gt.startGateway({ MOORING_INSTANCE_ID: "perm-c", MOORING_PERMISSION_TIMEOUT_MS: "300" });
  try {
    const sessionId = await createSession(c.url, gt.workspace);
    const task = await submitPrompt(c.url, sessionId, "[ask rm]");
    const done = await waitTask(c.url, task.id);
    expect(done.status).toBe("completed");
    expect(done.result.text).toBe("denied rm ");
    const resolved = (await eventsOf(task.id)).find((e) => e.type === "permission.resolved")!;
    expect(resolved.data).toMatchObject({ optionId: "deny", by: "timeout" });
  } finally {
    await c.stop();
  }
});

it("logs every request and answer with the tool, the option and who answered", async () => {
  const lines: Record<string, any>[] = [];
  const d = await gt.startGateway(
    { MOORING_INSTANCE_ID: "perm-d", MOORING_API_TOKENS: "s3cret-token" },
    {
      onLog: (l) => lines.push(l),
    },
  );
  try {
    const auth = { authorization: "Bearer s3cret-token" };
    const sessionId = await createSession(d.url, gt.workspace, {}, auth);
    const task = await submitPrompt(d.url, sessionId, "[ask deploy]", auth);
    const waiting = await waitPermission(d.url, task.id, undefined, auth);
    await call(
      d.url,
      "POST",
      `/v1/tasks/${task.id}/permissions/${waiting.requestId}`,
      { optionId: "deny" },
      auth,
    );
    await eventually(async () => lines.some((l) => l.msg === "permission resolved"));
    const requested = lines.find((l) => l.msg === "permission requested")!;
    expect(requested).toMatchObject({ tool: "deploy", requestId: waiting.requestId });
    const answered = lines.find((l) => l.msg === "permission answered")!;
    expect(answered).toMatchObject({ tool: "deploy", optionId: "deny", by: "client" });
    expect(answered.answeredBy).toMatch(/^http token 1 of default from /);
    expect(lines.find((l) => l.msg === "permission resolved")).toMatchObject({
      tool: "deploy",
      optionId: "deny",
      by: "client",
    });
    expect(JSON.stringify(lines)).not.toContain("s3cret-token");
  } finally {
    await d.stop();
  }
});
