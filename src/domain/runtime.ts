/**
 * What every domain service shares: configuration, the database, the log, the change bus, the
 * event log, the committer and who this process is.
 */
import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import type { Config } from "../config.js";
import type { Database } from "../db/client.js";
import type { ChangeBus } from "../stream/change-bus.js";
import type { EventLog } from "../stream/event-log.js";
import type { MetricsReporter } from "../metrics/reporter.js";
import type { Committer } from "./committer.js";
import type { TenantDirectory } from "./tenants.js";
import type { Tracer } from "../tracing/tracer.js";

export interface Identity {
  instanceId: string;
  bootId: string;
  host: string;
  pid: number;
  version: string;
}

export interface Runtime {
  config: Config;
  db: Database;
  log: Logger;
  bus: ChangeBus;
  eventLog: EventLog;
  identity: Identity;
  metrics: MetricsReporter;
  /** Sends state changes and applies what they set off (domain/committer.ts). */
  committer: Committer;
  /** The tenants and their limits, which the gate's SQL applies (docs/tenants.md). */
  tenants: TenantDirectory;
  /** The gateway's time for what it times itself (src/clock.ts); the database keeps its own now(). */
  clock: Clock;
  /** Spans of a turn's life (src/tracing/tracer.ts); the no-op tracer when tracing is off. */
  tracer: Tracer;
}
