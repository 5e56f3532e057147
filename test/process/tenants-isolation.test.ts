/**
 * Tenant isolation (docs/tenants.md; docs/api.md, Tenants), on a real gateway with three tenants
 * from MOORING_TENANTS (one with a hashed token, one narrowed to a root and an agent, one admin)
 * and the `default` tenant of MOORING_API_TOKENS: tenant B's token on tenant A's ids gets exactly
 * the answer of a missing id, over every REST route, every JSON-RPC method on HTTP and on the
 * WebSocket, SSE and events.subscribe, and changes nothing; lists never mix; the admin sees all
 * and filters; idempotency keys are per tenant; no log line holds a token or a token's hash; and
 * configuration errors name the field (one real process exits 2).
 */
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { TenantDirectory } from "../../src/domain/tenants.js";
import type { Gateway } from "../../src/gateway.js";
import { type Answer, call, testEnv } from "../support/gateway.js";
import { runGatewayToExit } from "../support/run-to-exit.js";
import {
  counts,
  createSessionWith,
  submitOk,
  submitPrompt,
  tempWorkspace,
  waitPermission,
  waitTask,
} from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { WsClient } from "../support/ws-client.js";

const A1 = "tenant-alpha-token-one-1111";
/** Configured only as its sha256 digest: rotation (two tokens of one tenant) and hashed tokens. */
const A2 = "tenant-alpha-token-two-2222";
const B = "tenant-beta-token-3333";
const OPS = "tenant-ops-token-4444";
const D = "default-tenant-token-5555";
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const SECRETS = [A1, A2, B, OPS, D, ...[A1, A2, B, OPS, D].map(sha256)];

const MISSING = "00000000-0000-4000-8000-00000000dead";
const MISSING_REQUEST = "00000000-0000-4000-8000-00000000beef";

const suite = useGateway({ start: false });
let gw: Gateway;
let wsA: string;
let rootB: string;
let wsB: string;
const lines: Record<string, any>[] = [];

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const api = (
  token: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) => call(gw.url, method, path, body, { ...auth(token), ...headers });
const rpc = async (token: string, method: string, params: unknown) =>
  (await api(token, "POST", "/v1/rpc", { jsonrpc: "2.0", id: 1, method, params })).body;

/** An answer with `id` written as `<id>`, to compare a foreign id's answer with a missing id's. */
const shape = (answer: unknown, ...ids: string[]) => {
  let text = JSON.stringify(answer);
  for (const id of ids) text = text.replaceAll(id, "<id>");
  return JSON.parse(text);
};

/** Fixtures of tenant alpha (A's ids) and beta. */
let sessA: any;
let taskA: any;
let sessP: any;
let taskP: any;
let requestP: string;
let sessB: any;
let taskB: any;

/** A session made with the key `shared` and a turn with the key `turn`, run to completion. */
async function sessionWithDoneTurn(token: string, workspace: string, prompt: string) {
  const session = await createSessionWith(
    gw.url,
    { workspace, agent: "simulated", idempotencyKey: "shared" },
    auth(token),
  );
  const submitted = await submitOk(gw.url, session.id, { prompt, idempotencyKey: "turn" }, auth(token));
  const task = await waitTask(gw.url, submitted.id, undefined, undefined, auth(token));
  expect(task.status).toBe("completed");
  return { session, task };
}

