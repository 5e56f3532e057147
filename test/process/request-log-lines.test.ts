/**
 * Logs read by a person: with the pretty format (a terminal's default) each
 * request is one line at info, `GET /v1/sessions 200 3 ms`, not fastify's pair of multi-line
 * records; polled routes (the console's gate heartbeat, health probes) add none. A spawned gateway
 * with MOORING_LOG_FORMAT=pretty, its stdout counted.
 */
import { once } from "node:events";
import { stripVTControlCharacters } from "node:util";
import { beforeAll, expect, it } from "vitest";
import { call, type GatewayProcess } from "../support/gateway.js";
import { useProcessGateway } from "../support/use-gateway.js";

const suite = useProcessGateway({ env: { LOG_LEVEL: "info", MOORING_LOG_FORMAT: "pretty" } });
let gw: GatewayProcess;
beforeAll(async () => {
  gw = await suite.spawn();
  await gw.waitReady();
});

/** Without pino-pretty's colours. */
const plain = (text: string) => stripVTControlCharacters(text);

it("writes one line per request, none for polled routes", async () => {
  const before = plain(gw.output()).split("\n").length;
  for (let i = 0; i < 3; i++) expect((await call(gw.url, "GET", "/v1/sessions?limit=1")).status).toBe(200);
  expect((await call(gw.url, "GET", "/v1/gate")).status).toBe(200);
  expect((await call(gw.url, "GET", "/readyz")).status).toBe(200);
  expect((await call(gw.url, "GET", "/v1/no-such-route")).status).toBe(404);
  // The last request's line is written when it is answered: wait for it rather than for time.
  while (!plain(gw.output()).includes("GET /v1/no-such-route 404")) await once(gw.child.stdout!, "data");
  const lines = plain(gw.output())
    .split("\n")
    .slice(before - 1)
    .filter((line) => line.trim() !== "");
  expect(lines).toHaveLength(4);
  for (const line of lines.slice(0, 3))
    expect(line).toMatch(/ INFO .*: GET \/v1\/sessions\?limit=1 200 \d+ ms/);
  expect(lines[3]).toMatch(/ INFO .*: GET \/v1\/no-such-route 404 \d+ ms/);
  expect(plain(gw.output())).not.toContain("incoming request");
  expect(gw.output()).not.toContain("Deprecation"); // fastify's deprecated option is not used
});
