/**
 * Sends the webhook outbox (docs/api.md, Webhooks). Every instance runs one: each run (woken by
 * the notification of a commit that added deliveries or by a freed slot, else every poll
 * interval) claims due deliveries it can sign (sql/webhook-deliveries.ts: one claim at a time
 * over all instances, and a lease, so an attempt is made by one instance at a time and a crashed
 * sender's claim runs out), up to its free
 * concurrency and to each URL's free slots across all instances, and sends them without awaiting
 * them in the poll: a slow receiver holds at most its own slots, and nothing of the gateway's own
 * work ever waits on a delivery. An attempt's outcome is recorded by the claim its end wakes, in
 * the claim's transaction (domain/changes/claim-deliveries.ts): one commit per delivery.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { Database } from "../db/client.js";
import { claimDeliveriesChange, type FinishedAttempt } from "../domain/changes/claim-deliveries.js";
import type { Committer } from "../domain/committer.js";
import type { Tenant } from "../domain/tenants.js";
import type { Service } from "../lib/service.js";
import { TimedLoop } from "../lib/timed-loop.js";
import type { ChangeBus } from "../stream/change-bus.js";
import { type DeliveryRow, webhookRecordAttempt } from "../sql/webhook-deliveries.js";
import { type EndpointRow, webhookSyncEndpoints } from "../sql/webhook-endpoints.js";
import { sendDelivery } from "./send.js";
import { type Clock, realClock } from "../clock.js";
import { type Tracer, tracingOff } from "../tracing/tracer.js";

export interface DeliveryReporter {
  /** One attempt ended: `delivered`, `retry` (due again later) or `failed` (schedule over). */
  webhookAttempt(result: "delivered" | "retry" | "failed"): void;
}

type Options = Pick<
  Config,
  | "webhookRetryScheduleMs"
  | "webhookTimeoutMs"
  | "webhookPollMs"
  | "webhookLeaseMs"
  | "webhookConcurrency"
  | "webhookEndpointConcurrency"
>;

/** The id of a configured endpoint: equal on every instance with the same configuration. */
export function endpointId(tenant: string, url: string, events: readonly string[]): string {
  return createHash("sha256")
    .update(JSON.stringify([tenant, url, [...events].sort()]))
    .digest("hex")
    .slice(0, 32);
}