beforeAll(async () => {
  wsA = await tempWorkspace();
  rootB = await tempWorkspace();
  wsB = join(rootB, "project");
  await mkdir(wsB);
  const tenants = {
    alpha: { tokens: [A1, `sha256:${sha256(A2)}`] },
    beta: { tokens: [B], workspaceRoots: [rootB], agents: ["simulated"] },
    ops: { tokens: [OPS], admin: true },
  };
  gw = await suite.startGateway(
    { MOORING_TENANTS: JSON.stringify(tenants), MOORING_API_TOKENS: D },
    { onLog: (l) => lines.push(l), logLevel: "debug" },
  );

  ({ session: sessA, task: taskA } = await sessionWithDoneTurn(A1, wsA, "[deltas 3]"));

  // The second, hashed token of alpha: a running turn that waits on a permission request.
  sessP = await createSessionWith(gw.url, { workspace: wsA, agent: "simulated" }, auth(A2));
  taskP = await submitPrompt(gw.url, sessP.id, "[ask bash]", auth(A2));
  requestP = (await waitPermission(gw.url, taskP.id, undefined, auth(A2))).requestId;

  // Beta uses the same idempotency keys: its own session and task.
  ({ session: sessB, task: taskB } = await sessionWithDoneTurn(B, wsB, "[deltas 1]"));
});

