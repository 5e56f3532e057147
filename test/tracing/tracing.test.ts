/**
 * Tracing (docs/operations.md, Tracing): with OTEL_EXPORTER_OTLP_ENDPOINT set, the gateway exports
 * one trace per turn over OTLP/HTTP to a receiver on loopback (test/support/otlp-receiver.ts),
 * its spans linked submit → admission → claim → turn → agent start, flushes, fan-out →
 * settlement; a client's traceparent (HTTP header, JSON-RPC `_meta`) is the parent of it all, the
 * Task and the turn's log lines carry the trace id, and no attribute holds the prompt, the
 * agent's output or a token.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { AcpTestClient } from "../support/acp-client.js";
import { call, eventually, type TestGateway, testEnv } from "../support/gateway.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../support/otlp-receiver.js";
import { createSession, submit, waitPermission, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { type Receiver, startReceiver } from "../support/webhook-receiver.js";

const TOKEN = "tok-SECRET-tracing-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };
const SECRET_PROMPT = "PROMPT-SECRET-kestrel";
const HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

// The gateway starts once the receivers listen (its env names their URLs).
const gt = useGateway({ workspace: true, start: false });
let receiver: OtlpReceiver;
let hooks: Receiver;
let gw: TestGateway;
let workspace: string;
const logs: Record<string, any>[] = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  hooks = await startReceiver(HOOK_SECRET);
  workspace = gt.workspace;
  gw = await gt.startGateway(
    {
      MOORING_API_TOKENS: TOKEN,
      MOORING_INSTANCE_ID: "trace-a",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "mooring-under-test",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      MOORING_WEBHOOKS: JSON.stringify([{ url: hooks.url, secret: HOOK_SECRET, events: ["task.completed"] }]),
    },
    { onLog: (record) => logs.push(record) },
  );
});
afterAll(async () => {
  // Before the receivers close: its last spans and webhooks go out as it stops.
  await gw?.stop();
  await receiver?.close();
  await hooks?.close();
});

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";

function traceOf(spans: ReceivedSpan[], traceId: string) {
  return spans.filter((s) => s.traceId === traceId);
}

function one(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const found = spans.filter((s) => s.name === name);
  expect(found.map((s) => s.name)).toEqual([name]);
  return found[0];
}

/** The turn's trace once its settlement span arrived (the last span of a turn). */
async function settledTrace(traceId: string, taskId: string) {
  const spans = await receiver.waitFor((all) =>
    traceOf(all, traceId).some(
      (s) => s.name === "mooring.turn" && s.attributes["mooring.task.id"] === taskId,
    ),
  );
  return traceOf(spans, traceId);
}

