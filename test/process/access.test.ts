/**
 * Who can get in: the Host check (DNS rebinding), the Origin check (cross-site pages,
 * WebSocket upgrades included) and CORS for the origins an operator lists, against in-process
 * gateways with a real database. The browser's own view is in test/browser/browser.test.ts.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import type { Gateway } from "../../src/gateway.js";
import { testEnv } from "../support/gateway.js";
import { rawRequest, tryWebSocket } from "../support/raw-http.js";
import { runGatewayToExit } from "../support/run-to-exit.js";
import { useGateway } from "../support/use-gateway.js";

const UI = "http://ui.example:5173";
const EVIL = "http://127.0.0.2:8777";
const TOKEN = "access-test-token-1";

const suite = useGateway({ start: false });
/** A gateway on the file's database: stopped after the test that made it (the leak guard checks), or after the file. */
const gateway = (extra: Record<string, string> = {}): Promise<Gateway> => suite.startGateway(extra);

const rows = async () => {
  const [r] =
    await suite.sql`select (select count(*)::int from sessions) as sessions, (select count(*)::int from tasks) as tasks`;
  return r as { sessions: number; tasks: number };
};
const newSession = { workspace: "/tmp", agent: "simulated" };
const wsUrl = (gw: Gateway) => `${gw.url.replace("http", "ws")}/v1/ws`;
const hostOf = (gw: Gateway) => new URL(gw.url).host;

describe("a default gateway (no tokens)", () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await gateway();
  });

  it.each([
    ["a rebinding name", "evil.example:8787"],
    ["a name that only starts like a loopback address", "127.example.com"],
    ["a name ending in a loopback address", "127.0.0.1.nip.io"],
    ["a Host with user info", "evil.example@127.0.0.1"],
  ])("refuses %s as Host with 403 HOST_NOT_ALLOWED before any work", async (_what, host) => {
    const before = await rows();
    for (const [method, path, body] of [
      ["POST", "/v1/sessions", newSession],
      ["GET", "/v1/sessions", undefined],
      ["GET", "/readyz", undefined],
    ] as const) {
      const r = await rawRequest(gw.url, method, path, { host }, body);
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.body.error).toMatchObject({ code: "HOST_NOT_ALLOWED" });
    }
    expect(await tryWebSocket(wsUrl(gw), { headers: { host } })).toEqual({ opened: false, status: 403 });
    expect(await rows()).toEqual(before);
  });

  it.each(["localhost", "LOCALHOST:1", "127.0.0.1", "[::1]:8787"])(
    "accepts the loopback Host %s",
    async (host) => {
      const r = await rawRequest(gw.url, "GET", "/v1/sessions", { host });
      expect(r.status).toBe(200);
    },
  );

  it("refuses a page from another origin with 403 ORIGIN_NOT_ALLOWED: REST, JSON-RPC, SSE and the WebSocket upgrade", async () => {
    const before = await rows();
    const origin = { origin: EVIL };
    const created = await rawRequest(gw.url, "POST", "/v1/sessions", origin, newSession);
    expect(created.status).toBe(403);
    expect(created.body.error).toMatchObject({ code: "ORIGIN_NOT_ALLOWED" });
    expect(created.headers["access-control-allow-origin"]).toBeUndefined();
    expect(created.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    const rpc = await rawRequest(gw.url, "POST", "/v1/rpc", origin, {
      jsonrpc: "2.0",
      id: 1,
      method: "sessions.create",
      params: newSession,
    });
    expect(rpc.status).toBe(403);
    const sse = await rawRequest(
      gw.url,
      "GET",
      "/v1/sessions/00000000-0000-4000-8000-000000000000/events",
      origin,
    );
    expect(sse.status).toBe(403);
    const preflight = await rawRequest(gw.url, "OPTIONS", "/v1/sessions", {
      ...origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type",
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers["access-control-allow-origin"]).toBeUndefined();
    expect(await tryWebSocket(wsUrl(gw), { origin: EVIL })).toEqual({ opened: false, status: 403 });
    // Pages with an opaque origin (sandboxed frames, file: pages) are no better.
    expect(await tryWebSocket(wsUrl(gw), { origin: "null" })).toEqual({ opened: false, status: 403 });
    expect(await rows()).toEqual(before);
  });

  it("serves its own origin, and clients that send no Origin", async () => {
    const own = `http://${hostOf(gw)}`;
    const r = await rawRequest(gw.url, "POST", "/v1/sessions", { origin: own }, newSession);
    expect(r.status).toBe(201);
    // Same origin needs no CORS headers.
    expect(r.headers["access-control-allow-origin"]).toBeUndefined();
    const socket = await tryWebSocket(wsUrl(gw), { origin: own });
    expect(socket).toMatchObject({ opened: true, hello: { method: "hello" } });
    expect(await tryWebSocket(wsUrl(gw))).toMatchObject({ opened: true });
    // The same port under another loopback name is another origin.
    const port = new URL(gw.url).port;
    expect((await rawRequest(gw.url, "GET", "/v1/gate", { origin: `http://localhost:${port}` })).status).toBe(
      403,
    );
  });
});