describe("tenant B on tenant A's ids", () => {
  /** Every REST route that names a resource, with A's ids and a body where it takes one. */
  const restRoutes = (): [string, string, unknown?, Record<string, string>?][] => [
    ["GET", `/v1/sessions/${sessA.id}`],
    ["DELETE", `/v1/sessions/${sessA.id}`],
    ["POST", `/v1/sessions/${sessA.id}/turns`, { prompt: "hi" }],
    ["POST", `/v1/sessions/${sessA.id}/turns`, { prompt: "hi", idempotencyKey: "turn" }],
    ["POST", `/v1/sessions/${sessP.id}/turns`, { prompt: "hi", ifBusy: "reject" }],
    ["POST", `/v1/sessions/${sessP.id}/turns`, { prompt: "hi", ifBusy: "interrupt" }],
    ["POST", `/v1/sessions/${sessP.id}/turns`, { prompt: "hi", ifBusy: "enqueue", idempotencyKey: "x" }],
    ["GET", `/v1/sessions/${sessA.id}/events`, undefined, { accept: "application/json" }],
    ["GET", `/v1/sessions/${sessA.id}/events?afterSeq=0`, undefined, { accept: "text/event-stream" }],
    ["GET", `/v1/sessions/${sessA.id}/events/1/payload`],
    ["GET", `/v1/tasks/${taskA.id}`],
    ["GET", `/v1/tasks/${taskP.id}?waitMs=2000`],
    ["POST", `/v1/tasks/${taskP.id}/cancel`],
    ["POST", `/v1/tasks/${taskA.id}/cancel`],
    ["POST", `/v1/tasks/${taskP.id}/permissions/${requestP}`, { optionId: "allow" }],
    ["POST", `/v1/tasks/${taskP.id}/permissions/${MISSING_REQUEST}`, { optionId: "allow" }],
  ];
  const aIds = () => [sessA.id, sessP.id, taskA.id, taskP.id];
  const swapToMissing = (text: string) => {
    let out = text;
    for (const id of aIds()) out = out.replaceAll(id, MISSING);
    return out;
  };

  it("every REST route answers the 404 of a missing id, with no data, and changes nothing", async () => {
    const before = await counts(suite.sql);
    for (const [method, path, body, headers] of restRoutes()) {
      const foreign = await api(B, method, path, body, headers);
      const missing = await api(B, method, swapToMissing(path), body, headers);
      expect(foreign.status, `${method} ${path}`).toBe(404);
      expect(["SESSION_NOT_FOUND", "TASK_NOT_FOUND"]).toContain(foreign.body.error.code);
      expect(shape(foreign.body, ...aIds()), `${method} ${path}`).toEqual(shape(missing.body, MISSING));
      expect(JSON.stringify(foreign.body)).not.toContain(sessA.workspace);
    }
    expect(await counts(suite.sql)).toEqual(before);
    // Nothing of A's was touched: not archived, the waiting turn still running with its request.
    expect((await api(A1, "GET", `/v1/sessions/${sessA.id}`)).body.status).toBe("idle");
    const still = (await api(A1, "GET", `/v1/tasks/${taskP.id}`)).body;
    expect(still.status).toBe("running");
    expect(still.pendingPermissions.map((p: any) => p.requestId)).toEqual([requestP]);
  });

  /** Every JSON-RPC method that names a resource, with A's ids. */
  const rpcCalls = (): [string, Record<string, unknown>][] => [
    ["sessions.get", { sessionId: sessA.id }],
    ["sessions.archive", { sessionId: sessA.id }],
    ["turns.submit", { sessionId: sessA.id, prompt: "hi", idempotencyKey: "turn" }],
    ["turns.submit", { sessionId: sessP.id, prompt: "hi", ifBusy: "reject" }],
    ["turns.submit", { sessionId: sessP.id, prompt: "hi", ifBusy: "interrupt" }],
    ["tasks.get", { taskId: taskA.id }],
    ["tasks.get", { taskId: taskP.id, waitMs: 2000 }],
    ["tasks.cancel", { taskId: taskP.id }],
    ["permissions.respond", { taskId: taskP.id, requestId: requestP, optionId: "allow" }],
  ];
  const swapParams = (params: Record<string, unknown>) => JSON.parse(swapToMissing(JSON.stringify(params)));

  it("every JSON-RPC method over HTTP answers like a missing id and changes nothing", async () => {
    const before = await counts(suite.sql);
    for (const [method, params] of rpcCalls()) {
      const foreign = await rpc(B, method, params);
      const missing = await rpc(B, method, swapParams(params));
      expect(foreign.error?.code, method).toBe(-32004);
      expect(shape(foreign, ...aIds()), method).toEqual(shape(missing, MISSING));
    }
    expect(await counts(suite.sql)).toEqual(before);
  });

  it("every JSON-RPC method over the WebSocket, and events.subscribe, answer like a missing id; no event arrives", async () => {
    const ws = await WsClient.connect(gw.url, { headers: auth(B) });
    try {
      const before = await counts(suite.sql);
      const calls: [string, Record<string, unknown>][] = [
        ...rpcCalls(),
        ["events.subscribe", { sessionId: sessA.id }],
        ["events.subscribe", { sessionId: sessA.id, afterSeq: 0 }],
      ];
      for (const [method, params] of calls) {
        const foreign = await ws.request(method, params);
        const missing = await ws.request(method, swapParams(params));
        expect(foreign.error?.code, method).toBe(-32004);
        expect(shape({ ...foreign, id: 0 }, ...aIds()), method).toEqual(
          shape({ ...missing, id: 0 }, MISSING),
        );
      }
      expect(await counts(suite.sql)).toEqual(before);
      // A turn of A's session writes events; the socket that tried to subscribe gets none of them.
      const t = await submitPrompt(gw.url, sessA.id, "[deltas 2]", auth(A1));
      expect((await waitTask(gw.url, t.id, undefined, undefined, auth(A1))).status).toBe("completed");
      await ws.call("ping", {});
      expect(ws.events).toEqual([]);
    } finally {
      await ws.close();
    }
  });

  it("SSE of A's session by B's access_token is the 404 of a missing session", async () => {
    const res = await fetch(`${gw.url}/v1/sessions/${sessA.id}/events?access_token=${B}`, {
      headers: { accept: "text/event-stream" },
    });
    expect(res.status).toBe(404);
    expect((await res.json()).error.code).toBe("SESSION_NOT_FOUND");
  });

  it("B answers A's permission request: TASK_NOT_FOUND; A's own answer then wins", async () => {
    const foreign = await api(B, "POST", `/v1/tasks/${taskP.id}/permissions/${requestP}`, {
      optionId: "deny",
    });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("TASK_NOT_FOUND");
    // A (the other token of alpha) answers: proof the request was still open.
    const own = await api(A1, "POST", `/v1/tasks/${taskP.id}/permissions/${requestP}`, { optionId: "deny" });
    expect(own.status).toBe(200);
    expect((await waitTask(gw.url, taskP.id, undefined, undefined, auth(A1))).status).toBe("completed");
  });
});