it("exports one trace per turn under the client's traceparent, submit to settlement", async () => {
  const sessionId = await createSession(gw.url, workspace, {}, auth);
  const answer = await submit(
    gw.url,
    sessionId,
    { prompt: `${SECRET_PROMPT} [deltas 3] [tool 200] [tokens 1000]` },
    { ...auth, traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` },
  );
  expect(answer.status).toBe(202);
  expect(answer.body.traceId).toBe(CLIENT_TRACE);
  const task = await waitTask(gw.url, answer.body.id, undefined, 30_000, auth);
  expect(task.status).toBe("completed");
  expect(task.traceId).toBe(CLIENT_TRACE);

  const spans = await settledTrace(CLIENT_TRACE, task.id);
  const submitSpan = one(spans, "mooring.submit");
  // The client's span is the parent: the trace is the client's.
  expect(submitSpan.parentSpanId).toBe(CLIENT_SPAN);
  expect(submitSpan.attributes["mooring.task.id"]).toBe(task.id);
  expect(submitSpan.resource["service.name"]).toBe("mooring-under-test");
  expect(submitSpan.resource["service.instance.id"]).toBe("trace-a");
  const admission = one(spans, "mooring.admission");
  expect(admission.parentSpanId).toBe(submitSpan.spanId);
  expect(admission.attributes["mooring.admission.batch_size"]).toBeGreaterThanOrEqual(1);
  expect(typeof admission.attributes["mooring.admission.gate_lock_wait_ms"]).toBe("number");
  const claim = one(spans, "mooring.claim");
  expect(claim.parentSpanId).toBe(submitSpan.spanId);
  expect(claim.attributes).toMatchObject({ "mooring.instance.id": "trace-a", "mooring.attempt": 1 });
  const turn = one(spans, "mooring.turn");
  expect(turn.parentSpanId).toBe(submitSpan.spanId);
  expect(turn.attributes).toMatchObject({ "mooring.task.id": task.id, "mooring.agent.start": "new" });
  const start = one(spans, "mooring.agent.start");
  expect(start.parentSpanId).toBe(turn.spanId);
  expect(start.attributes["mooring.agent.start"]).toBe("new");
  const settle = one(spans, "mooring.settle");
  expect(settle.parentSpanId).toBe(turn.spanId);
  expect(settle.attributes).toMatchObject({
    "mooring.task.status": "completed",
    "mooring.settle.outcome": "settled",
  });
  // Flushes and fan-outs of the turn's events, under the turn, counting them.
  const flushes = spans.filter((s) => s.name === "mooring.flush");
  expect(flushes.length).toBeGreaterThan(0);
  expect(flushes.every((s) => s.parentSpanId === turn.spanId)).toBe(true);
  // message.delta x3, tool.call, tool.result, message, usage (task.started went in with the claim)
  expect(flushes.reduce((n, s) => n + Number(s.attributes["mooring.flush.events"]), 0)).toBe(7);
  expect(flushes.some((s) => s.attributes["mooring.flush.settles"] === true)).toBe(true);
  const fanouts = spans.filter((s) => s.name === "mooring.fanout");
  expect(fanouts.length).toBeGreaterThan(0);
  expect(fanouts.every((s) => s.parentSpanId === turn.spanId)).toBe(true);
  // One trace: every span of it descends from the client's span.
  const ids = new Set([CLIENT_SPAN, ...spans.map((s) => s.spanId)]);
  expect(spans.every((s) => ids.has(s.parentSpanId))).toBe(true);

  // The webhook of its completion continues the trace, from the task's stored context.
  const withHook = await receiver.waitFor((all) =>
    traceOf(all, CLIENT_TRACE).some((s) => s.name === "mooring.webhook.delivery"),
  );
  const delivery = one(traceOf(withHook, CLIENT_TRACE), "mooring.webhook.delivery");
  expect(delivery.parentSpanId).toBe(submitSpan.spanId);
  expect(delivery.attributes).toMatchObject({
    "mooring.webhook.event": "task.completed",
    "mooring.webhook.ok": true,
  });
  expect(hooks.unique.some((h) => h.body.data.taskId === task.id)).toBe(true);

  // From a log line to the trace: the turn's lines carry its trace id.
  const settledLine = logs.find((l) => l.msg === "turn settled" && l.taskId === task.id);
  expect(settledLine?.traceId).toBe(CLIENT_TRACE);
});

it("takes a traceparent from JSON-RPC _meta; without one a submit starts its own trace", async () => {
  const sessionId = await createSession(gw.url, workspace, {}, auth);
  const rpcTrace = "0af7651916cd43dd8448eb211c80319c";
  const rpc = await call(
    gw.url,
    "POST",
    "/v1/rpc",
    {
      jsonrpc: "2.0",
      id: 1,
      method: "turns.submit",
      params: {
        sessionId,
        prompt: "[deltas 1]",
        _meta: { traceparent: `00-${rpcTrace}-b7ad6b7169203331-01` },
      },
    },
    auth,
  );
  expect(rpc.body.result.traceId).toBe(rpcTrace);
  await waitTask(gw.url, rpc.body.result.id, undefined, 30_000, auth);
  const rpcSpans = await settledTrace(rpcTrace, rpc.body.result.id);
  expect(one(rpcSpans, "mooring.submit").parentSpanId).toBe("b7ad6b7169203331");

  // No traceparent (and a malformed one is the same): the submit span is the trace's root.
  const own = await submit(
    gw.url,
    sessionId,
    { prompt: "[deltas 1]" },
    { ...auth, traceparent: "00-zz-bad-01" },
  );
  expect(own.status).toBe(202);
  expect(own.body.traceId).toMatch(/^[0-9a-f]{32}$/);
  expect(own.body.traceId).not.toBe(rpcTrace);
  await waitTask(gw.url, own.body.id, undefined, 30_000, auth);
  const ownSpans = await settledTrace(own.body.traceId, own.body.id);
  const root = one(ownSpans, "mooring.submit");
  expect(root.parentSpanId).toBe("");
  expect(one(ownSpans, "mooring.turn").parentSpanId).toBe(root.spanId);
});

it("takes a traceparent from ACP _meta on session/prompt", async () => {
  const acpTrace = "1af7651916cd43dd8448eb211c80319d";
  const c = AcpTestClient.http(gw.url, TOKEN);
  try {
    await c.initialize();
    const { sessionId } = await c.agent.request("session/new", {
      cwd: workspace,
      mcpServers: [],
      _meta: { mooring: { agent: "simulated" } },
    });
    const answer = await c.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "[deltas 1]" }],
      _meta: { traceparent: `00-${acpTrace}-d7ad6b7169203332-01` },
    });
    expect(answer.stopReason).toBe("end_turn");
  } finally {
    c.close();
  }
  const spans = traceOf(
    await receiver.waitFor((all) => traceOf(all, acpTrace).some((s) => s.name === "mooring.settle")),
    acpTrace,
  );
  expect(one(spans, "mooring.submit").parentSpanId).toBe("d7ad6b7169203332");
  expect(one(spans, "mooring.turn").parentSpanId).toBe(one(spans, "mooring.submit").spanId);
});

it("spans a permission wait under the turn", async () => {
  const sessionId = await createSession(gw.url, workspace, {}, auth);
  const answer = await submit(gw.url, sessionId, { prompt: "[ask bash]" }, auth);
  expect(answer.status).toBe(202);
  const request = await waitPermission(gw.url, answer.body.id, 20_000, auth);
  const responded = await call(
    gw.url,
    "POST",
    `/v1/tasks/${answer.body.id}/permissions/${request.requestId}`,
    { optionId: "allow" },
    auth,
  );
  expect(responded.status).toBe(200);
  const task = await waitTask(gw.url, answer.body.id, undefined, 30_000, auth);
  expect(task.status).toBe("completed");
  const spans = await settledTrace(task.traceId, task.id);
  const turn = one(spans, "mooring.turn");
  expect(one(spans, "mooring.permission").parentSpanId).toBe(turn.spanId);
});

it("puts no prompt, agent output or token in any exported attribute", async () => {
  // Everything exported so far, raw: the secret prompt's turn completed above, with output text.
  expect(receiver.spans.length).toBeGreaterThan(0);
  expect(receiver.rejected).toBe(0);
  const everything = receiver.bodies.join("\n");
  expect(everything).not.toContain(SECRET_PROMPT);
  expect(everything).not.toContain(TOKEN);
  expect(everything).not.toContain("receiver-secret"); // the webhook URL's own token
  expect(everything).not.toContain("chunk 1"); // the simulated agent's output text
  expect(everything.toLowerCase()).not.toContain("bearer");
});

it("with tracing off, a client's traceparent is still the Task's traceId and in the turn's log lines", async () => {
  const offLogs: Record<string, any>[] = [];
  const off = await gt.startGateway(
    { MOORING_API_TOKENS: TOKEN, MOORING_INSTANCE_ID: "trace-off" },
    { onLog: (record) => offLogs.push(record) },
  );
  try {
    const exported = receiver.spans.length;
    const sessionId = await createSession(off.url, workspace, {}, auth);
    const untraced = await submit(off.url, sessionId, { prompt: "[deltas 1]" }, auth);
    expect(untraced.body.traceId).toBeNull();
    await waitTask(off.url, untraced.body.id, undefined, 30_000, auth);
    const offTrace = "2af7651916cd43dd8448eb211c80319e";
    const traced = await submit(
      off.url,
      sessionId,
      { prompt: "[deltas 1]" },
      {
        ...auth,
        traceparent: `00-${offTrace}-e7ad6b7169203333-01`,
      },
    );
    expect(traced.body.traceId).toBe(offTrace);
    await waitTask(off.url, traced.body.id, undefined, 30_000, auth);
    // Logged once the settlement committed, so possibly after the task reads as completed.
    const line = await eventually(async () =>
      offLogs.find((l) => l.msg === "turn settled" && l.taskId === traced.body.id),
    );
    expect(line.traceId).toBe(offTrace);
    // Nothing of this gateway's turns was exported (the receiver counts every span it got).
    expect(
      receiver.spans.slice(exported).filter((s) => s.resource["service.instance.id"] === "trace-off"),
    ).toEqual([]);
  } finally {
    await off.stop();
  }
});

it("a receiver that is away costs dropped spans, said once in the log, never a turn", async () => {
  const away = await startOtlpReceiver();
  const url = away.url;
  await away.close(); // nothing listens there now
  const awayLogs: Record<string, any>[] = [];
  const gwAway = await gt.startGateway(
    {
      MOORING_API_TOKENS: TOKEN,
      MOORING_INSTANCE_ID: "trace-away",
      OTEL_EXPORTER_OTLP_ENDPOINT: url,
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_EXPORTER_OTLP_HEADERS: `x-api-key=${TOKEN}`,
      // The exporter retries a refused export with backoff until this deadline (10 s by default),
      // and says the spans were dropped only then.
      OTEL_EXPORTER_OTLP_TIMEOUT: "1000",
    },
    { onLog: (record) => awayLogs.push(record) },
  );
  try {
    const sessionId = await createSession(gwAway.url, workspace, {}, auth);
    for (let i = 0; i < 2; i++) {
      const answer = await submit(gwAway.url, sessionId, { prompt: "[deltas 1]" }, auth);
      expect((await waitTask(gwAway.url, answer.body.id, undefined, 30_000, auth)).status).toBe("completed");
    }
    const said = await eventually(async () => {
      const lines = awayLogs.filter((l) => l.msg?.startsWith("tracing: spans not exported"));
      return lines.length > 0 ? lines : null;
    });
    expect(said).toHaveLength(1);
    // The export headers (an API key) are never logged.
    expect(JSON.stringify(awayLogs)).not.toContain(TOKEN);
  } finally {
    await gwAway.stop();
  }
});

it("is off without an OTLP endpoint, or with OTEL_SDK_DISABLED / OTEL_TRACES_EXPORTER=none", () => {
  const base = testEnv("postgres://x@127.0.0.1:1/none");
  expect(loadConfig(base).tracing).toBeNull();
  expect(
    loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }).tracing,
  ).toBeNull();
  expect(
    loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })
      .tracing,
  ).toBeNull();
  const on = loadConfig({
    ...base,
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
    OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=abc%20def",
    OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.name=gw",
    OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
    OTEL_TRACES_SAMPLER_ARG: "0.25",
  }).tracing;
  expect(on).toMatchObject({
    url: "http://collector:4318/v1/traces",
    headers: { "x-api-key": "abc def" },
    serviceName: "gw",
    sampler: "parentbased_traceidratio",
    samplerRatio: 0.25,
  });
  // The signal's own endpoint is used as given.
  expect(
    loadConfig({ ...base, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://t.example/otlp/traces" }).tracing?.url,
  ).toBe("https://t.example/otlp/traces");
  // gRPC would send HTTP to a gRPC port: refused with the variable named.
  expect(() =>
    loadConfig({
      ...base,
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4317",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
    }),
  ).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL=grpc/);
});
