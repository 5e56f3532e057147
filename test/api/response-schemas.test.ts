/**
 * Every real answer the tests provoke is what the served OpenAPI document (/docs/json) declares,
 * checked with ajv against the document's own schemas as a third-party client would: its
 * status is declared, its body matches that status's schema, and every header
 * declared for it is there and matches. Every route is provoked at each status it declares that a
 * test can bring about: its successes; 400, 404, 409, 413, 415, 429 where the route has them; 401
 * on a tokened gateway, 403 for a foreign Host, 503 on a gateway without its database. Known
 * objects are closed, so a field added to an answer without its schema fails here.
 */
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway.js";
import { type RouteKey, routeResponses } from "../../src/contract/responses.js";
import { type Answer, call, eventually, startUnreadyGateway } from "../support/gateway.js";
import { type CheckedAnswer, OpenApiCheck } from "../support/openapi-check.js";
import { rawRequest } from "../support/raw-http.js";
import { tempWorkspace, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";

const TOKEN = "token-response-schemas";
const auth = { authorization: `Bearer ${TOKEN}` };
const NO_ID = "00000000-0000-0000-0000-000000000000";

// The file's database and workspace; its gateways start in beforeAll (one with checkpoints on).
const gt = useGateway({ workspace: true, start: false });
let gw: Gateway;
/** Tokens, one slot and no queue: 401 without a token, 429 for a second turn. */
let tokened: Gateway;
/** No database: 503 NOT_READY. */
let unready: Gateway;
let workspace: string;
let dataDir: string;
let check: OpenApiCheck;
/** Each route's statuses this file provoked and checked. */
const provoked = new Map<RouteKey, Set<number>>();

beforeAll(async () => {
  workspace = gt.workspace;
  dataDir = await tempWorkspace();
  // Workspace checkpoints on: the workspace (no git) gets a shadow repository in a data dir of its own.
  gw = await gt.startGateway({ MOORING_CHECKPOINTS: "true", MOORING_DATA_DIR: dataDir });
  tokened = await gt.startGateway({
    MOORING_API_TOKENS: TOKEN,
    MOORING_MAX_ACTIVE: "1",
    MOORING_MAX_QUEUED: "0",
  });
  unready = await startUnreadyGateway();
  const served = await call(gw.url, "GET", "/docs/json");
  expect(served.status).toBe(200);
  check = new OpenApiCheck(served.body);
});

afterAll(async () => {
  await unready?.stop();
  // Stopped before its checkpoints' data dir goes.
  await gw?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

const routes = Object.keys(routeResponses) as RouteKey[];
const methodOf = (route: RouteKey) => route.split(" ")[0];
/** The route's path with ids no resource has. */
const pathOf = (route: RouteKey) =>
  route
    .split(" ")[1]
    .replace(/:id|:requestId/g, NO_ID)
    .replace(":seq", "1");

function insist(route: RouteKey, a: CheckedAnswer): void {
  const problems = check.problems(route, a);
  if (problems.length > 0) throw new Error(problems.join("\n"));
  provoked.set(route, (provoked.get(route) ?? new Set()).add(a.status));
}

const fetched = (a: Answer): CheckedAnswer => ({
  status: a.status,
  body: a.body,
  header: (n) => a.headers.get(n),
});

/** Make the request, then insist its answer is what /docs/json declares for the route and status. */
async function answer(
  route: RouteKey,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  base = gw.url,
): Promise<Answer> {
  const a = await call(base, methodOf(route), path, body, headers);
  insist(route, fetched(a));
  return a;
}

it("every route's successes and refusals of its input are what /docs/json declares", async () => {
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
  expect(
    (
      await answer("POST /v1/sessions", "/v1/sessions", {
        workspace,
        agent: "simulated",
        idempotencyKey: "schema-1",
      })
    ).status,
  ).toBe(200);
  expect(
    (await answer("POST /v1/sessions", "/v1/sessions", { workspace: "relative", agent: "simulated" })).status,
  ).toBe(400);
  const latin1 = { "content-type": "application/json; charset=latin1" };
  expect(
    (await answer("POST /v1/sessions", "/v1/sessions", { workspace, agent: "simulated" }, latin1)).status,
  ).toBe(415);
  const id = created.body.id;

  const task = await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, {
    prompt: "[tool 5000][tokens 1200][deltas 2]",
    idempotencyKey: "turn-1",
  });
  expect(task.status).toBe(202);
  await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, {
    prompt: "x",
    idempotencyKey: "turn-1",
  });
  const done = await waitTask(gw.url, task.body.id);
  // Workspace checkpoints: the turn's diff, a session diff, a revert, and their refusals.
  const diffRoute = "GET /v1/tasks/:id/diff";
  expect((await answer(diffRoute, `/v1/tasks/${task.body.id}/diff`)).status).toBe(200);
  expect((await answer(diffRoute, `/v1/tasks/${task.body.id}/diff?cursor=nope`)).status).toBe(400);
  expect((await answer(diffRoute, "/v1/tasks/00000000-0000-0000-0000-000000000000/diff")).status).toBe(404);
  const sessionDiff = "GET /v1/sessions/:id/diff";
  expect((await answer(sessionDiff, `/v1/sessions/${id}/diff?fromTurn=0&toTurn=0`)).status).toBe(200);
  expect((await answer(sessionDiff, `/v1/sessions/${id}/diff?fromTurn=1&toTurn=0`)).status).toBe(400);
  expect((await answer(sessionDiff, `/v1/sessions/${id}/diff?fromTurn=7&toTurn=7`)).status).toBe(404);
  const revert = "POST /v1/sessions/:id/revert";
  expect((await answer(revert, `/v1/sessions/${id}/revert`, { toTurn: 0 })).status).toBe(200);
  expect((await answer(revert, `/v1/sessions/${id}/revert`, { toTurn: 0, unrevert: true })).status).toBe(400);
  expect((await answer(revert, `/v1/sessions/${id}/revert`, { toTurn: 7 })).status).toBe(404);
  await writeFile(join(workspace, "user-edit.txt"), "a file the user made after the last checkpoint\n");
  const conflict = await answer(revert, `/v1/sessions/${id}/revert`, { toTurn: 0 });
  expect(conflict.status).toBe(409);
  expect(conflict.body.error).toMatchObject({ code: "WORKSPACE_CONFLICT", paths: ["user-edit.txt"] });
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

  const page = await answer(
    "GET /v1/sessions/:id/events",
    `/v1/sessions/${id}/events?afterSeq=0`,
    undefined,
    {
      accept: "application/json",
    },
  );
  const toolResult = page.body.items.find((e: { type: string }) => e.type === "tool.result");
  await answer(
    "GET /v1/sessions/:id/events/:seq/payload",
    `/v1/sessions/${id}/events/${toolResult.seq}/payload`,
  );
  await answer("GET /v1/sessions/:id/events/:seq/payload", `/v1/sessions/${id}/events/99999/payload`);
  // The stream: its headers and its first records, checked as the declared text/event-stream.
  const controller = new AbortController();
  const sse = await fetch(`${gw.url}/v1/sessions/${id}/events`, { signal: controller.signal });
  const first = await sse.body!.getReader().read();
  insist("GET /v1/sessions/:id/events", {
    status: sse.status,
    body: new TextDecoder().decode(first.value),
    header: (n) => sse.headers.get(n),
  });
  controller.abort();

  await answer("POST /v1/rpc", "/v1/rpc", { jsonrpc: "2.0", id: 1, method: "gate.status" });
  await answer("POST /v1/rpc", "/v1/rpc", [
    { jsonrpc: "2.0", id: 1, method: "tasks.get", params: { taskId: task.body.id } },
    { jsonrpc: "2.0", id: 2, method: "nope" },
  ]);
  expect((await answer("POST /v1/rpc", "/v1/rpc", { jsonrpc: "2.0", method: "gate.status" })).status).toBe(
    204,
  );
  // Refusals of the whole request are JSON-RPC envelopes too (docs/api.md, JSON-RPC).
  const text = { "content-type": "text/plain" };
  expect(
    (await answer("POST /v1/rpc", "/v1/rpc", '{"jsonrpc":"2.0","id":1,"method":"ping"}', text)).status,
  ).toBe(415);

  // A turn waiting on a permission request: the snapshot with it, an answer, a 409.
  const asking = await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, {
    prompt: "[ask bash]",
  });
  const waiting = await eventually(async () => {
    const t = await answer("GET /v1/tasks/:id", `/v1/tasks/${asking.body.id}`);
    return t.body.pendingPermissions.length > 0 ? t.body : null;
  });
  const permissionPath = `/v1/tasks/${asking.body.id}/permissions/${waiting.pendingPermissions[0].requestId}`;
  expect(
    (
      await answer("POST /v1/tasks/:id/permissions/:requestId", permissionPath, {
        optionId: "allow",
        message: "ok",
      })
    ).status,
  ).toBe(200);
  expect(
    (await answer("POST /v1/tasks/:id/permissions/:requestId", permissionPath, { optionId: "deny" })).status,
  ).toBe(409);
  await waitTask(gw.url, asking.body.id);

  // A steer (docs/api.md, Steering a running turn): accepted, repeated, refused once the turn ended.
  const steering = await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, {
    prompt: "[input]",
  });
  await waitTask(gw.url, steering.body.id, (t) => t.status !== "queued");
  const inputPath = `/v1/tasks/${steering.body.id}/input`;
  expect(
    (await answer("POST /v1/tasks/:id/input", inputPath, { text: "go", idempotencyKey: "k" })).status,
  ).toBe(202);
  expect(
    (await answer("POST /v1/tasks/:id/input", inputPath, { text: "go", idempotencyKey: "k" })).status,
  ).toBe(200);
  await waitTask(gw.url, steering.body.id);
  expect((await answer("POST /v1/tasks/:id/input", inputPath, { text: "late" })).status).toBe(409);

  // The webhook outbox (no endpoints here: an empty page; a retry of no delivery is 404).
  await answer("GET /v1/webhooks/deliveries", "/v1/webhooks/deliveries?status=pending&limit=5");
  expect(
    (
      await answer(
        "POST /v1/webhooks/deliveries/:id/retry",
        "/v1/webhooks/deliveries/00000000-0000-0000-0000-000000000000/retry",
      )
    ).status,
  ).toBe(404);

  // A drain: an id too long for one, an instance that is not there, and a gateway draining itself
  // (in-process, so it stops rather than exits).
  const drain = "POST /v1/instances/:instanceId/drain";
  expect((await answer(drain, `/v1/instances/${"x".repeat(201)}/drain`)).status).toBe(400);
  expect((await answer(drain, "/v1/instances/nobody/drain")).status).toBe(404);
  const drained = await gt.startGateway({ MOORING_INSTANCE_ID: "response-schemas-drained" });
  expect(
    (await answer(drain, "/v1/instances/response-schemas-drained/drain", undefined, {}, drained.url)).status,
  ).toBe(200);

  // Fork (201, a retried key 200, a turn that does not exist 400) and rollback (200, 400; 409 once archived).
  const forkBody = { idempotencyKey: "fork-schema-1" };
  expect((await answer("POST /v1/sessions/:id/fork", `/v1/sessions/${id}/fork`, forkBody)).status).toBe(201);
  expect((await answer("POST /v1/sessions/:id/fork", `/v1/sessions/${id}/fork`, forkBody)).status).toBe(200);
  expect((await answer("POST /v1/sessions/:id/fork", `/v1/sessions/${id}/fork`, { atTurn: 99 })).status).toBe(
    400,
  );
  expect(
    (await answer("POST /v1/sessions/:id/rollback", `/v1/sessions/${id}/rollback`, { turns: 0 })).status,
  ).toBe(400);
  expect(
    (await answer("POST /v1/sessions/:id/rollback", `/v1/sessions/${id}/rollback`, { turns: 1 })).status,
  ).toBe(200);

  await answer("DELETE /v1/sessions/:id", `/v1/sessions/${id}`);
  expect(
    (await answer("POST /v1/sessions/:id/rollback", `/v1/sessions/${id}/rollback`, { turns: 1 })).status,
  ).toBe(409);
  expect(
    (await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, { prompt: "late" })).status,
  ).toBe(409);

  // Bad input on the routes that take some: 400, and 404 for what does not exist.
  for (const [route, path] of [
    ["GET /v1/sessions", "/v1/sessions?limit=0"],
    ["GET /v1/tasks", "/v1/tasks?status=nope"],
    ["GET /v1/tasks/:id", `/v1/tasks/${NO_ID}?waitMs=-1`],
    ["GET /v1/sessions/:id/events", `/v1/sessions/${id}/events?afterSeq=-1`],
    ["GET /v1/sessions/:id/events/:seq/payload", `/v1/sessions/${id}/events/0/payload`],
    ["GET /v1/webhooks/deliveries", "/v1/webhooks/deliveries?status=nope"],
  ] as const) {
    expect((await answer(route, path)).status, route).toBe(400);
  }
  expect(
    (await answer("POST /v1/sessions/:id/turns", `/v1/sessions/${id}/turns`, { prompt: "" })).status,
  ).toBe(400);
  expect((await answer("POST /v1/tasks/:id/permissions/:requestId", permissionPath, {})).status).toBe(400);
  for (const route of [
    "GET /v1/sessions/:id",
    "DELETE /v1/sessions/:id",
    "POST /v1/sessions/:id/turns",
    "POST /v1/tasks/:id/cancel",
    "GET /v1/sessions/:id/events",
    "POST /v1/tasks/:id/permissions/:requestId",
    "POST /v1/tasks/:id/input",
    "POST /v1/sessions/:id/fork",
    "POST /v1/sessions/:id/rollback",
  ] as const) {
    const body =
      route === "POST /v1/sessions/:id/turns"
        ? { prompt: "x" }
        : route.endsWith(":requestId")
          ? { optionId: "allow" }
          : route.endsWith("/input")
            ? { text: "x" }
            : route.endsWith("/rollback")
              ? { turns: 1 }
              : route.endsWith("/fork")
                ? {}
                : undefined;
    expect((await answer(route, pathOf(route), body)).status, route).toBe(404);
  }
  // An id longer than any id (64 characters) is a 400 on every route that takes one.
  for (const route of routes.filter((r) => r.includes(":id"))) {
    const body = methodOf(route) === "POST" ? {} : undefined;
    const a = await answer(
      route,
      route.split(" ")[1].replace(":id", "x".repeat(65)).replace(":requestId", NO_ID).replace(":seq", "1"),
      body,
    );
    expect(a.status, route).toBe(400);
  }
  // JSON-RPC: what is not JSON is a parse error in a JSON-RPC envelope.
  const unparsable = await answer("POST /v1/rpc", "/v1/rpc", '{"jsonrpc":', {
    "content-type": "application/json",
  });
  expect(unparsable.body.error.code).toBe(-32700);
  // A body over MOORING_BODY_LIMIT_BYTES (1 MiB here).
  const big = { workspace, agent: "simulated", title: "x".repeat(1_100_000) };
  expect((await answer("POST /v1/sessions", "/v1/sessions", big)).status).toBe(413);
  expect(
    (await answer("POST /v1/rpc", "/v1/rpc", { jsonrpc: "2.0", id: 3, method: "ping", params: big })).status,
  ).toBe(413);
});

