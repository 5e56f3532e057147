/**
 * Every answer of `POST /v1/rpc` is a JSON-RPC envelope: refusals of the whole
 * request (401, 413, 415, 405, 503) included, with the registry's HTTP status and JSON-RPC code, and
 * the request's id wherever the body could be read. A real gateway on a real database.
 */
import { JSONRPCClient, JSONRPCErrorException } from "json-rpc-2.0";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorCodes } from "../../src/errors.js";
import type { Gateway } from "../../src/gateway.js";
import { call, startUnreadyGateway } from "../support/gateway.js";
import { useGateway } from "../support/use-gateway.js";

const TOKEN = "token-rpc-conformance";
const auth = { authorization: `Bearer ${TOKEN}` };
const gateStatus = (id: number | string) => ({ jsonrpc: "2.0", id, method: "gate.status" });

/** The envelope of a refusal: `code` as the registry has it, for JSON-RPC and in `data`. */
const refusal = (id: number | string | null, code: keyof typeof errorCodes) => ({
  jsonrpc: "2.0",
  id,
  error: { code: errorCodes[code].rpc, message: expect.any(String), data: expect.objectContaining({ code }) },
});

describe("a tokened gateway", () => {
  const t = useGateway({ env: { MOORING_API_TOKENS: TOKEN, MOORING_BODY_LIMIT_BYTES: "4096" } });

  it("401 answers every call of the message with its id, and WWW-Authenticate", async () => {
    const one = await call(t.url, "POST", "/v1/rpc", gateStatus(7));
    expect(one.status).toBe(401);
    expect(one.headers.get("www-authenticate")).toMatch(/^Bearer /);
    expect(one.body).toEqual(refusal(7, "UNAUTHORIZED"));
    const batch = await call(t.url, "POST", "/v1/rpc", [
      gateStatus("a"),
      { jsonrpc: "2.0", method: "ping" },
      gateStatus(2),
    ]);
    expect(batch.status).toBe(401);
    expect(batch.body).toEqual([refusal("a", "UNAUTHORIZED"), refusal(2, "UNAUTHORIZED")]);
    // Another method is refused before anything is read, as on every route.
    const options = await call(t.url, "OPTIONS", "/v1/rpc");
    expect(options.status).toBe(401);
    expect(options.body).toEqual(refusal(null, "UNAUTHORIZED"));
    // Nothing readable: still an envelope, id null.
    const garbage = await call(t.url, "POST", "/v1/rpc", "{not json");
    expect(garbage.body).toEqual(refusal(null, "UNAUTHORIZED"));
  });

  it("413, 415 and 405 are JSON-RPC envelopes with the registry's codes", async () => {
    const big = await call(
      t.url,
      "POST",
      "/v1/rpc",
      { ...gateStatus(1), params: { pad: "x".repeat(5000) } },
      auth,
    );
    expect(big.status).toBe(413);
    expect(big.body).toEqual(refusal(null, "PAYLOAD_TOO_LARGE"));
    const text = await call(t.url, "POST", "/v1/rpc", JSON.stringify(gateStatus(1)), {
      ...auth,
      "content-type": "text/plain",
    });
    expect(text.status).toBe(415);
    expect(text.body).toEqual(refusal(null, "UNSUPPORTED_MEDIA_TYPE"));
    const latin = await call(t.url, "POST", "/v1/rpc", JSON.stringify(gateStatus(1)), {
      ...auth,
      "content-type": "application/json; charset=latin1",
    });
    expect(latin.status).toBe(415);
    expect(latin.body).toEqual(refusal(null, "UNSUPPORTED_MEDIA_TYPE"));
    const get = await call(t.url, "GET", "/v1/rpc", undefined, auth);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect(get.body).toEqual(refusal(null, "METHOD_NOT_ALLOWED"));
  });

  it("a json-rpc-2.0 client settles every call, refusals and errors included", async () => {
    // The transport its README shows: POST, then hand whatever came back to the client.
    const clientWith = (headers: Record<string, string>) => {
      const client: JSONRPCClient = new JSONRPCClient(async (payload) => {
        const r = await call(t.url, "POST", "/v1/rpc", payload, headers);
        if (r.status !== 204) client.receive(r.body);
      });
      return client;
    };
    const codeOf = (p: PromiseLike<unknown>) =>
      Promise.resolve(p).then(
        () => "resolved",
        (e: unknown) => (e instanceof JSONRPCErrorException ? e.code : String(e)),
      );
    const anonymous = clientWith({});
    expect(await codeOf(anonymous.request("gate.status", {}))).toBe(-32001);
    const caller = clientWith(auth);
    expect(await caller.request("ping", {})).toMatchObject({ pong: true });
    expect(await codeOf(caller.request("no.such.method", {}))).toBe(-32601);
    expect(await codeOf(caller.request("tasks.get", { taskId: 5 }))).toBe(-32602);
    const batch = await caller.requestAdvanced([
      { jsonrpc: "2.0", id: 10, method: "ping" },
      {
        jsonrpc: "2.0",
        id: 11,
        method: "sessions.get",
        params: { sessionId: "00000000-0000-4000-8000-000000000000" },
      },
    ]);
    expect(batch.map((a) => [a.id, a.error?.code ?? "ok"])).toEqual([
      [10, "ok"],
      [11, -32004],
    ]);
  });

  it("a call with a token still answers as before", async () => {
    const ok = await call(t.url, "POST", "/v1/rpc", gateStatus(3), auth);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ jsonrpc: "2.0", id: 3, result: { maxActive: expect.any(Number) } });
  });
});

describe("a gateway that is not ready", () => {
  let down: Gateway;
  beforeAll(async () => {
    down = await startUnreadyGateway();
  });
  afterAll(async () => {
    await down?.stop();
  });

  it("/readyz 503 carries Retry-After", async () => {
    const r = await call(down.url, "GET", "/readyz");
    expect(r.status).toBe(503);
    expect(r.headers.get("retry-after")).toBe("1");
  });

  it("503 carries the request's id and Retry-After", async () => {
    const r = await call(down.url, "POST", "/v1/rpc", gateStatus(1));
    expect(r.status).toBe(503);
    expect(r.headers.get("retry-after")).toBe("1");
    expect(r.body).toEqual(refusal(1, "NOT_READY"));
  });
});
