/**
 * postgres.js fetches array types on every new connection in a promise nothing awaits
 * (porsager/postgres#1192): a connection lost during that query used to end the gateway with an
 * unhandled rejection. A proxy in front of the real Postgres cuts the first connections exactly
 * when they send that query; the gateway must carry on and get ready.
 */
import { once } from "node:events";
import net from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { TestDatabase } from "./support/db.js";
import { postgresFatal } from "./support/db-proxy.js";
import { call } from "./support/gateway.js";
import { alive, gatewayEnv, logsWith, Processes, useProcessSuite } from "./support/lifecycle.js";

let db: TestDatabase;
const procs = new Processes();
useProcessSuite("ws-typefetch-", procs, (d) => {
  db = d;
});

/** An ErrorResponse 57P01 (FATAL), as a backend terminated by an administrator sends it. */
const terminated = () => postgresFatal("57P01", "terminating connection due to administrator command");

/** Forwards to Postgres; the first `cuts` connections are destroyed when they send the types query. */
let proxy: net.Server;
let cut = 0;
const cuts = 3;
beforeAll(async () => {
  const target = new URL(db.url);
  proxy = net.createServer((client) => {
    const server = net.connect(Number(target.port), target.hostname);
    client.on("data", (chunk) => {
      if (cut < cuts && chunk.includes("typarray")) {
        // What pg_terminate_backend makes the server send at that moment, then the close.
        cut++;
        client.end(terminated());
        server.destroy();
        return;
      }
      server.write(chunk);
    });
    server.on("data", (chunk) => client.write(chunk));
    client.on("error", () => server.destroy());
    server.on("error", () => client.destroy());
    client.on("close", () => server.destroy());
    server.on("close", () => client.destroy());
  });
  proxy.listen(0, "127.0.0.1");
  await once(proxy, "listening");
});
afterAll(() => {
  proxy?.close();
});

it("a connection lost while postgres.js fetches its types does not end the gateway", async () => {
  const url = new URL(db.url);
  url.port = String((proxy.address() as net.AddressInfo).port);
  const gw = await procs.spawn(gatewayEnv(url.toString(), { MOORING_INSTANCE_ID: "typefetch" }));
  await gw.waitReady();
  expect(cut).toBe(cuts);
  expect(alive(gw)).toBe(true);
  expect(logsWith(gw, "uncaught exception; exiting")).toEqual([]);
  expect(
    logsWith(gw, "postgres.js lost a connection while fetching its types (upstream bug); carrying on").length,
  ).toBeGreaterThan(0);
  expect((await call(gw.url, "GET", "/v1/gate")).status).toBe(200);
});
