/**
 * An event log as the gateway builds it: the batching strategy of a committer
 * (domain/committer.ts), whose flushes it sends and whose committed events it publishes.
 */
import type { Logger } from "pino";
import type { Database } from "../../src/db/client.js";
import { Committer } from "../../src/domain/committer.js";
import { noMetrics } from "../../src/metrics/reporter.js";
import type { StoredEvent } from "../../src/sql/event-append.js";
import { ChangeBus } from "../../src/stream/change-bus.js";
import type { EventLog, EventLogOptions } from "../../src/stream/event-log.js";

/** The event log of a committer on `db`; each flush's committed events go to `publish`. */
export function eventLogOn(
  db: Database,
  options: EventLogOptions,
  log: Logger,
  publish: (events: StoredEvent[]) => void = () => {},
): EventLog {
  return new Committer(db, new ChangeBus(), log, { publish }, noMetrics, options).eventLog;
}
