/**
 * Builds the gateway's parts on an open database, and the one ordered list of its services: started
 * in order, stopped in reverse (lib/service.ts). The order is the dependency order, so the stop
 * order is the shutdown of docs/architecture.md: stop admitting, then stop claiming and give
 * running turns their grace (the worker), release the leases left, close the agents, flush the
 * event log, close the connections, stop the loops and the LISTEN connection, mark the instance
 * stopped, close the pool and the embedded Postgres, export the last spans.
 */
import type { Logger } from "pino";
import { drivers } from "../agents/drivers.js";
import type { AgentRegistry } from "../agents/registry.js";
import type { Clock } from "../clock.js";
import { type Config, tokensRequired } from "../config.js";
import type { Database } from "../db/client.js";
import { untilDatabaseAnswers } from "../db/startup-retry.js";
import { readCarryOver } from "../domain/carry-over.js";
import { CheckpointService } from "../domain/checkpoints.js";
import { Committer } from "../domain/committer.js";
import { ConversationPool } from "../domain/conversation-pool.js";
import { EventService } from "../domain/events.js";
import { InstanceRow } from "../domain/instance-row.js";
import { InstanceService } from "../domain/instances.js";
import { Permissions } from "../domain/permissions.js";
import { QueuePositionAnnouncer } from "../domain/queue-positions.js";
import { forkSourceMovedOn } from "../domain/fork-source.js";
import { Recovery } from "../domain/recovery.js";
import type { Identity, Runtime } from "../domain/runtime.js";
import { SessionService } from "../domain/sessions.js";
import { Sweeper } from "../domain/sweeper.js";
import { TaskService } from "../domain/tasks.js";
import { TenantRoots } from "../domain/tenant-roots.js";
import type { TenantDirectory } from "../domain/tenants.js";
import { sessionTranscripts } from "../domain/transcripts.js";
import { UpstreamOrphans } from "../domain/upstream-orphans.js";
import { Worker } from "../domain/worker.js";
import { type Service, service } from "../lib/service.js";
import type { MetricsReporter } from "../metrics/reporter.js";
import type { ChangeBus } from "../stream/change-bus.js";
import type { EventLog } from "../stream/event-log.js";
import { PgListener } from "../stream/pg-listener.js";
import { SessionFeeds } from "../stream/session-feeds.js";
import type { Tracer } from "../tracing/tracer.js";
import { type DeliveryReporter, DeliveryWorker } from "../webhooks/delivery-worker.js";
import type { StartupSteps } from "./startup-steps.js";

export interface PartsInputs {
  config: Config;
  log: Logger;
  db: Database;
  bus: ChangeBus;
  identity: Identity;
  registry: AgentRegistry;
  workspaceRoots: string[];
  metrics: MetricsReporter & DeliveryReporter;
  tenants: TenantDirectory;
  clock: Clock;
  tracer: Tracer;
  /** True once a shutdown began: the startup's database retries give up. */
  stopping: () => boolean;
  /** The instance heartbeat read back a drain asked through the API. */
  onDrainRequested: () => void;
}

/** Everything of the gateway that needs the database: its domain services and its own services. */
export interface Parts {
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
  instanceRow: InstanceRow;
  permissions: Permissions;
  checkpoints: CheckpointService;
  upstreamOrphans: UpstreamOrphans;
  webhooks: DeliveryWorker;
}

export function composeParts(inputs: PartsInputs): Parts {
  const { config, log, db, bus, identity, registry, workspaceRoots, metrics, tenants, clock, tracer } =
    inputs;
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
      forkSourceMovedOn: (forkedFrom) => forkSourceMovedOn(db.sql, forkedFrom),
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
  const instanceRow = new InstanceRow(
    db,
    identity,
    config.instanceGroup,
    log,
    config.heartbeatMs,
    clock,
    inputs.stopping,
    inputs.onDrainRequested,
  );
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
    instanceRow,
    permissions,
    checkpoints,
    upstreamOrphans,
    webhooks: new DeliveryWorker(db, committer, tenants.list(), config, log, metrics, bus, clock, tracer),
  };
}

/** The tracer's stop: the last spans (the settlements of the drain) go out before the process ends. */
export function tracerService(tracer: Tracer, log: Logger): Service {
  return service(
    "tracer",
    () => {},
    () => tracer.shutdown().catch((err) => log.warn({ err: String(err) }, "shutdown: spans not exported")),
  );
}

/** The services built before the database is there, placed in the list by compose. */
export interface EdgeServices {
  /** Exports the last spans when it stops. */
  tracer: Service;
  /** The pool and the embedded Postgres (gateway/database.ts). */
  database: Service;
  /** The HTTP server (gateway/http-server.ts). */
  http: Service;
}

/**
 * The gateway's services in start order: each needs only what is before it, so the list reversed is
 * the order of the shutdown.
 */
export function gatewayServices(
  parts: Parts,
  edges: EdgeServices,
  log: Logger,
  steps: StartupSteps,
  stopping: () => boolean,
): Service[] {
  return [
    edges.tracer,
    edges.database,
    // Announces the positions the reconcile's expiries moved.
    parts.announcer,
    parts.instanceRow,
    startupReconcile(parts, log, steps, stopping),
    // Feeds and the worker act on what the LISTEN connection hears: it listens before them.
    parts.listener,
    parts.feeds,
    parts.webhooks,
    // After the reconcile: the previous boot's chained turns it interrupted are released upstream.
    parts.upstreamOrphans,
    parts.sweeper,
    // Stops once no turn runs and their last events are flushed, before what it reads from.
    edges.http,
    flushedLog(parts.eventLog, log),
    parts.pool,
    ownLeases(parts, log),
    // Stops claiming at once and gives running turns their grace (Worker.graceMs).
    parts.worker,
    admission(parts),
  ];
}

/**
 * Startup only: settle what this instance's previous boot left running, expired leases and overdue
 * queued tasks, before any turn is claimed (retried while the database is away).
 */
function startupReconcile(parts: Parts, log: Logger, steps: StartupSteps, stopping: () => boolean): Service {
  return service(
    "reconcile",
    async () => {
      // The instance row, just before in the list, is registered.
      steps.mark("registered");
      steps.reconciled = await untilDatabaseAnswers(parts.db, log, stopping, () => parts.sweeper.reconcile());
      steps.mark("reconciled");
    },
    () => {},
  );
}

/** The event log's stop is its final flush. */
function flushedLog(eventLog: EventLog, log: Logger): Service {
  return service(
    eventLog.name,
    () => eventLog.start(),
    async () => {
      await eventLog.stop();
      log.info("shutdown: event log flushed");
    },
  );
}

/**
 * Shutdown only: once the worker drained, what this boot still owns (a claim that never started, a
 * settlement that gave up) is settled interrupted at once, so other instances take the slots now
 * rather than at lease expiry.
 */
function ownLeases(parts: Parts, log: Logger): Service {
  return service(
    "own leases",
    () => {},
    async () => {
      const released = await parts.sweeper.releaseOwnTasks().catch(() => []);
      if (released.length > 0) log.info({ count: released.length }, "shutdown: leases released");
    },
  );
}

/** Submits are taken once every other service runs, and refused (NOT_READY) from the shutdown's first step. */
function admission(parts: Parts): Service {
  return service(
    "admission",
    () => {
      parts.tasks.accepting = true;
    },
    () => {
      parts.tasks.accepting = false;
    },
  );
}
