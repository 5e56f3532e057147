/**
 * Interactive approvals across a crash: a turn waiting on a permission request when its
 * gateway is killed with SIGKILL is interrupted, and its request resolved `restart`, by whoever
 * settles it: another instance's lease sweep, or the same instance's next boot.
 */
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, logsWith, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSessions, submitPrompt, waitPermission, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-permissions-restart-", procs, (d, w) => {
  db = d;
  workspace = w;
});

/** The task's pending request, once its `permission.requested` event is in the log too. */
async function waitingRequest(url: string, taskId: string) {
  const request = await waitPermission(url, taskId);
  await eventually(async () => {
    const events = await db.sql`
      select 1 from events where task_id = ${taskId} and type = 'permission.requested'`;
    return events.length > 0;
  });
  return request;
}

it("kill -9 while waiting: interrupted by another instance, the request resolved `restart`", async () => {
  const a = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "perm-restart-a" }));
  const b = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "perm-restart-b" }));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const [sessionId] = await createSessions(a.url, workspace, 1);
  const task = await submitPrompt(a.url, sessionId, "[ask bash]");
  const request = await waitingRequest(a.url, task.id);
  expect(logsWith(a, "permission requested")[0]).toMatchObject({
    tool: "bash",
    requestId: request.requestId,
  });

  a.kill("SIGKILL");
  expect(await exitedWithOutput(a)).toBe("SIGKILL");

  const done = await waitTerminal(b.url, task.id);
  expect(done.status).toBe("interrupted");
  expect(done.error.code).toBe("GATEWAY_RESTART");
  expect(done.pendingPermissions).toEqual([]);
  const events = await db.sql<{ type: string; data: any }[]>`
    select type, data from events where task_id = ${task.id} order by seq`;
  expect(events.slice(-2).map((e) => e.type)).toEqual(["permission.resolved", "task.interrupted"]);
  expect(events.at(-2)!.data).toEqual({ requestId: request.requestId, optionId: "deny", by: "restart" });
  const late = await call(b.url, "POST", `/v1/tasks/${task.id}/permissions/${request.requestId}`, {
    optionId: "allow",
  });
  expect(late.status).toBe(409);
  expect(late.body.error).toMatchObject({
    code: "PERMISSION_RESOLVED",
    resolution: { by: "restart", optionId: "deny" },
  });
});

it("kill -9 while waiting, then the same instance restarts: its reconcile resolves the request `restart`", async () => {
  const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: "perm-restart-c" });
  const first = await procs.spawn(env);
  await first.waitReady();
  const [sessionId] = await createSessions(first.url, workspace, 1);
  const task = await submitPrompt(first.url, sessionId, "[ask deploy]");
  const request = await waitingRequest(first.url, task.id);
  first.kill("SIGKILL");
  await exitedWithOutput(first);
  const second = await procs.spawn(env);
  await second.waitReady();
  const done = await waitTerminal(second.url, task.id);
  expect(done.status).toBe("interrupted");
  const [row] =
    await db.sql`select resolved_by, option_id from permission_requests where id = ${request.requestId}`;
  expect(row).toEqual({ resolvedBy: "restart", optionId: "deny" });
});

it("SIGTERM while waiting: the shutdown interrupts the turn and resolves the request `restart`", async () => {
  const gw = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "perm-restart-d" }));
  await gw.waitReady();
  const [sessionId] = await createSessions(gw.url, workspace, 1);
  const task = await submitPrompt(gw.url, sessionId, "[ask deploy]");
  const request = await waitingRequest(gw.url, task.id);
  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(0);
  const [row] = await db.sql`select status from tasks where id = ${task.id}`;
  expect(row.status).toBe("interrupted");
  const events = await db.sql<{ type: string; data: any }[]>`
    select type, data from events where task_id = ${task.id} order by seq`;
  expect(events.slice(-2).map((e) => e.type)).toEqual(["permission.resolved", "task.interrupted"]);
  expect(events.at(-2)!.data).toEqual({ requestId: request.requestId, optionId: "deny", by: "restart" });
});
