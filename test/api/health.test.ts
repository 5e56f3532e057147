/** Health, readiness, request ids and the OpenAPI docs. */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { type Gateway, startGateway } from "../../src/gateway.js";
import { call, repoRoot, testEnv } from "../support/gateway.js";
import { useGateway } from "../support/use-gateway.js";

const version = JSON.parse(readFileSync(`${repoRoot}/package.json`, "utf8")).version;

// The file's database; each describe starts the gateway it needs on it.
const t = useGateway({ start: false });

describe("a ready gateway", () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await t.startGateway({ MOORING_INSTANCE_ID: "health-test-1" });
  });

  it("/healthz answers 200", async () => {
    const r = await call(gw.url, "GET", "/healthz");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ ok: true });
  });

  it("/readyz answers 200 with the instance, boot and version, never the host or pid", async () => {
    const r = await call(gw.url, "GET", "/readyz");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      ready: true,
      instanceId: "health-test-1",
      bootId: gw.identity.bootId,
      version,
    });
    expect(r.body.bootId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("every response carries the gateway's own x-request-id, whatever the client sent", async () => {
    const given = await call(gw.url, "GET", "/v1/sessions", undefined, {
      "x-request-id": "client-chosen-42",
    });
    // A client cannot choose (or forge) the id that correlates the gateway's log lines.
    expect(given.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const a = await call(gw.url, "GET", "/healthz");
    const b = await call(gw.url, "GET", "/v1/nope");
    expect(a.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(b.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.headers.get("x-request-id")).not.toBe(b.headers.get("x-request-id"));
    const tooLong = await call(gw.url, "GET", "/healthz", undefined, { "x-request-id": "x".repeat(101) });
    expect(tooLong.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("/docs serves the UI", async () => {
    const res = await fetch(`${gw.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    expect(await res.text()).toContain("swagger-ui");
  });

  it("/docs/json is the OpenAPI document of the routes, from their schemas", async () => {
    const r = await call(gw.url, "GET", "/docs/json");
    expect(r.status).toBe(200);
    expect(r.body.openapi).toMatch(/^3\./);
    expect(r.body.info).toMatchObject({ title: "mooring", version });
    const paths = r.body.paths;
    expect(Object.keys(paths["/v1/sessions"]).sort()).toEqual(["get", "post"]);
    expect(Object.keys(paths["/v1/sessions/{id}"]).sort()).toEqual(["delete", "get"]);
    expect(paths["/v1/sessions/{id}/turns"].post).toBeDefined();
    expect(paths["/v1/tasks/{id}"].get).toBeDefined();
    const body = paths["/v1/sessions"].post.requestBody.content["application/json"].schema;
    expect(body.required.sort()).toEqual(["agent", "workspace"]);
    expect(Object.keys(body.properties).sort()).toEqual([
      "agent",
      "agentConfig",
      "checkpoints",
      "group",
      "idempotencyKey",
      "metadata",
      "title",
      "workspace",
    ]);
    const query = paths["/v1/sessions"].get.parameters.map((p: { name: string }) => p.name).sort();
    expect(query).toEqual(["cursor", "limit", "status", "tenant", "workspace"]);
  });
});

describe("a gateway whose database is not there yet", () => {
  let gw: Gateway;
  beforeAll(async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    const config = loadConfig(testEnv(`postgres://nobody@127.0.0.1:${port}/none`));
    gw = await startGateway(config, pino({ level: "silent" }));
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it("is live, not ready, and answers the API with 503 NOT_READY", async () => {
    expect((await call(gw.url, "GET", "/healthz")).status).toBe(200);
    const ready = await call(gw.url, "GET", "/readyz");
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({
      ready: false,
      error: { code: "NOT_READY" },
      bootId: gw.identity.bootId,
    });
    const api = await call(gw.url, "POST", "/v1/sessions", { workspace: "/tmp", agent: "simulated" });
    expect(api.status).toBe(503);
    expect(api.body.error.code).toBe("NOT_READY");
    expect(api.headers.get("retry-after")).toBe("1");
  });
});

describe("request lines of polled routes", () => {
  let gw: Gateway;
  const lines: { msg?: string; level?: number; req?: { url?: string }; reqId?: string }[] = [];
  beforeAll(async () => {
    gw = await t.startGateway({}, { logLevel: "info", onLog: (record) => void lines.push(record) });
  });

  it("probes, scrapes and the gate heartbeat log no request lines at info; other routes do", async () => {
    for (const path of ["/healthz", "/readyz", "/v1/gate", "/metrics", "/v1/sessions"]) {
      expect((await call(gw.url, "GET", path)).status).toBe(200);
    }
    const logged = lines.filter((l) => l.msg === "incoming request").map((l) => l.req?.url);
    expect(logged).toEqual(["/v1/sessions"]);
  });
});
