/** Bearer-token auth (MOORING_API_TOKENS) on every route but health, and the non-loopback refusal. */
import { once } from "node:events";
import { beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { checkStartupConfig, loadConfig } from "../../src/config.js";
import type { Gateway } from "../../src/gateway.js";
import { call, spawnGateway, startTestGateway, testEnv } from "../support/gateway.js";
import { createSession } from "../support/turns.js";
import { runGatewayToExit } from "../support/run-to-exit.js";
import { useGateway } from "../support/use-gateway.js";

const TOKENS = ["token-alpha-123", "token-beta-4567"];
const SOME_ID = "00000000-0000-4000-8000-000000000000";

/** Every route the gateway serves (except the WebSocket, tested apart), with a body where it takes one. */
const routes: [string, string, unknown?][] = [
  ["POST", "/v1/sessions", { workspace: "/tmp", agent: "simulated" }],
  ["GET", "/v1/sessions"],
  ["GET", `/v1/sessions/${SOME_ID}`],
  ["DELETE", `/v1/sessions/${SOME_ID}`],
  ["POST", `/v1/sessions/${SOME_ID}/turns`, { prompt: "hi" }],
  ["GET", `/v1/sessions/${SOME_ID}/events`],
  ["GET", `/v1/sessions/${SOME_ID}/events/1/payload`],
  ["GET", `/v1/tasks/${SOME_ID}`],
  ["GET", "/v1/tasks"],
  ["POST", `/v1/tasks/${SOME_ID}/cancel`],
  ["GET", "/v1/gate"],
  ["POST", "/v1/rpc", { jsonrpc: "2.0", id: 1, method: "gate.status" }],
  ["GET", "/docs"],
  ["GET", "/docs/json"],
  ["GET", "/v1/no-such-route"],
];

const suite = useGateway({ start: false });

describe("with MOORING_API_TOKENS set", () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await suite.startGateway({ MOORING_API_TOKENS: TOKENS.join(",") });
  });

  const count = async () => (await suite.sql`select count(*)::int as n from sessions`)[0].n as number;

  const wrong: [string, Record<string, string>][] = [
    ["no Authorization header", {}],
    ["a wrong token", { authorization: "Bearer not-the-token" }],
    ["a prefix of a token", { authorization: `Bearer ${TOKENS[0].slice(0, -1)}` }],
    ["a token with extra characters", { authorization: `Bearer ${TOKENS[0]}x` }],
    ["both tokens joined", { authorization: `Bearer ${TOKENS.join(",")}` }],
    ["the Basic scheme", { authorization: `Basic ${Buffer.from(`u:${TOKENS[0]}`).toString("base64")}` }],
    ["an empty bearer", { authorization: "Bearer " }],
  ];

  it.each(wrong)("every route but health answers 401 UNAUTHORIZED with %s", async (_what, headers) => {
    const before = await count();
    for (const [method, path, body] of routes) {
      const r = await call(gw.url, method, path, body, headers);
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.headers.get("www-authenticate"), `${method} ${path}`).toMatch(/^Bearer /);
      // JSON-RPC answers in its own envelope, with the call's id (docs/api.md, JSON-RPC).
      const refusal =
        path === "/v1/rpc"
          ? {
              jsonrpc: "2.0",
              id: 1,
              error: { code: -32001, message: expect.any(String), data: { code: "UNAUTHORIZED" } },
            }
          : { error: { code: "UNAUTHORIZED", message: expect.any(String) } };
      expect(r.body, `${method} ${path}`).toEqual(refusal);
    }
    expect(await count()).toBe(before);
  });

  it("health answers without a token", async () => {
    expect((await call(gw.url, "GET", "/healthz")).status).toBe(200);
    const ready = await call(gw.url, "GET", "/readyz");
    expect(ready.status).toBe(200);
    expect(ready.body.ready).toBe(true);
    expect((await call(gw.url, "GET", "/readyz?x=1")).status).toBe(200);
  });

  it("every route works with a valid bearer token, either of them", async () => {
    for (const token of TOKENS) {
      const auth = { authorization: `Bearer ${token}` };
      for (const [method, path, body] of routes) {
        const r = await call(gw.url, method, path, body, auth);
        expect(r.status, `${method} ${path}`).not.toBe(401);
      }
      const s = await call(gw.url, "POST", "/v1/sessions", { workspace: "/tmp", agent: "simulated" }, auth);
      expect(s.status).toBe(201);
      expect((await call(gw.url, "GET", `/v1/sessions/${s.body.id}`, undefined, auth)).body.id).toBe(
        s.body.id,
      );
      const rpc = await call(
        gw.url,
        "POST",
        "/v1/rpc",
        { jsonrpc: "2.0", id: 7, method: "gate.status" },
        auth,
      );
      expect(rpc.body).toMatchObject({ jsonrpc: "2.0", id: 7, result: { maxActive: 5 } });
      const docs = await call(gw.url, "GET", "/docs/json", undefined, auth);
      expect(docs.body.paths["/v1/sessions"]).toBeDefined();
    }
  });

  it("the Bearer scheme is matched in any case", async () => {
    for (const scheme of ["bearer", "BEARER", "BeArEr"]) {
      const r = await call(gw.url, "GET", "/v1/gate", undefined, { authorization: `${scheme} ${TOKENS[0]}` });
      expect(r.status, scheme).toBe(200);
    }
  });

  it("every route answers ?access_token= exactly as it answers the header, strict query schemas included", async () => {
    const auth = { authorization: `Bearer ${TOKENS[1]}` };
    const withQuery = (path: string, extra = "") =>
      `${path}${path.includes("?") ? "&" : "?"}${extra}access_token=${encodeURIComponent(TOKENS[1])}`;
    for (const [method, path, body] of [
      ...routes,
      ["GET", "/v1/sessions?limit=5"],
      ["GET", "/v1/tasks?status=queued"],
      ["GET", "/readyz"],
    ] as [string, string, unknown?][]) {
      const byHeader = await call(gw.url, method, path, body, auth);
      const byQuery = await call(gw.url, method, withQuery(path), body);
      expect(byQuery.status, `${method} ${path}`).toBe(byHeader.status);
      expect(byQuery.status, `${method} ${path}`).not.toBe(401);
      expect(byQuery.status, `${method} ${path}`).not.toBe(400);
    }
    // The token is never a query field a schema would see, even next to real ones.
    const listed = await call(gw.url, "GET", withQuery("/v1/sessions", "limit=1&"));
    expect(listed.status).toBe(200);
    expect(listed.body.items.length).toBeLessThanOrEqual(1);

    // The streams browsers open without headers: SSE and the WebSocket.
    const sessionId = await createSession(gw.url, "/tmp", {}, auth);
    const controller = new AbortController();
    const sse = await fetch(`${gw.url}${withQuery(`/v1/sessions/${sessionId}/events`)}`, {
      signal: controller.signal,
    });
    expect(sse.status).toBe(200);
    expect(sse.headers.get("content-type")).toMatch(/text\/event-stream/);
    controller.abort();
    const socket = new WebSocket(`${gw.url.replace("http", "ws")}${withQuery("/v1/ws")}`);
    const [hello] = await once(socket, "message");
    expect(JSON.parse(String(hello))).toMatchObject({ method: "hello" });
    socket.close();
    await once(socket, "close");
  });

  it("/readyz says only ready or not without a token, and the details (host and pid too) with one", async () => {
    const anonymous = await call(gw.url, "GET", "/readyz");
    expect(anonymous.body).toEqual({ ready: true });
    const wrong = await call(gw.url, "GET", "/readyz", undefined, { authorization: "Bearer nope" });
    expect(wrong.body).toEqual({ ready: true });
    for (const r of [
      await call(gw.url, "GET", "/readyz", undefined, { authorization: `Bearer ${TOKENS[0]}` }),
      await call(gw.url, "GET", `/readyz?access_token=${TOKENS[0]}`),
    ]) {
      expect(r.body).toEqual({
        ready: true,
        instanceId: gw.identity.instanceId,
        bootId: gw.identity.bootId,
        version: gw.identity.version,
        host: gw.identity.host,
        pid: process.pid,
      });
    }
  });

  it("an OPTIONS request without a token is refused like any other (401, not an error)", async () => {
    const r = await call(gw.url, "OPTIONS", "/v1/sessions");
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe("UNAUTHORIZED");
  });

  it("the WebSocket upgrade needs a token too", async () => {
    const wsUrl = `${gw.url.replace("http", "ws")}/v1/ws`;
    for (const headers of [{}, { authorization: "Bearer nope" }]) {
      const refused = new WebSocket(wsUrl, { headers });
      const [err] = (await once(refused, "error")) as [Error];
      expect(err.message).toBe("Unexpected server response: 401");
    }

    const ok = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${TOKENS[1]}` } });
    const [message] = await once(ok, "message");
    expect(JSON.parse(String(message))).toMatchObject({ jsonrpc: "2.0", method: "hello" });
    ok.close();
    await once(ok, "close");
  });
});

describe("without MOORING_API_TOKENS", () => {
  it("needs no token", async () => {
    const gw = await startTestGateway(suite.databaseUrl);
    try {
      expect((await call(gw.url, "GET", "/v1/sessions")).status).toBe(200);
      expect((await call(gw.url, "GET", "/v1/gate")).status).toBe(200);
      expect((await call(gw.url, "GET", "/docs/json")).status).toBe(200);
      // A stray header is ignored, not checked.
      expect(
        (await call(gw.url, "GET", "/v1/sessions", undefined, { authorization: "Bearer whatever" })).status,
      ).toBe(200);
      // So is a stray access_token, even on a route whose query schema takes no unknown field.
      expect((await call(gw.url, "GET", "/v1/sessions?access_token=whatever")).status).toBe(200);
    } finally {
      await gw.stop();
    }
  });
});

describe("binding a non-loopback HOST", () => {
  it("is refused without tokens and allowed on loopback or with tokens", () => {
    const check = (env: Record<string, string>) => () =>
      checkStartupConfig(loadConfig(testEnv(suite.databaseUrl, env)));
    expect(check({ HOST: "0.0.0.0" })).toThrow(
      /HOST=0\.0\.0\.0 .*MOORING_API_TOKENS nor MOORING_TENANTS is set/,
    );
    expect(check({ HOST: "192.168.1.10" })).toThrow(/MOORING_API_TOKENS/);
    expect(check({ HOST: "::" })).toThrow(/MOORING_API_TOKENS/);
    // Only real loopback addresses count: a name that starts like one is any other name.
    expect(check({ HOST: "127.example.com" })).toThrow(/MOORING_API_TOKENS/);
    expect(check({ HOST: "127.0.0.1.nip.io" })).toThrow(/MOORING_API_TOKENS/);
    for (const host of ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
      expect(check({ HOST: host })).not.toThrow();
    expect(check({ HOST: "0.0.0.0", MOORING_API_TOKENS: "t" })).not.toThrow();
  });

  it("a real process with HOST=0.0.0.0 and no tokens exits non-zero with a clear message", async () => {
    const run = await runGatewayToExit({
      DATABASE_URL: suite.databaseUrl,
      HOST: "0.0.0.0",
      PORT: "0",
      MOORING_API_TOKENS: "",
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("mooring: configuration error: HOST=0.0.0.0 is not a loopback address");
    expect(run.stderr).toContain("Set MOORING_API_TOKENS or bind HOST=127.0.0.1");
    expect(run.stdout).not.toContain('"msg":"listening"');
  });

  it("a real process with HOST=0.0.0.0 and tokens starts and asks for them", async () => {
    const gw = await spawnGateway({
      DATABASE_URL: suite.databaseUrl,
      HOST: "0.0.0.0",
      PORT: "0",
      MOORING_API_TOKENS: "net-token",
    });
    try {
      await gw.waitReady();
      const url = gw.url.replace("0.0.0.0", "127.0.0.1");
      expect((await call(url, "GET", "/v1/sessions")).status).toBe(401);
      expect(
        (await call(url, "GET", "/v1/sessions", undefined, { authorization: "Bearer net-token" })).status,
      ).toBe(200);
    } finally {
      gw.kill("SIGTERM");
      expect(await gw.exited).toBe(0);
    }
  });
});