describe("lists and views", () => {
  const ids = (page: Answer) => page.body.items.map((i: any) => i.id);

  it("each tenant lists only its own; a filter naming another tenant lists nothing", async () => {
    const alpha = await api(A1, "GET", "/v1/sessions");
    expect(ids(alpha)).toEqual(expect.arrayContaining([sessA.id, sessP.id]));
    expect(ids(alpha)).not.toContain(sessB.id);
    expect(new Set(alpha.body.items.map((i: any) => i.tenant))).toEqual(new Set(["alpha"]));
    expect(ids(await api(B, "GET", "/v1/sessions"))).toEqual([sessB.id]);
    expect(ids(await api(B, "GET", "/v1/sessions?tenant=alpha"))).toEqual([]);
    expect(ids(await api(B, "GET", "/v1/sessions?tenant=beta"))).toEqual([sessB.id]);
    expect(ids(await api(D, "GET", "/v1/sessions"))).toEqual([]);
    expect(ids(await api(B, "GET", "/v1/tasks"))).toEqual([taskB.id]);
    expect(ids(await api(B, "GET", `/v1/tasks?sessionId=${sessA.id}`))).toEqual([]);
    const alphaTasks = await api(A2, "GET", "/v1/tasks");
    expect(ids(alphaTasks)).toEqual(expect.arrayContaining([taskA.id, taskP.id]));
    expect(ids(alphaTasks)).not.toContain(taskB.id);
    // JSON-RPC lists the same.
    const rpcList = await rpc(B, "sessions.list", {});
    expect(rpcList.result.items.map((i: any) => i.id)).toEqual([sessB.id]);
    expect((await rpc(B, "tasks.list", { tenant: "alpha" })).result.items).toEqual([]);
  });

  it("an admin sees every tenant, by id and in lists, and filters lists by tenant", async () => {
    expect((await api(OPS, "GET", `/v1/sessions/${sessA.id}`)).status).toBe(200);
    expect((await api(OPS, "GET", `/v1/tasks/${taskB.id}`)).body.tenant).toBe("beta");
    const all = ids(await api(OPS, "GET", "/v1/sessions"));
    expect(all).toEqual(expect.arrayContaining([sessA.id, sessP.id, sessB.id]));
    expect(ids(await api(OPS, "GET", "/v1/sessions?tenant=beta"))).toEqual([sessB.id]);
    expect(ids(await api(OPS, "GET", "/v1/tasks?tenant=beta"))).toEqual([taskB.id]);
    expect(ids(await api(OPS, "GET", "/v1/sessions?tenant=nobody"))).toEqual([]);
    const rpcAll = await rpc(OPS, "tasks.list", { tenant: "alpha" });
    expect(rpcAll.result.items.map((i: any) => i.tenant)).toEqual(rpcAll.result.items.map(() => "alpha"));
    expect(rpcAll.result.items.length).toBeGreaterThanOrEqual(2);
  });

  it("GET /v1/agents lists the agents each tenant may name: beta only its own list", async () => {
    expect((await api(B, "GET", "/v1/agents")).body).toEqual({
      items: [{ name: "simulated", driver: "simulated" }],
    });
    expect((await api(A1, "GET", "/v1/agents")).body.items.map((a: { name: string }) => a.name)).toEqual([
      "simulated",
      "claude-code",
    ]);
  });

  it("Session and Task carry their tenant; MOORING_API_TOKENS is the tenant default", async () => {
    expect(sessA.tenant).toBe("alpha");
    expect(taskA.tenant).toBe("alpha");
    expect(sessB.tenant).toBe("beta");
    const d = await api(D, "POST", "/v1/sessions", { workspace: wsA, agent: "simulated" });
    expect(d.status).toBe(201);
    expect(d.body.tenant).toBe("default");
    const snapshot = await api(A1, "GET", `/v1/sessions/${sessA.id}`);
    expect(snapshot.body.turns.every((t: any) => t.tenant === "alpha")).toBe(true);
  });

  it("instances are listed for every tenant (they hold no tenant data)", async () => {
    for (const token of [A1, B, D]) {
      const r = await api(token, "GET", "/v1/instances");
      expect(r.status).toBe(200);
      expect(r.body.items.length).toBeGreaterThan(0);
    }
  });
});

