/**
 * Puts the gateway together and runs its lifecycle. Startup order (docs/api.md, Restarts, resume and recovery): listen (so
 * /healthz and /readyz answer), connect, migrate, register this instance, reconcile, start
 * workers, then accept commands. Shutdown reverses it.
 */
import { CheckpointService } from "./domain/checkpoints.js";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { Logger } from "pino";
import { drivers } from "./agents/drivers.js";
import { loadAgentRegistry } from "./agents/registry.js";
import { type Config, checkStartupConfig, tokensRequired } from "./config.js";
import { TenantDirectory } from "./domain/tenants.js";
import { connect, type Database } from "./db/client.js";
import { postgresDriverPatched } from "./db/driver-patch.js";
import { DataDirBusy } from "./db/data-dir-lock.js";
import { type EmbeddedDatabase, type EmbeddedLaunch, launchConfiguredPostgres } from "./db/embedded.js";
import { applyMigrations } from "./db/migrate.js";
import { packageRoot } from "./package-root.js";
import { Committer } from "./domain/committer.js";
import { readCarryOver } from "./domain/carry-over.js";
import { ConversationPool } from "./domain/conversation-pool.js";
import { sessionTranscripts } from "./domain/transcripts.js";
import { EventService } from "./domain/events.js";
import { InstanceService } from "./domain/instances.js";
import { QueuePositionAnnouncer } from "./domain/queue-positions.js";
import { Recovery } from "./domain/recovery.js";
import type { Identity, Runtime } from "./domain/runtime.js";
import { SessionService } from "./domain/sessions.js";
import { Sweeper } from "./domain/sweeper.js";
import { TaskService } from "./domain/tasks.js";
import { UpstreamOrphans } from "./domain/upstream-orphans.js";
import { Worker } from "./domain/worker.js";
import { TenantRoots } from "./domain/tenant-roots.js";
import { normalizeRoots } from "./domain/workspace.js";
import type { ReadyzView } from "./transport/http/routes/health.js";
import {
  heartbeatInstance,
  markInstanceDraining,
  markInstanceStopped,
  registerInstance,
} from "./sql/instances.js";
import { ChangeBus } from "./stream/change-bus.js";
import type { EventLog } from "./stream/event-log.js";
import { Permissions } from "./domain/permissions.js";
import { PgListener } from "./stream/pg-listener.js";
import { SessionFeeds } from "./stream/session-feeds.js";
import { safeErrorSerializer } from "./log-errors.js";
import { errors, isDatabaseUnavailable, type NotReadyCause } from "./errors.js";
import { retrying, retryPolicies } from "./lib/retry.js";
import { TimedLoop } from "./lib/timed-loop.js";
import { countPending } from "./sql/webhook-deliveries.js";
import { DeliveriesService } from "./webhooks/deliveries-service.js";
import { type DeliveryReporter, DeliveryWorker } from "./webhooks/delivery-worker.js";
import { buildHttpApp } from "./transport/http/app.js";
import { GatewayMetrics } from "./metrics/gateway-metrics.js";
import type { MetricsReporter } from "./metrics/reporter.js";
import { countActiveAndQueued } from "./sql/gate-status.js";
import type { Services } from "./transport/services.js";
import { CLOSE_GOING_AWAY } from "./transport/ws/socket.js";
import { type Clock, scaledClock } from "./clock.js";
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
  // When each startup step was done, in ms since the process started: logged with "ready", where
  // the startup time goes is in the log (bench/README.md, "Startup, where the time went").
  const steps: Record<string, number> = {};
  const mark = (step: string) => {
    steps[step] = Math.round(performance.now());
  };
  mark("loaded");
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
  const state = { ready: false, stopping: false, cause: "starting" as NotReadyCause };

  // Parts that need the database are created once it is there; until then readiness says so.
  let parts: Parts | null = null;
  const services: Services = {
    get sessions() {
      return need(parts).sessions;
    },
    get tasks() {
      return need(parts).tasks;
    },
    get events() {
      return need(parts).events;
    },
    get feeds() {
      return need(parts).feeds;
    },
    get instances() {
      return need(parts).instances;
    },
    get permissions() {
      return need(parts).permissions;
    },
    get checkpoints() {
      return need(parts).checkpoints;
    },
    webhookDeliveries: new DeliveriesService(() => need(parts).db),
    identity,
    clock,
    tenants,
    readiness: () => {
      if (!state.ready || !parts) return { ready: false, cause: state.cause };
      if (!parts.worker.databaseReachable) return { ready: false, cause: "database" };
      return { ready: true };
    },
  };

  const health = {
    readyz: async (view: ReadyzView) => {
      const r = services.readiness();
      let database = false;
      if (parts) database = await probeDatabase(parts.db);
      const ok = r.ready && database;
      // Without a valid token (when tokens are set) only ready or not; host and pid only with one.
      if (view === "status") return { ok, body: { ready: ok } };
      return {
        ok,
        body: {
          ready: ok,
          ...(ok ? {} : { error: errors.notReady(database && !r.ready ? r.cause : "database").toBody() }),
          instanceId: identity.instanceId,
          bootId: identity.bootId,
          version,
          ...(view === "operator" ? { host: identity.host, pid: identity.pid } : {}),
        },
      };
    },
  };

  // Per-instance registry; gauges read their sources on scrape (src/metrics/gateway-metrics.ts).
  const metrics = new GatewayMetrics({
    maxActive: config.maxActive,
    maxQueued: config.maxQueued,
    gate: async () => (parts ? withinASecond(countActiveAndQueued(parts.db.sql)) : null),
    connections: () => ({
      ws: sockets.count,
      sse: sse.count,
      subscriptions: parts?.feeds.subscriberCount ?? 0,
      strayResponses: sockets.strayResponses,
    }),
    agentProcesses: () => parts?.pool.processesByAgent() ?? new Map(),
    webhookBacklog: async () => (parts ? withinASecond(countPending(parts.db.sql)) : null),
  });
  // The embedded Postgres starts while the HTTP side is put together: building the app is CPU
  // work that would hold back spawning initdb/postgres, so it waits until they run (milliseconds).
  const launch = config.databaseUrl ? null : (launched ?? launchConfiguredPostgres(config, log));
  // A data folder another gateway owns stops this start before it listens (db/data-dir-lock.ts);
  // any other failure of the launch is reported by the startup below.
  await launch?.launched.catch((err) => {
    if (err instanceof DataDirBusy) throw err;
  });
  let embedded: EmbeddedDatabase | null = null;
  const t0 = Date.now();
  // Connecting and migrating need only the database: they go on while the app is built and starts
  // listening (they wait on Postgres most of the time), instead of after (bench/README.md).
  const migrated = (async () => {
    if (launch) {
      embedded = await launch.ready;
      mark("database");
    }
    const db = connect(embedded?.url ?? config.databaseUrl!, {
      applicationName: `mooring:${identity.instanceId}`,
    });
    await prepareDatabase(
      db,
      log,
      () => state.stopping,
      async () => {
        await applyMigrations(db);
        mark("migrated");
      },
    );
    return db;
  })();
  migrated.catch(() => {}); // awaited (and reported) by the startup below
  let http: Awaited<ReturnType<typeof buildHttpApp>>;
  try {
    http = await buildHttpApp(config, services, log, health, metrics);
    await http.app.listen({ host: config.host, port: config.port });
    mark("listening");
  } catch (err) {
    // Not listening (a port in use): leave no pool and no database behind.
    state.stopping = true;
    await migrated.then((db) => db.close()).catch(() => {});
    await launch?.ready.then((e) => e.stop()).catch(() => {});
    throw err;
  }
  const { app, sockets, sse, acp } = http;
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
  log.info({ url, instanceId: identity.instanceId, bootId: identity.bootId, version }, "listening");
  launch?.announce(url);
  if (!postgresDriverPatched())
    log.warn(
      "postgres.js lacks mooring's reconnect fix (installed with --ignore-scripts?): run `node scripts/patch-postgres.mjs` (docs/operations.md)",
    );

  const started = (async () => {
    const db = await migrated;
    parts = assemble(
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
    );
    // The LISTEN connection opens while the instance registers and reconciles (nothing listens to
    // the bus before the API is ready); workers start once it listens. start() retries by itself.
    const listening = parts.listener.start();
    // Registered only now that the HTTP server listens: one that could not leaves no row behind.
    await prepareDatabase(
      db,
      log,
      () => state.stopping,
      () => registerInstance(db.sql, { ...identity, group: config.instanceGroup }),
    );
    mark("registered");
    // Reconcile is the first real work on the pool; the database may drop a connection here as
    // well (seen: one cut while postgres.js fetched its types), so it retries like the steps above.
    const sweeper = parts.sweeper;
    const reconciled = await prepareDatabase(
      db,
      log,
      () => state.stopping,
      () => sweeper.reconcile(),
    );
    mark("reconciled");
    await listening;
    parts.feeds.start();
    parts.worker.start();
    parts.sweeper.start();
    parts.upstreamOrphans.start();
    await parts.webhooks
      .register()
      .catch((err) => log.error({ err: String(err) }, "webhook endpoints not published"));
    parts.webhooks.start();
    // The instance row's heartbeat also reads back a drain asked through the API (its
    // notification, handled below, is only a hint).
    parts.instanceBeat = new TimedLoop(
      config.heartbeatMs,
      async () => {
        if ((await heartbeatInstance(db.sql, identity.bootId)).drainRequested) drainRequested();
      },
      undefined,
      clock,
    );
    parts.instanceBeat.start();
    parts.tasks.accepting = true;
    state.ready = true;
    mark("ready");
    log.info({ ms: Date.now() - t0, ...reconciled, steps }, "ready");
    // A cluster created just now reaches the disk from here on (db/embedded.ts).
    void (embedded as EmbeddedDatabase | null)?.sync();
  })();
  started.catch((err) => {
    // A shutdown while still waiting for the database ends the startup on purpose.
    if (state.stopping) log.info("startup abandoned: shutting down");
    else log.error({ err }, "startup failed");
  });

  let drainAsked = false;
  const drainRequested = () => {
    if (drainAsked || stopping) return;
    drainAsked = true;
    log.info("drain requested through the API");
    if (onDrainRequested) onDrainRequested();
    else void drain();
  };
  bus.on("drain", (bootId) => {
    if (bootId === identity.bootId) drainRequested();
  });

  let stopping: Promise<void> | null = null;
  /**
   * Shutdown and drain are one path: stop admitting and claiming, give running turns `graceMs`,
   * settle the rest interrupted (continued elsewhere under MOORING_RECOVERY=continue), close.
   */
  const shutdown = (draining: boolean) => {
    stopping ??= (async () => {
      const graceMs = draining ? config.drainTimeoutMs : config.shutdownGraceMs;
      state.stopping = true;
      state.ready = false;
      state.cause = draining ? "draining" : "stopping";
      log.info(
        { draining, graceMs },
        draining ? "drain: stopped admitting and claiming" : "shutdown: stopped admitting and claiming",
      );
      await started.catch(() => {});
      const p = parts;
      if (p) {
        p.tasks.accepting = false;
        p.worker.stopClaiming();
        // Shown in GET /v1/instances, and the group stops counting on this boot (waitingForGroup).
        // Not awaited: with the database away it must not hold the drain up.
        if (draining) void markInstanceDraining(p.db.sql, identity.bootId).catch(() => {});
        const drained = await p.worker.drain(graceMs);
        log.info(drained, "shutdown: running turns drained");
        const released = await p.sweeper.releaseOwnTasks().catch(() => []);
        if (released.length > 0) log.info({ count: released.length }, "shutdown: leases released");
        await p.pool.closeAll();
        await p.eventLog.close();
        log.info("shutdown: event log flushed");
      }
      // ACP connections first: they follow turns through this gateway's own sockets, which would
      // otherwise reconnect as those close below.
      await acp.close();
      sockets.closeAll(CLOSE_GOING_AWAY, "gateway shutting down");
      sse.closeAll();
      await app.close();
      if (p) {
        await p.sweeper.stop();
        await p.upstreamOrphans.stop();
        await p.webhooks.stop();
        await p.feeds.stop();
        p.announcer.stop();
        await p.instanceBeat?.stop();
        await p.listener.stop();
        await markInstanceStopped(p.db.sql, identity.bootId).catch(() => {});
        await p.db.close();
      }
      if (embedded) await (embedded as EmbeddedDatabase).stop();
      // The last spans (the settlements of the drain) go out before the process ends.
      await tracer.shutdown().catch((err) => log.warn({ err: String(err) }, "shutdown: spans not exported"));
      log.info("shutdown: done");
    })();
    return stopping;
  };
  const stop = () => shutdown(false);
  const drain = () => shutdown(true);

  const holding = (): Holding => ({
    sockets: sockets.count,
    socketCalls: sockets.callsInFlight,
    sseStreams: sse.count,
    subscribers: parts?.feeds.subscriberCount ?? 0,
    feeds: parts?.feeds.feedCount ?? 0,
    longPolls: parts?.tasks.watch.waiters ?? 0,
    watchedTasks: parts?.tasks.watch.tasks ?? 0,
  });

  return { url, identity, started, stop, drain, holding };
}

