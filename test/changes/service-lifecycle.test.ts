/**
 * Every service of a gateway (lib/service.ts) keeps the one lifecycle: the ordered list starts
 * them in order and stops them in reverse, a stopped list starts and stops again, a second stop
 * (of the list or of each service) is harmless, and a service never started stops without doing
 * anything. After each stop nothing of the gateway is left: no timer on its clock, no listening
 * port, its instance row marked stopped.
 */
import { pino } from "pino";
import { expect, it } from "vitest";
import { loadAgentRegistry } from "../../src/agents/registry.js";
import { loadConfig } from "../../src/config.js";
import type { Identity } from "../../src/domain/runtime.js";
import { TenantDirectory } from "../../src/domain/tenants.js";
import { composeParts, gatewayServices, type Parts, tracerService } from "../../src/gateway/compose.js";
import { GatewayDatabase } from "../../src/gateway/database.js";
import { HttpServer } from "../../src/gateway/http-server.js";
import { Readiness } from "../../src/gateway/readiness.js";
import { StartupSteps } from "../../src/gateway/startup-steps.js";
import { transportServices } from "../../src/gateway/transport-services.js";
import { type Service, ServiceList } from "../../src/lib/service.js";
import { noMetrics } from "../../src/metrics/reporter.js";
import { ChangeBus } from "../../src/stream/change-bus.js";
import { tracingOff } from "../../src/tracing/tracer.js";
import { TestClock } from "../support/fake-clock.js";
import { testEnv } from "../support/gateway.js";
import { useSqlTestDatabase } from "../support/sql-fixtures.js";

const testDb = useSqlTestDatabase({ emptyBeforeEach: false });

/** A gateway's services as gateway.ts composes them, on the test's database and a TestClock. */
function composeGateway(instanceId: string) {
  const config = loadConfig(testEnv(testDb.url, { MOORING_INSTANCE_ID: instanceId }));
  const log = pino({ level: "silent" });
  const clock = new TestClock();
  const identity: Identity = { instanceId, bootId: crypto.randomUUID(), host: "h", pid: 1, version: "0" };
  const registry = loadAgentRegistry(config.agents);
  const tenants = TenantDirectory.fromConfig(config, [...registry.keys()]);
  const steps = new StartupSteps();
  let drainRequests = 0;
  const parts: Parts = composeParts({
    config,
    log,
    db: testDb.database,
    bus: new ChangeBus(),
    identity,
    registry,
    workspaceRoots: [],
    metrics: { ...noMetrics, webhookAttempt() {} },
    tenants,
    clock,
    tracer: tracingOff,
    stopping: () => false,
    onDrainRequested: () => void drainRequests++,
  });
  const readiness = new Readiness(
    () => parts.db,
    () => parts.worker.databaseReachable,
    identity,
  );
  const services = transportServices(() => parts, identity, clock, tenants, readiness);
  const http = new HttpServer(config, services, log, readiness, {
    render: async () => ({ contentType: "text/plain", body: "" }),
  });
  // Its own pool on the same database: the test's stays open for the assertions.
  const database = new GatewayDatabase(testDb.url, null, `mooring:${instanceId}`, log, () => false, steps);
  const ordered = gatewayServices(
    parts,
    { tracer: tracerService(tracingOff, log), database, http },
    log,
    steps,
    () => false,
  );
  return { parts, http, clock, identity, ordered, log, drainRequests: () => drainRequests };
}

/** Each service, wrapped so the order of their starts and stops is recorded. */
function recording(services: Service[], calls: string[]): Service[] {
  return services.map((s) => ({
    name: s.name,
    start: async () => {
      await s.start();
      calls.push(`start ${s.name}`);
    },
    stop: async () => {
      await s.stop();
      calls.push(`stop ${s.name}`);
    },
  }));
}

async function instanceRow(bootId: string) {
  const rows = await testDb.sql`select stopped_at from instances where boot_id = ${bootId}`;
  return rows[0] as { stoppedAt: Date | null } | undefined;
}

async function answers(url: string): Promise<boolean> {
  return fetch(`${url}/healthz`).then(
    (r) => r.ok,
    () => false,
  );
}

it("starts every service in order and stops them in reverse, twice; a second stop does nothing", async () => {
  const g = composeGateway("lifecycle-twice");
  const names = g.ordered.map((s) => s.name);
  // The services the issue of one lifecycle names are all in the list.
  for (const name of [
    "database",
    "instance row",
    "pg listener",
    "session feeds",
    "webhook deliveries",
    "upstream orphans",
    "sweeper",
    "queue positions",
    "http server",
    "event log",
    "conversation pool",
    "worker",
    "admission",
  ])
    expect(names).toContain(name);
  expect(new Set(names).size).toBe(names.length);

  for (const round of [1, 2]) {
    const calls: string[] = [];
    const list = new ServiceList(recording(g.ordered, calls), g.log);
    await list.start();
    expect(calls).toEqual(names.map((n) => `start ${n}`));
    // Running: the HTTP server answers, the instance row is live, submits are taken.
    expect(await answers(g.http.url), `round ${round}`).toBe(true);
    expect(await instanceRow(g.identity.bootId)).toEqual({ stoppedAt: null });
    expect(g.parts.tasks.accepting).toBe(true);
    expect(g.parts.listener.listens).toBeGreaterThanOrEqual(1);

    const url = g.http.url;
    // The HTTP server's own services (its open connections), stopped by its stop.
    const open = g.http.connections!;
    const connections = [open.sse, open.sockets, open.acp];
    expect(connections.map((s) => s.name)).toEqual(["sse streams", "websockets", "acp connections"]);
    await list.stop();
    await list.stop();
    // A second stop of each of them, after the server closed, does nothing.
    for (const s of connections) await s.stop();
    expect(calls.slice(names.length)).toEqual([...names].reverse().map((n) => `stop ${n}`));
    // Each service stopped a second time on its own: nothing throws.
    for (const s of [...g.ordered].reverse()) await s.stop();
    expect(await answers(url)).toBe(false);
    expect((await instanceRow(g.identity.bootId))?.stoppedAt).toBeInstanceOf(Date);
    expect(g.parts.tasks.accepting).toBe(false);
    expect(g.clock.pending()).toEqual([]);
  }
  expect(g.drainRequests()).toBe(0);
}, 60_000);

it("stops services never started, twice, without doing anything", async () => {
  const g = composeGateway("lifecycle-never-started");
  for (const round of [1, 2])
    for (const s of [...g.ordered].reverse())
      await expect(s.stop(), `${s.name}, stop ${round}`).resolves.toBeUndefined();
  expect(await instanceRow(g.identity.bootId)).toBeUndefined();
  expect(g.http.url).toBe("");
  expect(g.clock.pending()).toEqual([]);
}, 60_000);