describe("idempotency keys and tokens", () => {
  it("one session key in two tenants makes two sessions; one turn key in their sessions two tasks", async () => {
    expect(sessB.id).not.toBe(sessA.id);
    expect(taskB.id).not.toBe(taskA.id);
    for (const [token, workspace, first] of [
      [A2, wsA, sessA],
      [B, wsB, sessB],
    ]) {
      const body = { workspace, agent: "simulated", idempotencyKey: "shared" };
      const again = await api(token, "POST", "/v1/sessions", body);
      expect(again.status).toBe(200);
      expect(again.body.id).toBe(first.id);
    }
    const turn = await api(A1, "POST", `/v1/sessions/${sessA.id}/turns`, {
      prompt: "x",
      idempotencyKey: "turn",
    });
    expect(turn.status).toBe(200);
    expect(turn.body.id).toBe(taskA.id);
  });

  it("both tokens of alpha (one plain, one configured as sha256) act as alpha; a digest is no token", async () => {
    for (const token of [A1, A2]) {
      const r = await api(token, "GET", `/v1/sessions/${sessP.id}`);
      expect(r.status).toBe(200);
      expect(r.body.tenant).toBe("alpha");
    }
    expect((await api(sha256(A2), "GET", "/v1/sessions")).status).toBe(401);
    expect((await api(`sha256:${sha256(A2)}`, "GET", "/v1/sessions")).status).toBe(401);
  });
});

describe("a tenant's roots and agents narrow session create", () => {
  it("a workspace outside the tenant's roots is WORKSPACE_NOT_ALLOWED, worded as for the global roots", async () => {
    const r = await api(B, "POST", "/v1/sessions", { workspace: wsA, agent: "simulated" });
    expect(r.status).toBe(403);
    expect(r.body.error).toEqual({
      code: "WORKSPACE_NOT_ALLOWED",
      message: `workspace ${JSON.stringify(wsA)} is outside the allowed roots`,
      field: "workspace",
    });
  });

  it("an agent outside the tenant's list is refused like an unregistered one", async () => {
    const listed = await api(B, "POST", "/v1/sessions", { workspace: wsB, agent: "claude-code" });
    const unknown = await api(B, "POST", "/v1/sessions", { workspace: wsB, agent: "no-such-agent" });
    expect(listed.status).toBe(400);
    expect(listed.body.error.field).toBe("agent");
    expect(listed.body.error.message.replace("claude-code", "<agent>")).toBe(
      unknown.body.error.message.replace("no-such-agent", "<agent>"),
    );
    expect(listed.body.error.message).toContain("(registered: simulated)");
    // Alpha has every agent: the same name is accepted there (its config is the driver's to judge).
    const alpha = await api(A1, "POST", "/v1/sessions", { workspace: wsA, agent: "claude-code" });
    expect(alpha.status).toBe(201);
  });
});

