/**
 * The served OpenAPI document as tools written elsewhere read it: it validates
 * with @apidevtools/swagger-parser, passes Redocly's recommended rules with no error, gives every
 * operation an operationId, describes the JSON-RPC request body, the response headers, the
 * security every route needs, a server, and the answers health routes really give. A real gateway
 * with tokens, as a third-party client would meet it; and a client generated from it by
 * openapi-typescript (with openapi-fetch) compiles under `tsc --strict` and runs a turn.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import SwaggerParser from "@apidevtools/swagger-parser";
import { errorCodes } from "../../src/errors.js";
import openapiTS, { astToString } from "openapi-typescript";
import { beforeAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, repoRoot } from "../support/gateway.js";
import { tempWorkspace } from "../support/turns.js";

const TOKEN = "token-openapi-1";
const auth = { authorization: `Bearer ${TOKEN}` };

const t = useGateway({ env: { MOORING_API_TOKENS: TOKEN } });
let doc: any;
let file: string;

beforeAll(async () => {
  const served = await call(t.url, "GET", "/docs/json", undefined, auth);
  expect(served.status).toBe(200);
  doc = served.body;
  file = join(await mkdtemp(join(tmpdir(), "mooring-openapi-")), "openapi.json");
  await writeFile(file, JSON.stringify(doc));
});

const operations = () =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ path, method, op })),
  );

describe("the served OpenAPI document", () => {
  it("validates with swagger-parser", async () => {
    await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toBeTruthy();
  });

  it("passes Redocly's recommended rules with no error", async () => {
    const cli = join(repoRoot, "node_modules/@redocly/cli/bin/cli.js");
    const run = await promisify(execFile)(
      process.execPath,
      [cli, "lint", file, "--extends", "recommended", "--format", "json"],
      {
        cwd: join(file, ".."),
        maxBuffer: 16 * 1024 * 1024,
        // The linter checks a file here; it reports nothing to anyone (no telemetry, no update check).
        env: {
          ...process.env,
          REDOCLY_TELEMETRY: "off",
          REDOCLY_SDK_TELEMETRY: "off",
          REDOCLY_SUPPRESS_NOTIFICATIONS: "true",
        },
      },
    ).catch((err: { stdout: string }) => ({ stdout: err.stdout }));
    const report = JSON.parse(run.stdout.slice(run.stdout.indexOf("{")));
    const errors = report.problems
      .filter((p: { severity: string }) => p.severity === "error")
      .map(
        (p: { ruleId: string; message: string; location: { pointer: string }[] }) =>
          `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`,
      );
    expect(errors).toEqual([]);
  });

  it("names every operation, uniquely", () => {
    const ids = operations().map(({ op }) => op.operationId);
    expect(ids.filter((id) => typeof id !== "string")).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.paths["/v1/sessions/{id}/turns"].post.operationId).toBe("submitTurn");
  });

  it("describes the JSON-RPC request body", () => {
    const body = doc.paths["/v1/rpc"].post.requestBody;
    expect(body.required).toBe(true);
    expect(body.content["application/json"].schema).toBeTruthy();
  });

  it("declares the response headers: ids on every answer, Location, Retry-After, WWW-Authenticate", () => {
    for (const { path, method, op } of operations()) {
      for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
        expect(Object.keys(response.headers ?? {}), `${method} ${path} ${status}`).toEqual(
          expect.arrayContaining(["x-request-id", "x-mooring-boot-id"]),
        );
      }
    }
    expect(doc.paths["/v1/sessions"].post.responses["201"].headers.Location).toBeTruthy();
    expect(doc.paths["/v1/sessions/{id}/turns"].post.responses["202"].headers.Location).toBeTruthy();
    expect(doc.paths["/v1/sessions/{id}/turns"].post.responses["429"].headers["Retry-After"]).toBeTruthy();
    expect(doc.paths["/readyz"].get.responses["503"].headers["Retry-After"]).toBeTruthy();
    expect(doc.paths["/v1/gate"].get.responses["401"].headers["WWW-Authenticate"]).toBeTruthy();
  });

  it("requires the security schemes on every route but health, and names a server", () => {
    for (const { path, method, op } of operations()) {
      const open = path === "/healthz" || path === "/readyz";
      expect([method, path, op.security ?? doc.security]).toEqual([
        method,
        path,
        open ? [] : [{ bearer: [] }, { accessToken: [] }],
      ]);
    }
    expect(doc.servers).toEqual([{ url: "/", description: expect.any(String) }]);
  });

  it("names its shared schemas, describes every answer and lists the error codes", () => {
    const schemas = doc.components.schemas;
    expect(Object.keys(schemas)).toEqual(
      expect.arrayContaining(["Session", "Task", "Event", "Error", "EventPage", "JsonRpcResponse"]),
    );
    const json = (path: string, method: string, status: string) =>
      doc.paths[path][method].responses[status].content["application/json"].schema;
    expect(json("/v1/sessions", "post", "201")).toEqual({ $ref: "#/components/schemas/Session" });
    expect(json("/v1/tasks/{id}", "get", "200")).toEqual({ $ref: "#/components/schemas/Task" });
    expect(json("/v1/tasks/{id}", "get", "4XX")).toEqual({ $ref: "#/components/schemas/Error" });
    expect(schemas.EventPage.properties.items.items).toEqual({ $ref: "#/components/schemas/Event" });
    // No schema is spelled out twice: every object with a name is a reference, components included.
    const inline = JSON.stringify(doc.paths).match(/"title":"(Session|Task|Event|Error)"/g);
    expect(inline).toBeNull();
    const descriptions = operations().flatMap(({ op }) =>
      Object.values<any>(op.responses).map((r) => r.description),
    );
    expect(descriptions.filter((d) => d === "Default Response" || !d)).toEqual([]);
    expect(doc.paths["/v1/sessions"].post.responses["201"].description).toBe("the session, created");
    expect(schemas.Error.properties.error.properties.code.enum).toEqual(Object.keys(errorCodes));
    expect(doc.paths["/v1/gate"].get.responses["401"].description).toContain("UNAUTHORIZED");
  });

  it("declares the health routes' 403 and a /readyz 200 without instance fields", async () => {
    for (const path of ["/healthz", "/readyz"]) {
      expect(doc.paths[path].get.responses["403"], path).toBeTruthy();
    }
    const { $ref } = doc.paths["/readyz"].get.responses["200"].content["application/json"].schema;
    expect($ref).toBe("#/components/schemas/Readiness");
    expect(doc.components.schemas.Readiness.required).toEqual(["ready"]);
    // And the tokened gateway's answer without a token is just that.
    expect((await call(t.url, "GET", "/readyz")).body).toEqual({ ready: true });
  });
});

/** What the generated client does: create, submit, long-poll, cancel, and a JSON-RPC call, typed. */
const CLIENT = `import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

const [base, token, workspace] = process.argv.slice(2);
const client = createClient<paths>({ baseUrl: base, headers: { authorization: \`Bearer \${token}\` } });
const created = await client.POST("/v1/sessions", { body: { workspace, agent: "simulated" } });
if (!created.data) throw new Error(\`create: \${created.response.status}\`);
const sessionId: string = created.data.id;
const submitted = await client.POST("/v1/sessions/{id}/turns", {
  params: { path: { id: sessionId } },
  body: { prompt: "[sleep 30000]" },
});
if (!submitted.data) throw new Error(\`submit: \${submitted.response.status}\`);
const taskId: string = submitted.data.id;
const polled = await client.GET("/v1/tasks/{id}", { params: { path: { id: taskId }, query: { waitMs: 50 } } });
const cancelled = await client.POST("/v1/tasks/{id}/cancel", { params: { path: { id: taskId } } });
const rpc = await client.POST("/v1/rpc", { body: { jsonrpc: "2.0", id: 1, method: "ping" } });
const location: string | null = created.response.headers.get("location");
console.log(JSON.stringify({ sessionId, location, polled: polled.data?.status, cancelled: cancelled.data?.status, rpc: rpc.data }));
`;

