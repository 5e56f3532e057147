/**
 * Every route answers what its response schema (src/transport/responses.ts) describes: real answers
 * of every route are checked with TypeBox's Value.Check, and every route in /docs/json has its
 * responses described. A field added to an answer without its schema fails here (issue 14). Every
 * header /docs/json declares for an answer's status is on that answer (issue 31), refusals included.
 */
import { rm } from "node:fs/promises";
import { Value } from "typebox/value";
import type { TSchema } from "typebox";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Gateway } from "../src/gateway.js";
import { type RouteKey, routeResponses } from "../src/transport/responses.js";
import { createTestDatabase, type TestDatabase } from "./support/db.js";
import { type Answer, call, eventually, startTestGateway } from "./support/gateway.js";
import { tempWorkspace, waitTask } from "./support/turns.js";

let db: TestDatabase;
let gw: Gateway;
let workspace: string;
const checked = new Set<string>();
/** The served OpenAPI document: the headers it declares per operation and status. */
let doc: any;

beforeAll(async () => {
  db = await createTestDatabase();
  gw = await startTestGateway(db.url);
  workspace = await tempWorkspace();
  doc = (await call(gw.url, "GET", "/docs/json")).body;
});

afterAll(async () => {
  await gw?.stop();
  await db?.drop();
  await rm(workspace, { recursive: true, force: true });
});

function schemaFor(route: RouteKey, status: number, contentType: string): TSchema {
  const byStatus = routeResponses[route] as Record<string, any>;
  const entry = byStatus[status] ?? byStatus[`${String(status)[0]}xx`];
  if (!entry) throw new Error(`${route} has no response schema for ${status}`);
  if (entry.content) return entry.content[contentType.split(";")[0]].schema;
  return entry;
}

/** Make the request, then insist its answer matches the route's schema for that status. */
async function answer(
  route: RouteKey,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const method = route.split(" ")[0];
  const a = await call(gw.url, method, path, body, headers);
  const schema = schemaFor(route, a.status, a.headers.get("content-type") ?? "application/json");
  const value = a.status === 204 ? null : a.body;
  if (!Value.Check(schema, value)) {
    const errors = [...Value.Errors(schema, value)].slice(0, 5);
    throw new Error(`${route} ${a.status} answered a shape its schema does not describe: ${JSON.stringify(errors)}\n${JSON.stringify(value).slice(0, 2000)}`);
  }
  const [, template] = route.split(" ");
  const op = doc.paths[template.replace(/:(\w+)/g, "{$1}")][method.toLowerCase()];
  const declared = op.responses[String(a.status)] ?? op.responses[`${String(a.status)[0]}XX`];
  const missing = Object.keys(declared?.headers ?? {}).filter((h) => a.headers.get(h) === null);
  if (missing.length > 0) throw new Error(`${route} ${a.status} lacks the headers /docs/json declares: ${missing.join(", ")}`);
  checked.add(route);
  return a;
}