describe("logs", () => {
  it("every request line names its tenant, lifecycle lines too, and no line holds a token or a token's hash", async () => {
    // One more archive and one request by the query parameter, so those lines exist too.
    const s = await api(B, "POST", "/v1/sessions", { workspace: wsB, agent: "simulated" });
    expect((await call(gw.url, "DELETE", `/v1/sessions/${s.body.id}?access_token=${B}`)).status).toBe(200);
    // A request refused for its token (the digest tried above) has no tenant to name.
    const refused = new Set(lines.filter((l) => l.res?.statusCode === 401).map((l) => l.reqId));
    expect(refused.size).toBe(2);
    const requestLines = lines.filter(
      (l) => (l.msg === "incoming request" || l.msg === "request completed") && !refused.has(l.reqId),
    );
    expect(requestLines.length).toBeGreaterThan(50);
    for (const line of requestLines) expect(line.tenant, JSON.stringify(line)).toEqual(expect.any(String));
    const byTenant = new Set(requestLines.map((l) => l.tenant));
    expect(byTenant).toEqual(new Set(["alpha", "beta", "ops", "default"]));
    expect(requestLines.filter((l) => l.tenant === "ops").every((l) => l.admin === true)).toBe(true);
    expect(lines.find((l) => l.msg === "session created" && l.sessionId === sessB.id)?.tenant).toBe("beta");
    expect(lines.find((l) => l.msg === "session archived" && l.sessionId === s.body.id)?.tenant).toBe("beta");
    expect(lines.find((l) => l.msg === "turn settled" && l.taskId === taskA.id)?.tenant).toBe("alpha");
    expect(lines.find((l) => l.msg === "permission answered" && l.taskId === taskP.id)?.tenant).toBe("alpha");
    const text = JSON.stringify(lines);
    for (const secret of SECRETS) expect(text).not.toContain(secret);
  });
});

describe("configuration errors name the field", () => {
  const config = (tenants: unknown, extra: Record<string, string> = {}) =>
    loadConfig(testEnv(suite.databaseUrl, { MOORING_TENANTS: JSON.stringify(tenants), ...extra }));
  const directory = (tenants: unknown, extra: Record<string, string> = {}) =>
    TenantDirectory.fromConfig(config(tenants, extra), ["simulated"]);
  const refusal = (build: () => unknown): string => {
    try {
      build();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error("accepted");
  };

  it("an unknown field, a bad value, a token listed twice, MOORING_API_TOKENS with a tenant default", () => {
    expect(refusal(() => config({ x: { tokens: ["t-1"], colour: "red" } }))).toMatch(
      /MOORING_TENANTS: tenant "x": unknown field "colour"/,
    );
    expect(refusal(() => config({ x: { tokens: ["t-1"], maxActive: 0 } }))).toMatch(
      /tenant "x": "maxActive" must be/,
    );
    expect(refusal(() => config({ x: { tokens: ["t-1"], admin: "yes" } }))).toMatch(
      /tenant "x": "admin" must be/,
    );
    expect(refusal(() => config({ x: { tokens: ["sha256:abc"] } }))).toMatch(/tenant "x": tokens\[0\]/);
    const twice = refusal(() =>
      directory({ x: { tokens: ["t-secret-1"] }, y: { tokens: [`sha256:${sha256("t-secret-1")}`] } }),
    );
    expect(twice).toMatch(
      /tenant "y": tokens\[0\] is listed twice \(also in MOORING_TENANTS: tenant "x" tokens\[0\]\)/,
    );
    expect(twice).not.toContain("t-secret-1");
    expect(twice).not.toContain(sha256("t-secret-1"));
    expect(refusal(() => directory({ x: { tokens: ["t-2"] } }, { MOORING_API_TOKENS: "t-2" }))).toMatch(
      /listed twice/,
    );
    expect(refusal(() => directory({ default: { tokens: ["t-3"] } }, { MOORING_API_TOKENS: "t-4" }))).toMatch(
      /tenant "default" is made of MOORING_API_TOKENS/,
    );
    expect(refusal(() => directory({ x: { tokens: ["t-5"], agents: ["claude-code"] } }))).toMatch(
      /tenant "x": agent "claude-code" is not registered/,
    );
  });

  it("a real process with a bad MOORING_TENANTS exits 2 naming the field and not the token", async () => {
    const exit = await runGatewayToExit({
      DATABASE_URL: suite.databaseUrl,
      HOST: "127.0.0.1",
      PORT: "0",
      MOORING_TENANTS: JSON.stringify({ team: { tokens: ["exit-secret-token-9999"], maxQueued: -1 } }),
    });
    expect(exit.code).toBe(2);
    const output = exit.stdout + exit.stderr;
    expect(output).toMatch(/tenant "team": "maxQueued" must be an integer/);
    expect(output).not.toContain("exit-secret-token-9999");
  });
});
