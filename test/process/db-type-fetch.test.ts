/**
 * postgres.js fetches array types on every new connection in a promise nothing awaits
 * (porsager/postgres#1192): a connection lost during that query used to end the gateway with an
 * unhandled rejection. A proxy in front of the real Postgres cuts the first connections exactly
 * when they send that query; the gateway must carry on and get ready.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { DatabaseProxy } from "../support/db-proxy.js";
import { call, eventually } from "../support/gateway.js";
import { alive, gatewayEnv, logsWith, Processes, useProcessSuite } from "../support/lifecycle.js";

let db: TestDatabase;
const procs = new Processes();
useProcessSuite("ws-typefetch-", procs, (d) => {
  db = d;
});

/**
 * The first `cuts` connections are terminated when they send the types query. How many of them
 * the gateway opens before it is ready depends on timing (pools open connections lazily and in
 * parallel), so the test asserts that at least one was cut, not how many. Six cuts reach past the
 * migrations into reconcile and the first requests on most runs.
 */
let proxy: DatabaseProxy;
let cut = 0;
const cuts = 6;
beforeAll(async () => {
  proxy = await DatabaseProxy.start(db.url, (sent) => cut < cuts && sent.includes("typarray") && ++cut > 0);
});
afterAll(async () => {
  await proxy?.close();
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
  const cutter = await DatabaseProxy.start(db.url, (sent) => {
    if (sent.includes("insert into instances")) registered = true;
    else if (registered && reconcileCut === 0 && sent.includes("tasks")) return ++reconcileCut > 0;
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
    await cutter.close();
  }
});
