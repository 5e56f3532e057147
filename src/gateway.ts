/**
 * Runs the gateway's lifecycle: one ordered list of services (gateway/compose.ts), started in order
 * and stopped in reverse (docs/api.md, Restarts, resume and recovery). The HTTP server listens
 * first (so /healthz and /readyz answer) while the database connects and migrates; then the
 * instance registers, reconciles, its loops and workers start, and it accepts commands. A shutdown
 * or a drain stops the list.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { Logger } from "pino";
import { loadAgentRegistry } from "./agents/registry.js";
import { type Clock, scaledClock } from "./clock.js";
import { type Config, checkStartupConfig } from "./config.js";
import { DataDirBusy } from "./db/data-dir-lock.js";
import { postgresDriverPatched } from "./db/driver-patch.js";
import { type EmbeddedLaunch, launchConfiguredPostgres } from "./db/embedded.js";
import type { Identity } from "./domain/runtime.js";
import { TenantDirectory } from "./domain/tenants.js";
import { normalizeRoots } from "./domain/workspace.js";
import { composeParts, gatewayServices, type Parts, tracerService } from "./gateway/compose.js";
import { transportServices } from "./gateway/transport-services.js";
import { GatewayDatabase } from "./gateway/database.js";
import { HttpServer } from "./gateway/http-server.js";
import { Readiness, withinASecond } from "./gateway/readiness.js";
import { StartupSteps } from "./gateway/startup-steps.js";
import { ServiceList } from "./lib/service.js";
import { safeErrorSerializer } from "./log-errors.js";
import { GatewayMetrics } from "./metrics/gateway-metrics.js";
import { packageRoot } from "./package-root.js";
import { gateCountActiveAndQueued } from "./sql/gate-status.js";
import { webhookCountPending } from "./sql/webhook-deliveries.js";
import { ChangeBus } from "./stream/change-bus.js";
import { type Tracer, tracingOff } from "./tracing/tracer.js";

export const version: string = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")).version;

export interface Gateway {
  /** Base URL the HTTP server listens on. */
  url: string;
  identity: Identity;
  /** Resolves when startup (migrate, reconcile, workers) is done. */
  started: Promise<void>;
  /** Graceful shutdown; resolves when everything is closed. */
  stop(): Promise<void>;
  /**
   * The same shutdown as a drain (SIGHUP, POST /v1/instances/:instanceId/drain): readiness says
   * `draining`, and running turns get MOORING_DRAIN_TIMEOUT_MS instead of the shutdown grace.
   */
  drain(): Promise<void>;
  /** What this instance holds open right now (for tests and diagnostics). */
  holding(): Holding;
}

export interface Holding {
  sockets: number;
  /** JSON-RPC calls received on sockets and not answered yet. */
  socketCalls: number;
  /** Open SSE streams. */
  sseStreams: number;
  /** Event subscribers (sockets and SSE) and the session feeds serving them. */
  subscribers: number;
  feeds: number;
  /** Event subscriptions of `/acp` connections' runs, in process on the feeds (counted in `subscribers` too). */
  localSubscriptions: number;
  /** Long-poll waits and the tasks they watch. */
  longPolls: number;
  watchedTasks: number;
}

export interface StartOptions {
  /** The embedded Postgres, when the caller launched it already (main.ts does, before loading this module). */
  launched?: EmbeddedLaunch;
  /** The gateway's time (src/clock.ts); default real time, its waits divided by MOORING_TIME_SCALE. */
  clock?: Clock;
  /**
   * Called when this instance is asked to drain from the API (a request here or on another
   * instance): main.ts drains and then ends the process. Without it (tests) the gateway drains.
   */
  onDrainRequested?: () => void;
}

/**
 * Without `options.launched` and without DATABASE_URL the embedded Postgres is launched here.
 */
