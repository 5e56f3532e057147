/**
 * JSON-RPC 2.0 at POST /v1/rpc: every method, batches and notifications, malformed envelopes, and
 * the mapping of domain errors to codes with data {code, reason?}. One slot and a queue of one, so
 * GATEWAY_BUSY is easy to reach.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call } from "../support/gateway.js";
import { counts, waitTask } from "../support/turns.js";

const gt = useGateway({
  env: {
    MOORING_POLL_MS: "100",
    MOORING_MAX_ACTIVE: "1",
    MOORING_MAX_QUEUED: "1",
  },
  workspace: true,
  cancelOpenTasks: true,
});
let nextId = 1;

const post = (body: unknown) => call(gt.url, "POST", "/v1/rpc", body, { "content-type": "application/json" });

/** One call; returns the whole response object (result or error). */
async function rpc(method: string, params?: unknown): Promise<any> {
  const id = nextId++;
  const r = await post({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
  expect(r.status).toBe(200);
  expect(r.body.jsonrpc).toBe("2.0");
  expect(r.body.id).toBe(id);
  return r.body;
}

async function ok(method: string, params?: unknown): Promise<any> {
  const answer = await rpc(method, params);
  if (answer.error) throw new Error(`${method} failed: ${JSON.stringify(answer.error)}`);
  return answer.result;
}

describe("methods", () => {
  it("sessions.*, turns.submit, tasks.get (with waitMs), tasks.list, tasks.cancel, gate.status", async () => {
    const session = await ok("sessions.create", {
      workspace: gt.workspace,
      agent: "simulated",
      title: "rpc",
    });
    expect(session).toMatchObject({ agent: "simulated", title: "rpc", status: "idle" });
    expect((await ok("sessions.get", { sessionId: session.id })).turns).toEqual([]);
    const list = await ok("sessions.list", { limit: 200 });
    expect(list.items.map((s: any) => s.id)).toContain(session.id);

    const task = await ok("turns.submit", { sessionId: session.id, prompt: "[sleep 300] [deltas 2]" });
    expect(task).toMatchObject({ sessionId: session.id, status: "running", turnIndex: 0 });
    // Answered on the change (a wait held to its end, a minute, would outlast the test).
    const changed = await ok("tasks.get", { taskId: task.id, waitMs: 60_000 });
    expect(changed.status).toBe("completed");
    expect(changed.result.text).toBe("chunk 1 chunk 2 ");
    expect((await ok("tasks.get", { taskId: task.id })).id).toBe(task.id);

    const again = await ok("turns.submit", { sessionId: session.id, prompt: "x", idempotencyKey: "k" });
    expect((await ok("turns.submit", { sessionId: session.id, prompt: "x", idempotencyKey: "k" })).id).toBe(
      again.id,
    );
    await waitTask(gt.url, again.id);

    const tasks = await ok("tasks.list", { sessionId: session.id });
    expect(tasks.items.map((t: any) => t.id)).toEqual([again.id, task.id]);
    expect((await ok("tasks.list", { sessionId: session.id, limit: 1 })).nextCursor).toEqual(
      expect.any(String),
    );

    expect(await ok("gate.status")).toEqual({
      maxActive: 1,
      maxQueued: 1,
      active: 0,
      queued: 0,
      waitingForInput: 0,
      queueTimeoutMs: 600000,
      // An open gateway's caller is the tenant `default`, with an admin's view.
      tenant: { name: "default", active: 0, queued: 0, maxActive: 1, maxQueued: 1 },
      tenants: [{ name: "default", active: 0, queued: 0, maxActive: 1, maxQueued: 1 }],
      groups: [{ name: "default", instances: 1, active: 0, queued: 0 }],
    });
    expect(await ok("gate.status", {})).toMatchObject({ active: 0 });

    const hang = await ok("turns.submit", { sessionId: session.id, prompt: "[hang]" });
    const cancelling = await ok("tasks.cancel", { taskId: hang.id });
    expect(["cancelling", "cancelled"]).toContain(cancelling.status);
    const cancelled = await ok("tasks.get", { taskId: hang.id, waitMs: 10_000 });
    expect(["cancelling", "cancelled"]).toContain(cancelled.status);
    expect((await waitTask(gt.url, hang.id)).error.code).toBe("CANCELLED");
    expect((await ok("tasks.cancel", { taskId: hang.id })).status).toBe("cancelled");

    const archived = await ok("sessions.archive", { sessionId: session.id });
    expect(archived.status).toBe("archived");
    const refused = await rpc("turns.submit", { sessionId: session.id, prompt: "x" });
    expect(refused.error).toMatchObject({ code: -32009, data: { code: "SESSION_ARCHIVED" } });
    expect(refused.result).toBeUndefined();
  });

  it("GATEWAY_BUSY uses -32002 with data {code, reason: queue_full}, and nothing is written", async () => {
    const a = await ok("sessions.create", { workspace: gt.workspace, agent: "simulated" });
    const b = await ok("sessions.create", { workspace: gt.workspace, agent: "simulated" });
    const c = await ok("sessions.create", { workspace: gt.workspace, agent: "simulated" });
    const running = await ok("turns.submit", { sessionId: a.id, prompt: "[hang]" });
    const queued = await ok("turns.submit", { sessionId: b.id, prompt: "[sleep 10]" });
    expect([running.status, queued.status]).toEqual(["running", "queued"]);
    const before = await counts(gt.sql);
    const busy = await rpc("turns.submit", { sessionId: c.id, prompt: "[sleep 10]" });
    expect(busy.error.code).toBe(-32002);
    expect(busy.error.data).toMatchObject({ code: "GATEWAY_BUSY", reason: "queue_full" });
    expect(typeof busy.error.message).toBe("string");
    expect(await counts(gt.sql)).toEqual(before);
    await ok("tasks.cancel", { taskId: queued.id });
    await ok("tasks.cancel", { taskId: running.id });
    expect((await waitTask(gt.url, running.id)).status).toBe("cancelled");
  });

  it("domain and validation errors carry data.code; nothing is written", async () => {
    const session = await ok("sessions.create", { workspace: gt.workspace, agent: "simulated" });
    const before = await counts(gt.sql);
    const cases: [string, unknown, number, string][] = [
      ["sessions.get", { sessionId: randomUUID() }, -32004, "SESSION_NOT_FOUND"],
      ["tasks.get", { taskId: randomUUID() }, -32004, "TASK_NOT_FOUND"],
      ["tasks.cancel", { taskId: randomUUID() }, -32004, "TASK_NOT_FOUND"],
      ["turns.submit", { sessionId: randomUUID(), prompt: "x" }, -32004, "SESSION_NOT_FOUND"],
      ["turns.submit", { sessionId: session.id, prompt: "" }, -32602, "INVALID_REQUEST"],
      ["turns.submit", { sessionId: session.id }, -32602, "INVALID_REQUEST"],
      ["turns.submit", { sessionId: session.id, prompt: "x", loadClass: "huge" }, -32602, "INVALID_REQUEST"],
      ["turns.submit", { sessionId: session.id, prompt: "x", timeoutMs: 0 }, -32602, "INVALID_REQUEST"],
      [
        "turns.submit",
        { sessionId: session.id, prompt: "x", timeoutMs: 3_600_001 },
        -32602,
        "INVALID_REQUEST",
      ],
      ["tasks.get", { taskId: randomUUID(), waitMs: 60_001 }, -32602, "INVALID_REQUEST"],
      ["tasks.get", { taskId: 5 }, -32602, "INVALID_REQUEST"],
      ["tasks.get", {}, -32602, "INVALID_REQUEST"],
      ["sessions.create", { workspace: gt.workspace, agent: "nobody" }, -32602, "INVALID_REQUEST"],
      ["gate.status", { extra: 1 }, -32602, "INVALID_REQUEST"],
      ["tasks.list", { status: "done" }, -32602, "INVALID_REQUEST"],
      ["gate.status", [1, 2], -32602, "INVALID_REQUEST"],
      // Subscriptions need the socket.
      ["events.subscribe", { sessionId: session.id }, -32602, "INVALID_REQUEST"],
      ["events.unsubscribe", { sessionId: session.id }, -32602, "INVALID_REQUEST"],
    ];
    for (const [method, params, code, dataCode] of cases) {
      const answer = await rpc(method, params);
      const name = `${method} ${JSON.stringify(params)}`;
      expect(answer.result, name).toBeUndefined();
      expect(answer.error.code, name).toBe(code);
      expect(answer.error.data.code, name).toBe(dataCode);
      expect(typeof answer.error.message, name).toBe("string");
    }
    const socketOnly = await rpc("events.subscribe", { sessionId: session.id });
    expect(socketOnly.error.message).toMatch(/socket|ws/i);
    expect(await counts(gt.sql)).toEqual(before);
  });
});

describe("envelopes", () => {
  it("parse error -32700 with id null; invalid requests -32600; unknown method -32601", async () => {
    const parse = await call(gt.url, "POST", "/v1/rpc", '{"jsonrpc": "2.0", "method": ', {
      "content-type": "application/json",
    });
    expect(parse.status).toBe(200);
    expect(parse.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });

    const invalid: [unknown, unknown][] = [
      [{ jsonrpc: "1.0", id: 7, method: "gate.status" }, 7],
      [{ jsonrpc: "2.0", id: 8 }, 8],
      [{ jsonrpc: "2.0", id: 9, method: 42 }, 9],
      [{ jsonrpc: "2.0", id: { no: 1 }, method: "gate.status" }, null],
      ['"hello"', null], // a JSON string (call() sends strings as they are)
      [42, null],
    ];
    for (const [message, id] of invalid) {
      const r = await post(message);
      expect(r.status, JSON.stringify(message)).toBe(200);
      expect(r.body, JSON.stringify(message)).toMatchObject({ jsonrpc: "2.0", id, error: { code: -32600 } });
    }

    const unknown = await rpc("tasks.explode", {});
    expect(unknown.error.code).toBe(-32601);
    expect(unknown.result).toBeUndefined();

    // id null is a request (answered), not a notification.
    const nullId = await post({ jsonrpc: "2.0", id: null, method: "gate.status" });
    expect(nullId.status).toBe(200);
    expect(nullId.body).toMatchObject({ id: null, result: { maxActive: 1 } });
    // String ids come back as given.
    const stringId = await post({ jsonrpc: "2.0", id: "abc", method: "gate.status" });
    expect(stringId.body.id).toBe("abc");
  });

  it("batches answer every call but no notification; only notifications answer 204; empty batch is -32600", async () => {
    const batch = await post([
      { jsonrpc: "2.0", id: 1, method: "gate.status" },
      { jsonrpc: "2.0", method: "gate.status" },
      { jsonrpc: "2.0", id: 2, method: "sessions.get", params: { sessionId: randomUUID() } },
      { jsonrpc: "2.0", method: "no.such.method" },
      { jsonrpc: "2.0", method: "tasks.get", params: { taskId: randomUUID() } },
      { id: 3, method: "gate.status" },
      1,
    ]);
    expect(batch.status).toBe(200);
    expect(Array.isArray(batch.body)).toBe(true);
    expect(batch.body).toHaveLength(4);
    const byId = (id: unknown) => batch.body.filter((a: any) => a.id === id);
    expect(byId(1)[0].result).toMatchObject({ maxActive: 1 });
    expect(byId(2)[0].error).toMatchObject({ code: -32004, data: { code: "SESSION_NOT_FOUND" } });
    expect(byId(3)[0].error.code).toBe(-32600);
    expect(byId(null)).toHaveLength(1);
    expect(byId(null)[0].error.code).toBe(-32600);

    const onlyNotifications = await post([
      { jsonrpc: "2.0", method: "gate.status" },
      { jsonrpc: "2.0", method: "tasks.get", params: { taskId: randomUUID() } },
    ]);
    expect(onlyNotifications.status).toBe(204);
    expect(onlyNotifications.body).toBeNull();
    const single = await post({ jsonrpc: "2.0", method: "gate.status" });
    expect(single.status).toBe(204);
    expect(single.body).toBeNull();

    const empty = await post([]);
    expect(empty.status).toBe(200);
    expect(Array.isArray(empty.body)).toBe(false);
    expect(empty.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });

    const allInvalid = await post([1, 2]);
    expect(allInvalid.body).toHaveLength(2);
    for (const a of allInvalid.body) expect(a).toMatchObject({ id: null, error: { code: -32600 } });
  });

  it("a notification is still carried out", async () => {
    const session = await ok("sessions.create", { workspace: gt.workspace, agent: "simulated" });
    const hang = await ok("turns.submit", { sessionId: session.id, prompt: "[hang]" });
    const r = await post({ jsonrpc: "2.0", method: "tasks.cancel", params: { taskId: hang.id } });
    expect(r.status).toBe(204);
    expect((await waitTask(gt.url, hang.id)).status).toBe("cancelled");
  });
});