interface Parts {
  db: Database;
  listener: PgListener;
  eventLog: EventLog;
  feeds: SessionFeeds;
  sessions: SessionService;
  tasks: TaskService;
  events: EventService;
  worker: Worker;
  sweeper: Sweeper;
  pool: ConversationPool;
  announcer: QueuePositionAnnouncer;
  instances: InstanceService;
  permissions: Permissions;
  checkpoints: CheckpointService;
  upstreamOrphans: UpstreamOrphans;
  webhooks: DeliveryWorker;
  instanceBeat?: TimedLoop;
}

function assemble(
  config: Config,
  log: Logger,
  db: Database,
  bus: ChangeBus,
  identity: Identity,
  registry: ReturnType<typeof loadAgentRegistry>,
  workspaceRoots: string[],
  metrics: MetricsReporter & DeliveryReporter,
  tenants: TenantDirectory,
  clock: Clock,
  tracer: Tracer,
): Parts {
  const feeds = new SessionFeeds(db, bus, log, config.pollMs, clock);
  // The one commit path (domain/committer.ts), the event log its batching strategy.
  const committer = new Committer(db, bus, log, feeds, metrics, {
    flushMs: config.eventFlushMs,
    flushMax: config.eventFlushMax,
    lanes: config.eventFlushLanes,
    onFlush: (seconds) => metrics.eventFlush(seconds),
    clock,
    tracer,
  });
  const eventLog = committer.eventLog;
  const rt: Runtime = {
    config,
    db,
    log,
    bus,
    eventLog,
    identity,
    metrics,
    committer,
    tenants,
    clock,
    tracer,
  };
  const listener = new PgListener(db.url, `mooring-listen:${identity.instanceId}`, bus, log, clock);
  const tenantRoots = new TenantRoots(tenants);
  const sessions = new SessionService(rt, registry, drivers, workspaceRoots, tenantRoots);
  const events = new EventService(db, sessions);
  const pool = new ConversationPool(
    config.agentIdleMs,
    config.contextWindow,
    log,
    {
      workspaceRoots,
      tenantRoots: (tenant) => tenantRoots.of(tenant),
      agentEnvDeny: config.agentEnvDeny,
      recap: (sessionId, budget, recapLog) => readCarryOver(db.sql, sessionId, budget, recapLog),
      transcripts:
        config.transcriptMaxBytes > 0
          ? (sessionId) => sessionTranscripts(db.sql, sessionId, config.transcriptMaxBytes)
          : undefined,
      upstreamSilentMs: config.upstreamSilentMs,
      upstreamLimits: {
        maxMessageBytes: config.upstreamMaxMessageBytes,
        maxEventBytes: config.upstreamMaxEventBytes,
        maxBodyBytes: config.upstreamMaxBodyBytes,
        pollMinMs: config.upstreamPollMinMs,
      },
      clock,
    },
    metrics,
  );
  const recovery = new Recovery(rt);
  const permissions = new Permissions(rt);
  const checkpoints = new CheckpointService(rt, sessions, workspaceRoots, tenantRoots);
  const worker = new Worker(rt, sessions, registry, drivers, pool, recovery, permissions, checkpoints);
  const tasks = new TaskService(rt, sessions, worker);
  const sweeper = new Sweeper(rt, recovery);
  const announcer = new QueuePositionAnnouncer(rt);
  // A running turn is cancelled by the archive; an idle warm agent is closed right away.
  // Archives here and, through their notification (channel mooring_archived), on other instances.
  bus.on("archived", (sessionId) => pool.closeArchived(sessionId));
  // An archived session's checkpoints are garbage: its refs and rows go (on the host that has them).
  bus.on("archived", (sessionId) => void checkpoints.collect(sessionId));
  const instances = new InstanceService(db, identity, config.leaseMs, tokensRequired(config), bus, committer);
  const upstreamOrphans = new UpstreamOrphans(rt, registry, drivers);
  return {
    db,
    listener,
    eventLog,
    feeds,
    sessions,
    tasks,
    events,
    worker,
    sweeper,
    pool,
    announcer,
    instances,
    permissions,
    checkpoints,
    upstreamOrphans,
    webhooks: new DeliveryWorker(db, committer, tenants.list(), config, log, metrics, bus, clock, tracer),
  };
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

function need(parts: Parts | null): Parts {
  if (!parts) throw new Error("gateway not started");
  return parts;
}

/** `select 1` within a second: a readiness probe answers promptly even while the database hangs. */
async function probeDatabase(db: Database): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), 1000);
  });
  const probe = db.sql`select 1`.then(
    () => true,
    () => false,
  );
  try {
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The query's answer, or null when it fails or takes over a second (a scrape must not hang). */
async function withinASecond<T>(query: Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), 1000);
  });
  try {
    return await Promise.race([query.catch(() => null), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * At startup the database may still be coming up, or go away again between the first answer and
 * the migrations (a restart, a failover, a connection terminated while it opened): wait for it,
 * then run `steps` (migrate and register, or reconcile; each safe to repeat) and return what they
 * answer, starting over with backoff whenever the database is away, instead of crashing. Any other
 * error from `steps` fails the startup.
 */
async function prepareDatabase<T>(
  db: Database,
  log: Logger,
  stopping: () => boolean,
  steps: () => Promise<T>,
): Promise<T> {
  let answered = false;
  return await retrying(
    retryPolicies.startup,
    async () => {
      answered = false;
      await db.sql`select 1`;
      answered = true;
      return await steps();
    },
    {
      retryable: (err) => !stopping() && (!answered || isDatabaseUnavailable(err)),
      onRetry: (err, retryInMs) =>
        log.warn({ err: String(err), retryInMs }, "database unreachable at startup; retrying"),
    },
  );
}
