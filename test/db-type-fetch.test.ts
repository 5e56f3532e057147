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
import { call, eventually } from "./support/gateway.js";
import { alive, gatewayEnv, logsWith, Processes, useProcessSuite } from "./support/lifecycle.js";

let db: TestDatabase;
const procs = new Processes();
useProcessSuite("ws-typefetch-", procs, (d) => {
  db = d;
});

/** An ErrorResponse 57P01 (FATAL), as a backend terminated by an administrator sends it. */
const terminated = () => postgresFatal("57P01", "terminating connection due to administrator command");

/**
 * A proxy to Postgres that terminates a connection, as pg_terminate_backend does (a 57P01 FATAL,
 * then the close), when `cutHere` says so of what the client just sent.
 */
async function cuttingProxy(cutHere: (chunk: Buffer) => boolean): Promise<{ server: net.Server; url: string }> {
  const target = new URL(db.url);
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    client.on("data", (chunk: Buffer) => {
      if (cutHere(chunk)) {
        client.end(terminated());
        upstream.destroy();
        return;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) => client.write(chunk));
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = new URL(db.url);
  url.port = String((server.address() as net.AddressInfo).port);
  return { server, url: url.toString() };
}

/**
 * The first `cuts` connections are terminated when they send the types query. How many of them
 * the gateway opens before it is ready depends on timing (pools open connections lazily and in
 * parallel), so the test asserts that at least one was cut, not how many. Six cuts reach past the
 * migrations into reconcile and the first requests on most runs.
 */
let proxy: { server: net.Server; url: string };
let cut = 0;
const cuts = 6;
beforeAll(async () => {
  proxy = await cuttingProxy((chunk) => cut < cuts && chunk.includes("typarray") && ++cut > 0);
});
afterAll(() => {
  proxy?.server.close();
});

it("a connection lost while postgres.js fetches its types does not end the gateway", async () => {
  const gw = await procs.spawn(gatewayEnv(proxy.url, { MOORING_INSTANCE_ID: "typefetch" }));
  await gw.waitReady();
  expect(cut).toBeGreaterThanOrEqual(1);
  expect(alive(gw)).toBe(true);
  expect(logsWith(gw, "uncaught exception; exiting")).toEqual([]);
  expect(
    logsWith(gw, "postgres.js lost a connection while fetching its types (upstream bug); carrying on").length,
  ).toBeGreaterThan(0);
  // A request that lands on a connection cut after ready answers 503 NOT_READY (retry shortly);
  // once the cuts are spent the gateway answers normally, still the same process.
  const answers: number[] = [];
  await eventually(async () => {
    const { status } = await call(gw.url, "GET", "/v1/gate");
    answers.push(status);
    return status === 200;
  });
  expect(answers.every((s) => s === 200 || s === 503)).toBe(true);
  expect(alive(gw)).toBe(true);
});

/**
 * The same kind of loss one step later: the first statement on `tasks` after the instance
 * registered (the startup reconcile) has its connection terminated. Startup retries it like the
 * migrations; it used to end the process with "startup failed".
 */
it("a connection terminated during the startup reconcile does not end the gateway", async () => {
  let registered = false;
  let reconcileCut = 0;
  const cutter = await cuttingProxy((chunk) => {
    if (chunk.includes("insert into instances")) registered = true;
    else if (registered && reconcileCut === 0 && chunk.includes("tasks")) return ++reconcileCut > 0;
    return false;
  });
  try {
    const gw = await procs.spawn(gatewayEnv(cutter.url, { MOORING_INSTANCE_ID: "reconcile-cut" }));
    await gw.waitReady();
    expect(reconcileCut).toBe(1);
    expect(alive(gw)).toBe(true);
    expect(logsWith(gw, "startup failed")).toEqual([]);
    expect(logsWith(gw, "database unreachable at startup; retrying").length).toBeGreaterThan(0);
  } finally {
    cutter.server.close();
  }
});
