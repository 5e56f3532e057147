/**
 * GET /metrics (docs/metrics.md): the exposition parses strictly, each metric moves as
 * its event happens (submit, refusal, start, completion, cancel, socket and stream open and close),
 * tokens apply unless MOORING_METRICS_PUBLIC, and a gateway without its database still answers.
 */
import { pino } from "pino";
import { beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { type Gateway, startGateway } from "../../src/gateway.js";
import { call, eventually, testEnv } from "../support/gateway.js";
import { type Exposition, parseExposition } from "../support/prometheus.js";
import { createSession, submit, submitOk, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { WsClient } from "../support/ws-client.js";

// The file's database; each test or describe starts the gateway it needs on it.
const t = useGateway({ workspace: true, start: false });

async function scrape(url: string, headers: Record<string, string> = {}): Promise<Exposition> {
  const res = await fetch(`${url}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/** Scrape until `check` holds (gauges read on scrape; the gate is cached up to a second). */
async function scrapeUntil(url: string, check: (m: Exposition) => boolean): Promise<Exposition> {
  return eventually(async () => {
    const m = await scrape(url);
    return check(m) ? m : null;
  });
}

describe("a gateway's metrics", () => {
  let gw: Gateway;

  beforeAll(async () => {
    gw = await t.startGateway({ MOORING_MAX_ACTIVE: "1", MOORING_MAX_QUEUED: "1" });
  });

  it("declares every metric with its type, and the default process metrics", async () => {
    const m = await scrape(gw.url);
    const expected: Record<string, string> = {
      mooring_gate_active: "gauge",
      mooring_gate_queued: "gauge",
      mooring_gate_max_active: "gauge",
      mooring_gate_max_queued: "gauge",
      mooring_tasks_total: "counter",
      mooring_task_queue_seconds: "histogram",
      mooring_task_run_seconds: "histogram",
      mooring_submit_refused_total: "counter",
      mooring_event_flush_seconds: "histogram",
      mooring_events_appended_total: "counter",
      mooring_notification_transactions_total: "counter",
      mooring_ws_connections: "gauge",
      mooring_sse_connections: "gauge",
      mooring_subscriptions: "gauge",
      mooring_agent_processes: "gauge",
      mooring_agent_spawns_total: "counter",
      mooring_db_up: "gauge",
      process_cpu_user_seconds_total: "counter",
      process_resident_memory_bytes: "gauge",
      nodejs_eventloop_lag_seconds: "gauge",
    };
    for (const [name, type] of Object.entries(expected)) {
      expect(m.types.get(name), name).toBe(type);
      expect(m.help.get(name), name).toBeTruthy();
    }
    expect(m.value("mooring_gate_max_active")).toBe(1);
    expect(m.value("mooring_gate_max_queued")).toBe(1);
    expect(m.value("mooring_db_up")).toBe(1);
    expect(m.value("mooring_tasks_total", { status: "completed" })).toBe(0);
  });

  it("moves with submits, refusals, starts, completions and cancels", async () => {
    const before = await scrape(gw.url);
    const [a, b, c] = [
      await createSession(gw.url, t.workspace),
      await createSession(gw.url, t.workspace),
      await createSession(gw.url, t.workspace),
    ];
    const hang = await submitOk(gw.url, a, { prompt: "[hang]" });
    await waitTask(gw.url, hang.id, (t) => t.status === "running");
    const queued = await submitOk(gw.url, b, { prompt: "[deltas 3] queued" });
    expect(queued.status).toBe("queued");
    const full = await submit(gw.url, c, { prompt: "refused" });
    expect(full.body.error.code).toBe("GATEWAY_BUSY");
    const busy = await submit(gw.url, a, { prompt: "refused", ifBusy: "reject" });
    expect(busy.body.error.code).toBe("SESSION_BUSY");

    let m = await scrapeUntil(
      gw.url,
      (x) => x.value("mooring_gate_active") === 1 && x.value("mooring_gate_queued") === 1,
    );
    expect(m.value("mooring_submit_refused_total", { code: "GATEWAY_BUSY" })).toBe(1);
    expect(m.value("mooring_submit_refused_total", { code: "SESSION_BUSY" })).toBe(1);
    expect(m.value("mooring_agent_processes", { agent: "simulated" })).toBe(1);
    expect(m.value("mooring_agent_spawns_total", { agent: "simulated", kind: "new" })).toBe(1);
    expect(m.value("mooring_task_queue_seconds_count")).toBe(
      (before.value("mooring_task_queue_seconds_count") ?? 0) + 1,
    );
    expect(m.value("mooring_events_appended_total")).toBeGreaterThan(
      before.value("mooring_events_appended_total")!,
    );
    expect(m.value("mooring_event_flush_seconds_count")).toBeGreaterThan(0);
    // The events' heads went out after their commits, in the Notifier's own transactions.
    expect(m.value("mooring_notification_transactions_total")).toBeGreaterThan(
      before.value("mooring_notification_transactions_total") ?? 0,
    );

    expect((await call(gw.url, "POST", `/v1/tasks/${hang.id}/cancel`)).status).toBe(200);
    expect((await waitTask(gw.url, hang.id)).status).toBe("cancelled");
    expect((await waitTask(gw.url, queued.id)).status).toBe("completed");
    m = await scrapeUntil(
      gw.url,
      (x) =>
        x.value("mooring_tasks_total", { status: "completed" }) === 1 &&
        x.value("mooring_tasks_total", { status: "cancelled" }) === 1 &&
        x.value("mooring_gate_active") === 0 &&
        x.value("mooring_gate_queued") === 0,
    );
    expect(m.value("mooring_task_queue_seconds_count")).toBe(
      (before.value("mooring_task_queue_seconds_count") ?? 0) + 2,
    );
    expect(m.value("mooring_task_run_seconds_count")).toBe(
      (before.value("mooring_task_run_seconds_count") ?? 0) + 2,
    );
    // The queued turn waited for the hanging one: its wait is in a bucket above the smallest.
    expect(m.value("mooring_task_queue_seconds_sum")).toBeGreaterThan(0);
    expect(m.value("mooring_agent_spawns_total", { agent: "simulated", kind: "new" })).toBe(2);
  });

  it("counts sockets, SSE streams and subscriptions as they open and close", async () => {
    const session = await createSession(gw.url, t.workspace);
    expect((await scrape(gw.url)).value("mooring_ws_connections")).toBe(0);
    const client = await WsClient.connect(gw.url);
    let m = await scrape(gw.url);
    expect(m.value("mooring_ws_connections")).toBe(1);
    expect(m.value("mooring_subscriptions")).toBe(0);
    await client.call("events.subscribe", { sessionId: session, afterSeq: 0 });
    expect((await scrape(gw.url)).value("mooring_subscriptions")).toBe(1);

    const controller = new AbortController();
    const stream = await fetch(`${gw.url}/v1/sessions/${session}/events`, { signal: controller.signal });
    expect(stream.headers.get("content-type")).toMatch(/text\/event-stream/);
    m = await scrapeUntil(gw.url, (x) => x.value("mooring_sse_connections") === 1);
    expect(m.value("mooring_subscriptions")).toBe(2);

    client.ws.close();
    await client.closed;
    controller.abort();
    m = await scrapeUntil(
      gw.url,
      (x) => x.value("mooring_ws_connections") === 0 && x.value("mooring_sse_connections") === 0,
    );
    expect(m.value("mooring_subscriptions")).toBe(0);
  });
});

describe("access to /metrics", () => {
  it("needs a token when tokens are set", async () => {
    const gw = await t.startGateway({ MOORING_API_TOKENS: "secret" });
    const refused = await call(gw.url, "GET", "/metrics");
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe("UNAUTHORIZED");
    expect((await call(gw.url, "GET", "/metrics", undefined, { authorization: "Bearer wrong" })).status).toBe(
      401,
    );
    const m = await scrape(gw.url, { authorization: "Bearer secret" });
    expect(m.value("mooring_db_up")).toBe(1);
  });

  it("MOORING_METRICS_PUBLIC=true serves it without one; the API still needs one", async () => {
    const gw = await t.startGateway({ MOORING_API_TOKENS: "secret", MOORING_METRICS_PUBLIC: "true" });
    expect((await scrape(gw.url)).value("mooring_db_up")).toBe(1);
    expect((await call(gw.url, "GET", "/v1/gate")).status).toBe(401);
  });

  it("answers while the database is unreachable, with mooring_db_up 0", async () => {
    // Nothing listens on port 1: the gateway listens, then keeps retrying its database.
    const config = loadConfig(testEnv("postgres://127.0.0.1:1/none"));
    const gw = await startGateway(config, pino({ level: "silent" }));
    try {
      expect((await call(gw.url, "GET", "/readyz")).status).toBe(503);
      const m = await scrape(gw.url);
      expect(m.value("mooring_db_up")).toBe(0);
      expect(m.value("mooring_gate_max_active")).toBe(5);
    } finally {
      await gw.stop();
    }
  });
});
