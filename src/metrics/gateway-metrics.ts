/**
 * The gateway's Prometheus metrics (docs/metrics.md): the one module that owns prom-client objects.
 * One registry per gateway instance, so several gateways in one process (the tests) keep their
 * figures apart. Counters and histograms move as the domain reports (MetricsReporter); gauges are
 * read from their sources when scraped.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { isTerminal, type TaskStatus, terminalStatuses } from "../contract/task-status.js";
import type { DeliveryReporter } from "../webhooks/delivery-worker.js";
import type { MetricsReporter, PurgeTrigger, SpawnKind } from "./reporter.js";

/** A gate read on scrape is reused for this long: many scrapers cost one query a second at most. */
const GATE_CACHE_MS = 1000;

export interface MetricSources {
  maxActive: number;
  maxQueued: number;
  /** Global gate counts from the database; null when it cannot be read (not started, unreachable). */
  gate(): Promise<{ active: number; queued: number } | null>;
  /** Open WebSockets, SSE streams and event subscriptions of this instance. */
  connections(): { ws: number; sse: number; subscriptions: number; strayResponses: number };
  /** Live agent processes of this instance by agent name. */
  agentProcesses(): Map<string, number>;
  /** Webhook deliveries pending across all instances; null when unreadable. */
  webhookBacklog?(): Promise<number | null>;
}

export class GatewayMetrics implements MetricsReporter, DeliveryReporter {
  readonly registry = new Registry();
  private gateRead: { at: number; value: Promise<{ active: number; queued: number } | null> } | null = null;

  private readonly tasks: Counter<"status">;
  private readonly queueSeconds: Histogram;
  private readonly runSeconds: Histogram;
  private readonly refused: Counter<"code">;
  private readonly flushSeconds: Histogram;
  private readonly appended: Counter;
  private readonly notifications: Counter;
  private readonly spawns: Counter<"agent" | "kind">;
  private readonly webhookAttempts: Counter<"result">;
  private readonly purgedSessions: Counter<"trigger">;
  private readonly purgedRows: Counter<"table">;