it("refusals of the whole request are what /docs/json declares: 401, 403, 503 on every route", async () => {
  for (const route of routes) {
    const declared = check.operation(route)!.responses;
    if (declared["401"]) {
      expect((await answer(route, pathOf(route), undefined, {}, tokened.url)).status, route).toBe(401);
    }
    // A foreign Host (DNS rebinding) is refused before any work, on every route.
    const host = await rawRequest(gw.url, methodOf(route), pathOf(route), { host: "evil.example:8787" });
    insist(route, {
      status: host.status,
      body: host.body,
      header: (n) => (host.headers[n] as string | undefined) ?? null,
    });
    expect(host.status, route).toBe(403);
    if (declared["503"]) {
      const a = await answer(route, pathOf(route), undefined, {}, unready.url);
      expect(a.status, route).toBe(route === "GET /healthz" || route === "GET /metrics" ? 200 : 503);
    }
  }
});

it("a turn over the gate's limits is 429 with Retry-After", async () => {
  const session = (
    await answer("POST /v1/sessions", "/v1/sessions", { workspace, agent: "simulated" }, auth, tokened.url)
  ).body;
  const other = (
    await answer("POST /v1/sessions", "/v1/sessions", { workspace, agent: "simulated" }, auth, tokened.url)
  ).body;
  const hang = await answer(
    "POST /v1/sessions/:id/turns",
    `/v1/sessions/${session.id}/turns`,
    { prompt: "[hang]" },
    auth,
    tokened.url,
  );
  expect(hang.status).toBe(202);
  const busy = await answer(
    "POST /v1/sessions/:id/turns",
    `/v1/sessions/${other.id}/turns`,
    { prompt: "x" },
    auth,
    tokened.url,
  );
  expect(busy.status).toBe(429);
  expect(busy.body.error.code).toBe("GATEWAY_BUSY");
  await answer("POST /v1/tasks/:id/cancel", `/v1/tasks/${hang.body.id}/cancel`, undefined, auth, tokened.url);
});

