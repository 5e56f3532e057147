/**
 * GET /v1/instances and instances.list: every gateway instance of a shared database
 * with its boot, version, heartbeat age and running tasks; a killed one's heartbeat ages and goes
 * stale, a SIGTERMed one is marked stopped; host and pid only when tokens are set.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { MooringClient } from "../../src/client/index.js";
import type { Gateway } from "../../src/gateway.js";
import { call, eventually, startTestGateway } from "../support/gateway.js";
import { alive, exitedWithOutput, gatewayEnv, Processes } from "../support/lifecycle.js";
import { cancelTask, createSession, submitOk, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";

const suite = useGateway({ env: { MOORING_MAX_ACTIVE: "4" }, workspace: true });
let a: Gateway;
let b: Gateway;
const procs = new Processes();

beforeAll(async () => {
  a = suite.gw;
  b = await suite.startGateway();
});
afterAll(() => procs.killAll());

const instances = async (gw: Gateway, headers: Record<string, string> = {}) => {
  const res = await call(gw.url, "GET", "/v1/instances", undefined, headers);
  expect(res.status).toBe(200);
  return res.body.items as any[];
};

it("lists both instances of a two-gateway setup with their running tasks", async () => {
  const sessions = await Promise.all([1, 2, 3].map(() => createSession(a.url, suite.workspace)));
  const tasks = await Promise.all(
    sessions.map((s, i) => submitOk(i === 0 ? b.url : a.url, s, { prompt: "[hang]" })),
  );
  for (const t of tasks) await waitTask(a.url, t.id, (x) => x.status === "running");
  const owners = await suite.sql<{ ownerBoot: string; n: number }[]>`
    select owner_boot, count(*)::int as n from tasks where status = 'running' group by owner_boot`;
  const running = new Map(owners.map((o) => [o.ownerBoot, o.n]));

  const items = await instances(a);
  const byBoot = new Map(items.map((i) => [i.bootId, i]));
  for (const gw of [a, b]) {
    const me = byBoot.get(gw.identity.bootId);
    expect(me).toMatchObject({
      instanceId: gw.identity.instanceId,
      version: gw.identity.version,
      status: "live",
      stoppedAt: null,
      runningTasks: running.get(gw.identity.bootId) ?? 0,
      self: gw === a,
    });
    expect(me.heartbeatAgeMs).toBeGreaterThanOrEqual(0);
    // No tokens set: host and pid are not shown (as /readyz without a valid token).
    expect(me).not.toHaveProperty("host");
    expect(me).not.toHaveProperty("pid");
  }
  expect(items.reduce((n, i) => n + i.runningTasks, 0)).toBe(3);

  // The same over JSON-RPC and through the client SDK.
  const rpc = await call(b.url, "POST", "/v1/rpc", { jsonrpc: "2.0", id: 1, method: "instances.list" });
  expect(rpc.body.result.items.map((i: any) => i.bootId).sort()).toEqual(items.map((i) => i.bootId).sort());
  expect(rpc.body.result.items.find((i: any) => i.self).bootId).toBe(b.identity.bootId);
  const viaClient = await new MooringClient({ url: a.url }).instances();
  expect(viaClient.map((i) => i.runningTasks).sort()).toEqual(items.map((i) => i.runningTasks).sort());

  for (const t of tasks) await cancelTask(a.url, t.id);
  await eventually(async () => (await instances(a)).every((i) => i.runningTasks === 0));
});

it("a killed instance's heartbeat ages and goes stale; a SIGTERMed one is marked stopped", async () => {
  const env = gatewayEnv(suite.databaseUrl, { MOORING_MAX_ACTIVE: "4" });
  const [killed, termed] = await Promise.all([procs.spawn(env), procs.spawn(env)]);
  await Promise.all([killed.waitReady(), termed.waitReady()]);
  const boots = new Map<number, string>();
  for (const p of [killed, termed])
    boots.set(p.child.pid!, (await call(p.url, "GET", "/readyz")).body.bootId);
  const killedBoot = boots.get(killed.child.pid!)!;
  const termedBoot = boots.get(termed.child.pid!)!;
  expect(
    (await instances(a)).filter((i) => [killedBoot, termedBoot].includes(i.bootId)).map((i) => i.status),
  ).toEqual(["live", "live"]);

  killed.kill("SIGKILL");
  termed.kill("SIGTERM");
  expect(await exitedWithOutput(termed)).toBe(0);
  await exitedWithOutput(killed);
  expect(alive(killed)).toBe(false);

  const first = (await instances(a)).find((i) => i.bootId === killedBoot);
  // MOORING_LEASE_MS is 1500 in these processes; the list judges staleness by this gateway's lease
  // (30 s default), so wait for the age to grow past the first reading instead.
  const later = await eventually(async () => {
    const k = (await instances(a)).find((i) => i.bootId === killedBoot);
    return k.heartbeatAgeMs > first.heartbeatAgeMs + 500 ? k : null;
  });
  expect(later.heartbeatAt).toBe(first.heartbeatAt);
  expect(later.stoppedAt).toBeNull();
  const stopped = (await instances(a)).find((i) => i.bootId === termedBoot);
  expect(stopped.status).toBe("stopped");
  expect(stopped.stoppedAt).not.toBeNull();
  expect(stopped.runningTasks).toBe(0);
  // Live instances come first.
  const statuses = (await instances(a)).map((i) => i.status);
  expect(statuses.lastIndexOf("live")).toBeLessThan(statuses.indexOf("stopped"));

  // A gateway with a 1 s lease and tokens set: the killed one is stale there, and a caller (who
  // must hold a valid token) sees host and pid.
  const ops = await startTestGateway(suite.databaseUrl, {
    MOORING_API_TOKENS: "secret",
    MOORING_LEASE_MS: "1000",
    MOORING_HEARTBEAT_MS: "200",
  });
  try {
    expect((await call(ops.url, "GET", "/v1/instances")).status).toBe(401);
    const auth = { authorization: "Bearer secret" };
    const stale = await eventually(async () => {
      const k = (await instances(ops, auth)).find((i) => i.bootId === killedBoot);
      return k.status === "stale" ? k : null;
    });
    expect(stale).toMatchObject({ pid: killed.child.pid, host: ops.identity.host, stoppedAt: null });
    expect(stale.heartbeatAgeMs).toBeGreaterThanOrEqual(1000);
    const me = (await instances(ops, auth)).find((i) => i.self);
    expect(me).toMatchObject({ bootId: ops.identity.bootId, pid: process.pid, status: "live" });
  } finally {
    await ops.stop();
  }
});