  constructor(private readonly sources: MetricSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    const gateGauge = (name: string, help: string, pick: (g: { active: number; queued: number }) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect: async function (this: Gauge) {
          // While the database is unreadable the last value stays; mooring_db_up says why.
          const gate = await metrics.gate();
          if (gate) this.set(pick(gate));
        },
      });
    const metrics = this;
    this.webhookAttempts = new Counter({
      name: "mooring_webhook_deliveries_total",
      help: "Webhook delivery attempts this instance made, by result: delivered, retry (due again later), failed (schedule over).",
      labelNames: ["result"],
      registers,
    });
    new Gauge({
      name: "mooring_webhook_backlog",
      help: "Webhook deliveries pending across all instances (global, from the database).",
      registers,
      collect: async function (this: Gauge) {
        const n = await sources.webhookBacklog?.().catch(() => null);
        if (typeof n === "number") this.set(n);
      },
    });
    gateGauge(
      "mooring_gate_active",
      "Tasks running across all instances (global, from the database).",
      (g) => g.active,
    );
    gateGauge(
      "mooring_gate_queued",
      "Tasks queued across all instances (global, from the database).",
      (g) => g.queued,
    );
    new Gauge({
      name: "mooring_gate_max_active",
      help: "MOORING_MAX_ACTIVE: tasks allowed to run at once.",
      registers,
    }).set(sources.maxActive);
    new Gauge({
      name: "mooring_gate_max_queued",
      help: "MOORING_MAX_QUEUED: tasks allowed to wait at once.",
      registers,
    }).set(sources.maxQueued);
    new Gauge({
      name: "mooring_db_up",
      help: "1 when this instance read the database on this scrape, else 0.",
      registers,
      collect: async function (this: Gauge) {
        this.set((await metrics.gate()) ? 1 : 0);
      },
    });
    const connection = (
      name: string,
      help: string,
      pick: (c: ReturnType<MetricSources["connections"]>) => number,
    ) =>
      new Gauge({
        name,
        help,
        registers,
        collect: function (this: Gauge) {
          this.set(pick(sources.connections()));
        },
      });
    connection("mooring_ws_connections", "Open WebSocket connections on this instance.", (c) => c.ws);
    connection("mooring_sse_connections", "Open SSE streams on this instance.", (c) => c.sse);
    connection(
      "mooring_subscriptions",
      "Event subscriptions (sockets and SSE) on this instance.",
      (c) => c.subscriptions,
    );
    new Counter({
      name: "mooring_ws_stray_responses_total",
      help: "JSON-RPC responses WebSocket peers sent to no call of the gateway's, dropped unanswered.",
      registers,
      collect: function (this: Counter) {
        // The hub counts; the counter shows its figure (it only grows).
        this.reset();
        this.inc(sources.connections().strayResponses);
      },
    });
    new Gauge({
      name: "mooring_agent_processes",
      help: "Live agent processes on this instance (running a turn or warm), by agent.",
      labelNames: ["agent"],
      registers,
      collect: function (this: Gauge<"agent">) {
        this.reset();
        for (const [agent, n] of sources.agentProcesses()) this.set({ agent }, n);
      },
    });
    this.tasks = new Counter({
      name: "mooring_tasks_total",
      help: "Tasks settled by this instance, by terminal status.",
      labelNames: ["status"],
      registers,
    });
    // Present from the start, so rate() and increase() see the first settlement of each.
    for (const status of terminalStatuses) this.tasks.inc({ status }, 0);
    // Turns wait from seconds (a free slot) to MOORING_QUEUE_TIMEOUT_MS (default 10 minutes).
    this.queueSeconds = new Histogram({
      name: "mooring_task_queue_seconds",
      help: "Time from submit to start of the turns this instance started.",
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600],
      registers,
    });
    this.runSeconds = new Histogram({
      name: "mooring_task_run_seconds",
      help: "Time from start to settlement of the turns this instance ran.",
      buckets: [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
      registers,
    });
    this.refused = new Counter({
      name: "mooring_submit_refused_total",
      help: "Submits (new turns) this instance refused, by error code.",
      labelNames: ["code"],
      registers,
    });
    this.flushSeconds = new Histogram({
      name: "mooring_event_flush_seconds",
      help: "Duration of this instance's event-log flushes (one transaction each, retries included).",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers,
    });
    this.appended = new Counter({
      name: "mooring_events_appended_total",
      help: "Session events this instance committed.",
      registers,
    });
    this.notifications = new Counter({
      name: "mooring_notification_transactions_total",
      help: "Transactions of notifications this instance sent after the commits they describe (each commits without waiting for its WAL flush).",
      registers,
    });
    this.purgedSessions = new Counter({
      name: "mooring_sessions_purged_total",
      help: "Archived sessions this instance deleted with all their rows, by trigger: retention (the sweep) or request (a purge).",
      labelNames: ["trigger"],
      registers,
    });
    for (const trigger of ["retention", "request"]) this.purgedSessions.inc({ trigger }, 0);
    this.purgedRows = new Counter({
      name: "mooring_purged_rows_total",
      help: "Rows this instance deleted with purged sessions, by table.",
      labelNames: ["table"],
      registers,
    });
    this.spawns = new Counter({
      name: "mooring_agent_spawns_total",
      help: "Agent processes started, by agent and kind (new, resume, fresh_fallback).",
      labelNames: ["agent", "kind"],
      registers,
    });
  }

  /** The exposition text and its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private gate(): Promise<{ active: number; queued: number } | null> {
    const now = Date.now();
    if (!this.gateRead || now - this.gateRead.at >= GATE_CACHE_MS) {
      this.gateRead = { at: now, value: this.sources.gate().catch(() => null) };
    }
    return this.gateRead.value;
  }

  taskStarted(seconds: number): void {
    this.queueSeconds.observe(seconds);
  }

  taskRan(seconds: number): void {
    this.runSeconds.observe(seconds);
  }

  submitRefused(code: string): void {
    this.refused.inc({ code });
  }

  eventFlush(seconds: number): void {
    this.flushSeconds.observe(seconds);
  }

  notificationsSent(): void {
    this.notifications.inc();
  }

  eventsCommitted(events: readonly { type: string }[]): void {
    this.appended.inc(events.length);
    for (const e of events) {
      // A `task.<status>` event with a terminal status marks the settlement.
      const status = e.type.startsWith("task.") ? (e.type.slice(5) as TaskStatus) : null;
      if (status && isTerminal(status)) this.tasks.inc({ status });
    }
  }

  agentSpawned(agent: string, kind: SpawnKind): void {
    this.spawns.inc({ agent, kind });
  }

  sessionPurged(trigger: PurgeTrigger, rows: Readonly<Record<string, number>>): void {
    this.purgedSessions.inc({ trigger });
    for (const [table, n] of Object.entries(rows)) this.purgedRows.inc({ table }, n);
  }

  webhookAttempt(result: "delivered" | "retry" | "failed"): void {
    this.webhookAttempts.inc({ result });
  }
}