it("answers of no operation (an unknown path, an unsupported method) are the Error schema", async () => {
  const unknown = await call(gw.url, "GET", "/v1/nothing-here");
  expect(unknown.status).toBe(404);
  expect(check.componentProblem("Error", unknown.body)).toBeNull();
  const method = await call(gw.url, "PUT", "/v1/sessions");
  expect(method.status).toBe(405);
  expect(method.headers.get("allow")).toBeTruthy();
  expect(check.componentProblem("Error", method.body)).toBeNull();
});

it("each route was provoked at every status it declares that a test can bring about", () => {
  const table = Object.fromEntries(routes.map((r) => [r, [...(provoked.get(r) ?? [])].sort()]));
  expect(table).toEqual(EXPECTED);
  // Every status a route declares by number was provoked (ranges, 5XX among them, need not be).
  for (const route of routes) {
    const numbered = Object.keys(check.operation(route)!.responses)
      .filter((s) => /^\d+$/.test(s))
      .map(Number);
    const missing = numbered.filter((s) => !provoked.get(route)?.has(s) && !NOT_PROVOKED[route]?.includes(s));
    expect(missing, route).toEqual([]);
  }
});

/** What the tests above provoke, per route: a status gained or lost shows here. */
const EXPECTED: Record<string, number[]> = {
  "GET /healthz": [200, 403],
  "GET /readyz": [200, 403, 503],
  "GET /metrics": [200, 401, 403],
  "POST /v1/sessions": [200, 201, 400, 401, 403, 413, 415, 503],
  "GET /v1/agents": [200, 401, 403, 503],
  "GET /v1/sessions": [200, 400, 401, 403, 503],
  "GET /v1/sessions/:id": [200, 400, 401, 403, 404, 503],
  "DELETE /v1/sessions/:id": [200, 400, 401, 403, 404, 503],
  "POST /v1/sessions/:id/fork": [200, 201, 400, 401, 403, 404, 503],
  "POST /v1/sessions/:id/rollback": [200, 400, 401, 403, 404, 409, 503],
  "POST /v1/sessions/:id/turns": [200, 202, 400, 401, 403, 404, 409, 429, 503],
  "GET /v1/tasks/:id": [200, 400, 401, 403, 404, 503],
  "GET /v1/tasks": [200, 400, 401, 403, 503],
  "POST /v1/tasks/:id/cancel": [200, 400, 401, 403, 404, 503],
  "GET /v1/tasks/:id/diff": [200, 400, 401, 403, 404, 503],
  "GET /v1/sessions/:id/diff": [200, 400, 401, 403, 404, 503],
  "POST /v1/sessions/:id/revert": [200, 400, 401, 403, 404, 409, 503],
  "POST /v1/tasks/:id/permissions/:requestId": [200, 400, 401, 403, 404, 409, 503],
  "POST /v1/tasks/:id/input": [200, 202, 400, 401, 403, 404, 409, 503],
  "GET /v1/gate": [200, 401, 403, 503],
  "GET /v1/instances": [200, 401, 403, 503],
  "POST /v1/instances/:instanceId/drain": [200, 400, 401, 403, 404, 503],
  "GET /v1/webhooks/deliveries": [200, 400, 401, 403, 503],
  "POST /v1/webhooks/deliveries/:id/retry": [400, 401, 403, 404, 503],
  "GET /v1/sessions/:id/events": [200, 400, 401, 403, 404, 503],
  "GET /v1/sessions/:id/events/:seq/payload": [200, 400, 401, 403, 404, 503],
  "POST /v1/rpc": [200, 204, 401, 403, 413, 415, 503],
};

/** Declared statuses this file cannot bring about without more machinery than it checks. */
const NOT_PROVOKED: Partial<Record<RouteKey, number[]>> = {
  // A retry needs a failed delivery, so a webhook endpoint that refuses (test/webhooks*.test.ts).
  "POST /v1/webhooks/deliveries/:id/retry": [200],
};

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
