/**
 * What the domain tells the metrics (docs/metrics.md). The domain depends on this interface only;
 * src/metrics/gateway-metrics.ts owns the prom-client objects and is passed in by src/gateway.ts.
 */
export type SpawnKind = "new" | "resume" | "fresh_fallback";

export interface MetricsReporter {
  /** A turn this instance claimed started, after waiting `seconds` in the queue. */
  taskStarted(seconds: number): void;
  /** A turn this instance ran was settled `seconds` after it started. */
  taskRan(seconds: number): void;
  /** A submit was refused with this error code (GATEWAY_BUSY, SESSION_BUSY, ...). */
  submitRefused(code: string): void;
  /** One event-log flush committed (or gave up) after `seconds`. */
  eventFlush(seconds: number): void;
  /** Events this instance committed (agent events and state changes), terminal ones included. */
  eventsCommitted(events: readonly { type: string }[]): void;
  /** The Notifier committed one transaction of notifications (after the commits they describe). */
  notificationsSent(): void;
  /** An agent process was started for a session. */
  agentSpawned(agent: string, kind: SpawnKind): void;
  /** One session was deleted with its rows (`rows`: how many, by table), by the retention sweep or a purge request. */
  sessionPurged(trigger: PurgeTrigger, rows: Readonly<Record<string, number>>): void;
}

/** What deleted a session: the retention sweep, or `DELETE /v1/sessions/:id?purge=true`. */
export type PurgeTrigger = "retention" | "request";

/** For parts built without metrics (unit tests). */
export const noMetrics: MetricsReporter = {
  taskStarted() {},
  taskRan() {},
  submitRefused() {},
  eventFlush() {},
  eventsCommitted() {},
  notificationsSent() {},
  agentSpawned() {},
  sessionPurged() {},
};

/** Seconds between two database times, never negative (clock steps). */
export function secondsBetween(from: Date | null, to: Date | null): number | null {
  if (!from || !to) return null;
  return Math.max(0, (to.getTime() - from.getTime()) / 1000);
}