describe("MOORING_ALLOWED_HOSTS", () => {
  it("accepts the listed names (and subdomains of a .name) as Host, and still refuses others", async () => {
    const gw = await gateway({ MOORING_ALLOWED_HOSTS: "gw.example,.corp.example" });
    for (const host of ["gw.example:8787", "GW.EXAMPLE", "corp.example", "a.b.corp.example:1", "localhost"]) {
      expect((await rawRequest(gw.url, "GET", "/v1/gate", { host })).status, host).toBe(200);
    }
    const created = await rawRequest(gw.url, "POST", "/v1/sessions", { host: "gw.example:8787" }, newSession);
    expect(created.status).toBe(201);
    for (const host of ["evil.example", "gw.example.evil", "notcorp.example"]) {
      const r = await rawRequest(gw.url, "GET", "/v1/gate", { host });
      expect(r.status, host).toBe(403);
      expect(r.body.error.code).toBe("HOST_NOT_ALLOWED");
    }
    // The page served under an allowed name is its own origin there.
    const own = await rawRequest(gw.url, "GET", "/v1/gate", {
      host: "gw.example:8787",
      origin: "http://gw.example:8787",
    });
    expect(own.status).toBe(200);
  });

  it("with tokens set, any Host is served unless names are listed", async () => {
    const open = await gateway({ MOORING_API_TOKENS: TOKEN });
    const auth = { authorization: `Bearer ${TOKEN}` };
    expect(
      (await rawRequest(open.url, "GET", "/v1/gate", { ...auth, host: "gw.internal:8787" })).status,
    ).toBe(200);
    const listed = await gateway({ MOORING_API_TOKENS: TOKEN, MOORING_ALLOWED_HOSTS: "gw.internal" });
    expect(
      (await rawRequest(listed.url, "GET", "/v1/gate", { ...auth, host: "gw.internal:8787" })).status,
    ).toBe(200);
    const refused = await rawRequest(listed.url, "GET", "/v1/gate", { ...auth, host: "evil.example" });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("HOST_NOT_ALLOWED");
  });
});

describe("MOORING_CORS_ORIGINS", () => {
  it("answers a listed origin's preflight and exposes Location, Retry-After, x-request-id and x-mooring-boot-id", async () => {
    const gw = await gateway({ MOORING_CORS_ORIGINS: `${UI},http://other.example` });
    const preflight = await rawRequest(gw.url, "OPTIONS", "/v1/sessions", {
      origin: UI,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type,authorization",
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers["access-control-allow-origin"]).toBe(UI);
    expect(String(preflight.headers["access-control-allow-methods"]).split(/, ?/)).toEqual(
      expect.arrayContaining(["GET", "POST", "DELETE"]),
    );
    expect(preflight.headers["access-control-allow-headers"]).toBe("content-type,authorization");

    const before = await rows();
    const created = await rawRequest(gw.url, "POST", "/v1/sessions", { origin: UI }, newSession);
    expect(created.status).toBe(201);
    expect(created.headers["access-control-allow-origin"]).toBe(UI);
    expect(String(created.headers["access-control-expose-headers"]).split(/, ?/)).toEqual([
      "Location",
      "Retry-After",
      "x-request-id",
      "x-mooring-boot-id",
    ]);
    const turn = await rawRequest(
      gw.url,
      "POST",
      `/v1/sessions/${created.body.id}/turns`,
      { origin: UI },
      { prompt: "hi" },
    );
    expect(turn.status).toBe(202);
    expect(turn.headers.location).toBe(`/v1/tasks/${turn.body.id}`);
    expect(await rows()).toEqual({ sessions: before.sessions + 1, tasks: before.tasks + 1 });

    expect(await tryWebSocket(wsUrl(gw), { origin: UI })).toMatchObject({ opened: true });
    // Listing is exact: another port is another origin.
    const near = await rawRequest(
      gw.url,
      "POST",
      "/v1/sessions",
      { origin: "http://ui.example:5174" },
      newSession,
    );
    expect(near.status).toBe(403);
    expect(near.body.error.code).toBe("ORIGIN_NOT_ALLOWED");
  });

  it("with tokens, a preflight needs none but the request does", async () => {
    const gw = await gateway({ MOORING_CORS_ORIGINS: UI, MOORING_API_TOKENS: TOKEN });
    const preflight = await rawRequest(gw.url, "OPTIONS", "/v1/sessions", {
      origin: UI,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization,content-type",
    });
    expect(preflight.status).toBe(204);
    const refused = await rawRequest(gw.url, "POST", "/v1/sessions", { origin: UI }, newSession);
    expect(refused.status).toBe(401);
    // The browser may read the refusal, so the page can tell the user to sign in.
    expect(refused.headers["access-control-allow-origin"]).toBe(UI);
    const ok = await rawRequest(
      gw.url,
      "POST",
      "/v1/sessions",
      { origin: UI, authorization: `Bearer ${TOKEN}` },
      newSession,
    );
    expect(ok.status).toBe(201);
  });

  it("* is accepted only with tokens", async () => {
    expect(() => loadConfig(testEnv(suite.databaseUrl, { MOORING_CORS_ORIGINS: "*" }))).toThrow(
      /only with MOORING_API_TOKENS/,
    );
    expect(() =>
      loadConfig(testEnv(suite.databaseUrl, { MOORING_CORS_ORIGINS: "http://x.example/" })),
    ).toThrow(/exact origin/);
    const gw = await gateway({ MOORING_CORS_ORIGINS: "*", MOORING_API_TOKENS: TOKEN });
    const r = await rawRequest(gw.url, "GET", "/v1/gate", { origin: EVIL, authorization: `Bearer ${TOKEN}` });
    expect(r.status).toBe(200);
    expect(r.headers["access-control-allow-origin"]).toBe(EVIL);

    const run = await runGatewayToExit({
      DATABASE_URL: suite.databaseUrl,
      PORT: "0",
      MOORING_CORS_ORIGINS: "*",
      MOORING_API_TOKENS: "",
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("mooring: configuration error: MOORING_CORS_ORIGINS=*");
  });
});