it("every route answers the shapes its schemas describe", async () => {
  await answer("GET /healthz", "/healthz");
  await answer("GET /readyz", "/readyz");
  await answer("GET /metrics", "/metrics");
  const created = await answer("POST /v1/sessions", "/v1/sessions", {
    workspace,
    agent: "simulated",
    title: "t",
    metadata: { free: { form: [1, 2] } },
    idempotencyKey: "schema-1",
  });
  expect(created.status).toBe(201);
  expect(created.body.metadata).toEqual({ free: { form: [1, 2] } });
  expect((await answer("POST /v1/sessions", "/v1/sessions", { workspace, agent: "simulated", idempotencyKey: "schema-1" })).status).toBe(200);
  expect((await answer("POST /v1/sessions", "/v1/sessions", { workspace: "relative", agent: "simulated" })).status).toBe(400);
  const latin1 = { "content-type": "application/json; charset=latin1" };
  expect((await answer("POST /v1/sessions", "/v1/sessions", { workspace, agent: "simulated" }, latin1)).status).toBe(415);
  const id = created.body.id;

  const task = await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, {
    prompt: "[tool 5000][tokens 1200][deltas 2]",
    idempotencyKey: "turn-1",
  });
  expect(task.status).toBe(202);
  await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, { prompt: "x", idempotencyKey: "turn-1" });
  const done = await waitTask(gw.url, task.body.id);
  const final = await answer("GET /v1/tasks/:id", `/v1/tasks/${task.body.id}`);
  expect(final.body.result.usage).toEqual(done.result.usage);
  await answer("GET /v1/tasks/:id", `/v1/tasks/00000000-0000-0000-0000-000000000000`);
  await answer("GET /v1/tasks", `/v1/tasks?sessionId=${id}&limit=1`);
  await answer("POST /v1/tasks/:id/cancel", `/v1/tasks/${task.body.id}/cancel`);
  // A queued task (position set), then cancelled.
  const hang = await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, { prompt: "[hang]" });
  await answer("POST /v1/tasks/:id/cancel", `/v1/tasks/${hang.body.id}/cancel`);
  await waitTask(gw.url, hang.body.id);

  await answer("GET /v1/sessions", "/v1/sessions?limit=1");
  const snapshot = await answer("GET /v1/sessions/:id", `/v1/sessions/${id}`);
  expect(snapshot.body.turns.length).toBeGreaterThan(0);
  await answer("GET /v1/sessions/:id", "/v1/sessions/not-a-uuid");
  await answer("GET /v1/gate", "/v1/gate");
  const agents = await answer("GET /v1/agents", "/v1/agents");
  expect(agents.body.items[0]).toEqual({ name: "simulated", driver: "simulated" });
  const listed = await answer("GET /v1/instances", "/v1/instances");
  expect(listed.body.items.some((i: { self: boolean }) => i.self)).toBe(true);

  const page = await answer("GET /v1/sessions/:id/events", `/v1/sessions/${id}/events?afterSeq=0`, undefined, {
    accept: "application/json",
  });
  const toolResult = page.body.items.find((e: { type: string }) => e.type === "tool.result");
  await answer("GET /v1/sessions/:id/events/:seq/payload", `/v1/sessions/${id}/events/${toolResult.seq}/payload`);
  await answer("GET /v1/sessions/:id/events/:seq/payload", `/v1/sessions/${id}/events/99999/payload`);
  const controller = new AbortController();
  const sse = await fetch(`${gw.url}/v1/sessions/${id}/events`, { signal: controller.signal });
  expect(schemaFor("GET /v1/sessions/:id/events", sse.status, sse.headers.get("content-type")!)).toBeTruthy();
  controller.abort();

  await answer("POST /v1/rpc", "/v1/rpc", { jsonrpc: "2.0", id: 1, method: "gate.status" });
  await answer("POST /v1/rpc", "/v1/rpc", [
    { jsonrpc: "2.0", id: 1, method: "tasks.get", params: { taskId: task.body.id } },
    { jsonrpc: "2.0", id: 2, method: "nope" },
  ]);
  expect((await answer("POST /v1/rpc", "/v1/rpc", { jsonrpc: "2.0", method: "gate.status" })).status).toBe(204);
  // Refusals of the whole request are JSON-RPC envelopes too (docs/api.md, JSON-RPC).
  const text = { "content-type": "text/plain" };
  expect((await answer("POST /v1/rpc", "/v1/rpc", '{"jsonrpc":"2.0","id":1,"method":"ping"}', text)).status).toBe(415);

  // A turn waiting on a permission request (issue 13): the snapshot with it, an answer, a 409.
  const asking = await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, { prompt: "[ask bash]" });
  const waiting = await eventually(async () => {
    const t = await answer("GET /v1/tasks/:id", `/v1/tasks/${asking.body.id}`);
    return t.body.pendingPermissions.length > 0 ? t.body : null;
  });
  const permissionPath = `/v1/tasks/${asking.body.id}/permissions/${waiting.pendingPermissions[0].requestId}`;
  expect((await answer("POST /v1/tasks/:id/permissions/:requestId", permissionPath, { optionId: "allow", message: "ok" })).status).toBe(200);
  expect((await answer("POST /v1/tasks/:id/permissions/:requestId", permissionPath, { optionId: "deny" })).status).toBe(409);
  await waitTask(gw.url, asking.body.id);

  // The webhook outbox (no endpoints here: an empty page; a retry of no delivery is 404).
  await answer("GET /v1/webhooks/deliveries", "/v1/webhooks/deliveries?status=pending&limit=5");
  expect((await answer("POST /v1/webhooks/deliveries/:id/retry", "/v1/webhooks/deliveries/00000000-0000-0000-0000-000000000000/retry")).status).toBe(404);

  await answer("DELETE /v1/sessions/:id", `/v1/sessions/${id}`);
  expect((await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, { prompt: "late" })).status).toBe(409);

  expect([...checked].sort()).toEqual(Object.keys(routeResponses).sort());
});

it("/docs/json describes the responses of every route", async () => {
  const doc = (await call(gw.url, "GET", "/docs/json")).body;
  const documented: string[] = [];
  for (const [path, methods] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(methods)) {
      const key = `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`;
      documented.push(key);
      expect(Object.keys(op.responses ?? {}), key).not.toEqual([]);
      expect(op.responses["200"] ?? op.responses["201"], key).toBeTruthy();
    }
  }
  expect(documented.sort()).toEqual(Object.keys(routeResponses).sort());
});