describe("a client generated by openapi-typescript", () => {
  it("compiles under tsc --strict and runs create, submit, long-poll, cancel", async () => {
    // Under the repository, so the program resolves openapi-fetch from its node_modules.
    const dir = join(repoRoot, "node_modules/.cache/mooring-openapi-client");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "schema.ts"), astToString(await openapiTS(structuredClone(doc))));
    await writeFile(join(dir, "client.mts"), CLIENT);
    const exec = promisify(execFile);
    const tsc = join(repoRoot, "node_modules/typescript/bin/tsc");
    const compiled = await exec(process.execPath, [
      tsc,
      "--strict",
      "--noEmit",
      "--skipLibCheck",
      "--target",
      "es2022",
      "--module",
      "nodenext",
      "--moduleResolution",
      "nodenext",
      join(dir, "client.mts"),
    ]).catch((err: { stdout: string }) => ({ stdout: err.stdout, failed: true }));
    expect(compiled.stdout).toBe("");
    const ran = await exec(
      process.execPath,
      ["--import", "tsx", join(dir, "client.mts"), t.url, TOKEN, await tempWorkspace()],
      {
        cwd: repoRoot,
      },
    );
    const out = JSON.parse(ran.stdout);
    expect(out.location).toBe(`/v1/sessions/${out.sessionId}`);
    expect(["queued", "running"]).toContain(out.polled);
    expect(["cancelling", "cancelled"]).toContain(out.cancelled);
    expect(out.rpc).toMatchObject({ jsonrpc: "2.0", id: 1, result: { pong: true } });
  });
});