/** The wait before the next attempt after `attempts` failed ones, with ±20 % jitter; null: give up. */
export function retryDelay(schedule: readonly number[], attempts: number): number | null {
  const base = schedule[attempts - 1];
  if (base === undefined) return null;
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

export class DeliveryWorker implements Service {
  readonly name = "webhook deliveries";
  private readonly loop: TimedLoop;
  private readonly secrets = new Map<string, string>();
  private readonly turnSecrets = new Map<string, string>();
  private readonly endpoints: EndpointRow[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  /** Attempts that ended, recorded by the next claim's transaction. */
  private readonly finished: (FinishedAttempt & { url: string })[] = [];

  constructor(
    private readonly db: Database,
    /** The claim is a state change like any other (a lease on the deliveries it takes). */
    private readonly committer: Committer,
    tenants: Tenant[],
    private readonly options: Options,
    private readonly log: Logger,
    private readonly reporter: DeliveryReporter,
    bus: ChangeBus,
    clock: Clock = realClock,
    /** Each attempt of a turn's delivery is a span in the turn's trace. */
    private readonly tracer: Tracer = tracingOff,
  ) {
    for (const tenant of tenants) {
      for (const endpoint of tenant.webhooks) {
        const id = endpointId(tenant.name, endpoint.url, endpoint.events);
        this.secrets.set(id, endpoint.secret);
        this.endpoints.push({ id, tenant: tenant.name, url: endpoint.url, events: endpoint.events });
      }
      if (tenant.webhookSecret) this.turnSecrets.set(tenant.name, tenant.webhookSecret);
    }
    this.loop = new TimedLoop(
      options.webhookPollMs,
      () => this.poll(),
      (err) => log.warn({ err: String(err) }, "webhook poll failed; retrying"),
      clock,
    );
    // A commit that added deliveries notifies every instance (the outbox trigger): claim at once
    // instead of a poll interval later.
    bus.on("webhooks", () => this.loop.wake());
  }

  /** Publish this instance's endpoints (the outbox trigger matches events against them). */
  async register(): Promise<void> {
    await webhookSyncEndpoints(this.db.sql, this.endpoints);
  }

  /** Publishes the endpoints (a failure is logged: the deliveries already queued still go), then claims. */
  async start(): Promise<void> {
    await this.register().catch((err) =>
      this.log.error({ err: String(err) }, "webhook endpoints not published"),
    );
    this.loop.start(true);
  }

  /** No new claim; waits for attempts in flight (each bounded by the timeout). */
  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.all([...this.inFlight]);
    // What ended after the last claim.
    await this.recordEach(this.finished.splice(0));
  }

  private async poll(): Promise<void> {
    const free = this.options.webhookConcurrency - this.inFlight.size;
    const finished = this.finished.splice(0);
    if (finished.length === 0 && (free <= 0 || (this.secrets.size === 0 && this.turnSecrets.size === 0)))
      return;
    let result: { claimed: DeliveryRow[]; recorded: boolean[] };
    try {
      result = await this.committer.commit(
        claimDeliveriesChange(
          {
            endpoints: [...this.secrets.keys()],
            turnTenants: [...this.turnSecrets.keys()],
            limit: Math.max(free, 0),
            leaseMs: this.options.webhookLeaseMs,
            perEndpoint: this.options.webhookEndpointConcurrency,
            // Read only to continue the turn's trace (attempt()).
            traceContext: this.tracer.on,
          },
          finished,
        ),
      );
    } catch (err) {
      // Each recorded on its own, as if there were no claim: one record that cannot be written
      // fails alone instead of every claim after it. One not written is sent again once its
      // lease runs out (at least once).
      await this.recordEach(finished);
      throw err;
    }
    for (const [i, f] of finished.entries()) this.recorded(f, result.recorded[i]);
    for (const delivery of result.claimed) {
      // A slot is free again: its outcome is recorded, and what waited for it (here or for its
      // URL) is claimed, by the next claim, woken now.
      const attempt = this.attempt(delivery).finally(() => {
        this.inFlight.delete(attempt);
        this.loop.wake();
      });
      this.inFlight.add(attempt);
    }
  }

  /** Records each attempt by itself (a failure: its lease runs out and it is sent again). */
  private async recordEach(finished: (FinishedAttempt & { url: string })[]): Promise<void> {
    for (const f of finished) {
      try {
        this.recorded(f, await webhookRecordAttempt(this.db.sql, f.id, f.lease, f.outcome));
      } catch (err) {
        this.log.warn({ err: String(err), deliveryId: f.id }, "webhook attempt not recorded");
      }
    }
  }

  /** Reports a recorded attempt; one fenced out (its lease ran out or a retry reset it) belongs to nobody now. */
  private recorded(f: FinishedAttempt & { url: string }, recorded: boolean): void {
    if (!recorded) return;
    const { outcome } = f;
    this.reporter.webhookAttempt(outcome.ok ? "delivered" : outcome.retryInMs === null ? "failed" : "retry");
    // The URL's query may hold a token of the receiver's: only its origin and path are logged.
    const url = new URL(f.url);
    this.log.debug(
      { deliveryId: f.id, url: `${url.origin}${url.pathname}`, status: outcome.statusCode, ok: outcome.ok },
      "webhook attempt",
    );
  }

  private async attempt(delivery: DeliveryRow): Promise<void> {
    const secret = delivery.endpointId
      ? this.secrets.get(delivery.endpointId)
      : this.turnSecrets.get(delivery.tenant);
    if (!secret) return; // claimed only when known; the lease runs out for an instance that knows it
    // Traced: the attempt continues its turn's trace (the receiver gets its traceparent).
    const span =
      this.tracer.on && delivery.traceContext
        ? this.tracer.span("mooring.webhook.delivery", delivery.traceContext, {
            "mooring.webhook.delivery.id": delivery.id,
            "mooring.webhook.event": delivery.eventType,
            "mooring.webhook.attempt": delivery.attempts + 1,
            "mooring.session.id": delivery.sessionId,
          })
        : null;
    const result = await sendDelivery(
      delivery,
      secret,
      this.options.webhookTimeoutMs,
      span?.traceparent ?? null,
    );
    const retryInMs = result.ok
      ? null
      : retryDelay(this.options.webhookRetryScheduleMs, delivery.attempts + 1);
    if (span) {
      span.set({
        "mooring.webhook.ok": result.ok,
        ...(result.statusCode !== null ? { "http.response.status_code": result.statusCode } : {}),
      });
      if (!result.ok) span.fail(retryInMs === null ? "WEBHOOK_FAILED" : "WEBHOOK_RETRY");
      span.end();
    }
    this.finished.push({
      id: delivery.id,
      url: delivery.url,
      lease: delivery.leaseUntil!,
      outcome: { ...result, retryInMs },
    });
  }
}
