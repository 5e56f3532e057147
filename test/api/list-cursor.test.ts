/**
 * A forged list cursor (one this gateway never returned) is bad input: 400 INVALID_REQUEST on the
 * `cursor` field for every list that takes one, over REST and JSON-RPC, and never an error-level
 * log. Each forged cursor below passed the old shape check and then failed inside Postgres (500).
 */
import { describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { LogRecorder } from "../support/agent-gateway.js";
import { call } from "../support/gateway.js";
import { createSessions, tempWorkspace } from "../support/turns.js";

const t = useGateway({ gateway: { logLevel: "debug", onLog: (r) => logs.push(r as never) } });
const logs = new LogRecorder();

const forge = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
const uuid = "0b9f1c1e-8a4e-4a53-9d7e-0c1f2d3e4f50";
const forged: Record<string, string> = {
  "a date not in the form the gateway writes": forge(["1", uuid]),
  "a year past Postgres' range": forge(["+275760-09-13T00:00:00.000Z", uuid]),
  "an id of dashes": forge(["2026-01-01T00:00:00.000Z", "-".repeat(36)]),
  "not an array": forge({ a: 1 }),
  "not JSON": "%%%",
};

const routes = ["/v1/sessions", "/v1/tasks"];
const methods = ["sessions.list", "tasks.list"];

describe("a forged list cursor", () => {
  for (const [name, cursor] of Object.entries(forged)) {
    it(`${name}: 400 on the cursor field on every list route and method`, async () => {
      const before = logs.items.length;
      for (const route of routes) {
        const r = await call(t.url, "GET", `${route}?cursor=${encodeURIComponent(cursor)}`);
        expect({ route, status: r.status, code: r.body.error?.code, field: r.body.error?.field }).toEqual({
          route,
          status: 400,
          code: "INVALID_REQUEST",
          field: "cursor",
        });
      }
      for (const method of methods) {
        const r = await call(t.url, "POST", "/v1/rpc", { jsonrpc: "2.0", id: 1, method, params: { cursor } });
        expect({ method, code: r.body.error?.data?.code, field: r.body.error?.data?.field }).toEqual({
          method,
          code: "INVALID_REQUEST",
          field: "cursor",
        });
      }
      expect(logs.items.slice(before).filter((l) => l.level >= 50)).toEqual([]);
    });
  }

  it("a cursor the gateway returned still pages", async () => {
    const ids = await createSessions(t.url, await tempWorkspace(), 2);
    const first = await call(t.url, "GET", "/v1/sessions?limit=1");
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const next = await call(t.url, "GET", `/v1/sessions?limit=1&cursor=${first.body.nextCursor}`);
    expect(next.status).toBe(200);
    expect([...first.body.items, ...next.body.items].map((s: any) => s.id).sort()).toEqual([...ids].sort());
  });
});