export async function startGateway(
  config: Config,
  given: Logger,
  options: StartOptions = {},
): Promise<Gateway> {
  const { launched, onDrainRequested } = options;
  const clock = options.clock ?? scaledClock(config.timeScale);
  const steps = new StartupSteps();
  steps.mark("loaded");
  // Errors are logged without client data (log-errors.ts), whoever made the logger.
  const log = given.child({}, { serializers: { err: safeErrorSerializer } });
  checkStartupConfig(config);
  const registry = loadAgentRegistry(config.agents);
  const tenants = TenantDirectory.fromConfig(config, [...registry.keys()]);
  const workspaceRoots = await normalizeRoots(config.workspaceRoots);
  const identity: Identity = {
    instanceId:
      config.instanceId ??
      (config.port === 0 ? `${hostname()}:${randomUUID().slice(0, 8)}` : `${hostname()}:${config.port}`),
    bootId: randomUUID(),
    host: hostname(),
    pid: process.pid,
    version,
  };
  const tracer = await startTracer(config, identity, log);
  const bus = new ChangeBus();

  // Parts that need the database are composed once it is there; until then readiness says so.
  let parts: Parts | null = null;
  const readiness = new Readiness(
    () => parts?.db ?? null,
    () => parts?.worker.databaseReachable ?? null,
    identity,
  );
  const services = transportServices(() => parts, identity, clock, tenants, readiness);

  // Per-instance registry; gauges read their sources on scrape (src/metrics/gateway-metrics.ts).
  const metrics: GatewayMetrics = new GatewayMetrics({
    maxActive: config.maxActive,
    maxQueued: config.maxQueued,
    gate: async () => (parts ? withinASecond(gateCountActiveAndQueued(parts.db.sql)) : null),
    connections: () => {
      const open: HttpServer["connections"] = http.connections;
      return {
        ws: open?.sockets.count ?? 0,
        sse: open?.sse.count ?? 0,
        subscriptions: parts?.feeds.subscriberCount ?? 0,
        strayResponses: open?.sockets.strayResponses ?? 0,
      };
    },
    agentProcesses: () => parts?.pool.processesByAgent() ?? new Map(),
    webhookBacklog: async () => (parts ? withinASecond(webhookCountPending(parts.db.sql)) : null),
  });
  // The embedded Postgres starts while the HTTP side is put together: building the app is CPU
  // work that would hold back spawning initdb/postgres, so it waits until they run (milliseconds).
  const launch = config.databaseUrl ? null : (launched ?? launchConfiguredPostgres(config, log));
  // A data folder another gateway owns stops this start before it listens (db/data-dir-lock.ts);
  // any other failure of the launch is reported by the startup below.
  await launch?.launched.catch((err) => {
    if (err instanceof DataDirBusy) throw err;
  });
  const t0 = Date.now();
  const stopping = () => readiness.stopping;
  const database = new GatewayDatabase(
    config.databaseUrl,
    launch,
    `mooring:${identity.instanceId}`,
    log,
    stopping,
    steps,
  );
  const http: HttpServer = new HttpServer(config, services, log, readiness, metrics);
  const edges = { tracer: tracerService(tracer, log), database, http };
  // Two services start ahead of their place in the list: connecting and migrating need only the
  // database and go on while the app is built and starts listening (they wait on Postgres most of
  // the time), and the HTTP server listens first, so /healthz and /readyz answer during the startup.
  const opened = database.start();
  opened.catch(() => {}); // awaited (and reported) by the startup below
  try {
    await http.start();
    steps.mark("listening");
  } catch (err) {
    // Not listening (a port in use): leave no pool and no database behind.
    readiness.shuttingDown(false);
    await database.stop().catch(() => {});
    throw err;
  }
  const url = http.url;
  log.info({ url, instanceId: identity.instanceId, bootId: identity.bootId, version }, "listening");
  launch?.announce(url);
  if (!postgresDriverPatched())
    log.warn(
      "postgres.js lacks mooring's reconnect fix (installed with --ignore-scripts?): run `node scripts/patch-postgres.mjs` (docs/operations.md)",
    );

  let list: ServiceList | null = null;
  const started = (async () => {
    await opened;
    const db = database.db!;
    parts = composeParts({
      config,
      log,
      db,
      bus,
      identity,
      registry,
      workspaceRoots,
      metrics,
      tenants,
      clock,
      tracer,
      stopping,
      onDrainRequested: () => drainRequested(),
    });
    list = new ServiceList(gatewayServices(parts, edges, log, steps, stopping), log, stopping);
    await list.start();
    readiness.started();
    steps.mark("ready");
    log.info({ ms: Date.now() - t0, ...steps.reconciled, steps: steps.done }, "ready");
    // A cluster created just now reaches the disk from here on (db/embedded.ts).
    void database.embedded?.sync();
  })();
  started.catch((err) => {
    // A shutdown while still waiting for the database ends the startup on purpose.
    if (readiness.stopping) log.info("startup abandoned: shutting down");
    else log.error({ err }, "startup failed");
  });

  let drainAsked = false;
  const drainRequested = () => {
    if (drainAsked || stopped) return;
    drainAsked = true;
    log.info("drain requested through the API");
    if (onDrainRequested) onDrainRequested();
    else void drain();
  };
  bus.on("drain", (bootId) => {
    if (bootId === identity.bootId) drainRequested();
  });

  let stopped: Promise<void> | null = null;
  /**
   * Shutdown and drain are one path: stop every service in reverse order (compose.ts says what
   * that means); a drain gives running turns MOORING_DRAIN_TIMEOUT_MS instead of the shutdown grace.
   */
  const shutdown = (draining: boolean) => {
    stopped ??= (async () => {
      const graceMs = draining ? config.drainTimeoutMs : config.shutdownGraceMs;
      readiness.shuttingDown(draining);
      log.info(
        { draining, graceMs },
        draining ? "drain: stopped admitting and claiming" : "shutdown: stopped admitting and claiming",
      );
      // The startup gives up its database retries and starts nothing more.
      await started.catch(() => {});
      if (parts) {
        parts.worker.graceMs = graceMs;
        if (draining) parts.instanceRow.markDraining();
      }
      // Once composed, the whole list; if the database never opened, the services made before it.
      await (list ?? new ServiceList([edges.tracer, edges.database, edges.http], log)).stop();
      log.info("shutdown: done");
    })();
    return stopped;
  };
  const stop = () => shutdown(false);
  const drain = () => shutdown(true);

  const holding = (): Holding => ({
    sockets: http.connections?.sockets.count ?? 0,
    socketCalls: http.connections?.sockets.callsInFlight ?? 0,
    sseStreams: http.connections?.sse.count ?? 0,
    subscribers: parts?.feeds.subscriberCount ?? 0,
    feeds: parts?.feeds.feedCount ?? 0,
    localSubscriptions: http.connections?.acp.localSubscriptions ?? 0,
    longPolls: parts?.tasks.watch.waiters ?? 0,
    watchedTasks: parts?.tasks.watch.tasks ?? 0,
  });

  return { url, identity, started, stop, drain, holding };
}

/**
 * The tracer: OpenTelemetry's SDK, loaded only when the OTEL_* variables turn tracing on
 * (config.ts, docs/operations.md, Tracing); otherwise the no-op tracer.
 */
async function startTracer(config: Config, identity: Identity, log: Logger): Promise<Tracer> {
  if (!config.tracing) return tracingOff;
  const { startOtelTracer } = await import("./tracing/otel.js");
  const tracer = startOtelTracer(config.tracing, identity, log);
  // The URL without credentials or query (the headers are never logged).
  const url = new URL(config.tracing.url);
  log.info(
    {
      endpoint: `${url.origin}${url.pathname}`,
      serviceName: config.tracing.serviceName,
      sampler: config.tracing.sampler,
    },
    "tracing on: exporting spans over OTLP/HTTP",
  );
  return tracer;
}
