/**
 * Tracing across instances (docs/operations.md, Tracing): two gateway processes on one database
 * export to one OTLP/HTTP receiver on loopback. A turn submitted on one and run by the other is
 * one trace; so is a turn the other settles after taking over a killed instance's lease. The
 * stored trace context (tasks.trace_context) is what carries it from one process to the other.
 */
import { afterEach, beforeEach, expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../support/otlp-receiver.js";
import { submitOk, waitStatus, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
let receiver: OtlpReceiver;
const procs = new Processes();
useProcessSuite("ws-tracing-", procs, (d, w) => {
  db = d;
  workspace = w;
});
beforeEach(async () => {
  receiver = await startOtlpReceiver();
});
afterEach(async () => {
  await receiver?.close();
});

const traced = (id: string, extra: Record<string, string> = {}) =>
  gatewayEnv(db.url, {
    MOORING_INSTANCE_ID: id,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "50",
    ...extra,
  });

const CLIENT_TRACE = "5af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN = "c7ad6b7169203331";

const inTrace = (spans: ReceivedSpan[], traceId: string) => spans.filter((s) => s.traceId === traceId);
const named = (spans: ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);

it("a turn submitted on one instance and run by another is one trace", { timeout: 120_000 }, async () => {
  // Only b serves group gb: a admits the turn, b claims, runs and settles it.
  const a = await procs.spawn(traced("trace-a"));
  const b = await procs.spawn(traced("trace-b", { MOORING_INSTANCE_GROUP: "gb" }));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const session = await call(a.url, "POST", "/v1/sessions", { workspace, agent: "simulated", group: "gb" });
  expect(session.status).toBe(201);
  const task = await submitOk(
    a.url,
    session.body.id,
    { prompt: "[deltas 2]" },
    {
      traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
    },
  );
  const done = await waitTerminal(a.url, task.id, 60_000);
  expect(done.status).toBe("completed");
  expect(done.traceId).toBe(CLIENT_TRACE);

  const spans = inTrace(
    await receiver.waitFor((all) => named(inTrace(all, CLIENT_TRACE), "mooring.settle").length > 0, 60_000),
    CLIENT_TRACE,
  );
  const [submit] = named(spans, "mooring.submit");
  expect(submit.parentSpanId).toBe(CLIENT_SPAN);
  expect(submit.resource["service.instance.id"]).toBe("trace-a");
  const [claim] = named(spans, "mooring.claim");
  expect(claim.resource["service.instance.id"]).toBe("trace-b");
  expect(claim.parentSpanId).toBe(submit.spanId);
  const [turn] = named(spans, "mooring.turn");
  expect(turn.resource["service.instance.id"]).toBe("trace-b");
  expect(turn.parentSpanId).toBe(submit.spanId);
  const [settle] = named(spans, "mooring.settle");
  expect(settle.parentSpanId).toBe(turn.spanId);
  expect(settle.resource["service.instance.id"]).toBe("trace-b");
});

it("the instance that takes over a killed one's turn settles it in the same trace", {
  timeout: 120_000,
}, async () => {
  const a = await procs.spawn(traced("trace-a"));
  await a.waitReady();
  const session = await call(a.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
  expect(session.status).toBe(201);
  const task = await submitOk(
    a.url,
    session.body.id,
    { prompt: "[sleep 60000]" },
    {
      traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
    },
  );
  expect((await waitStatus(a.url, task.id, "running")).status).toBe("running");
  // a's submit and claim spans are out before it dies (its turn span never ends).
  await receiver.waitFor((all) => {
    const trace = inTrace(all, CLIENT_TRACE);
    return named(trace, "mooring.submit").length > 0 && named(trace, "mooring.claim").length > 0;
  }, 60_000);
  a.kill("SIGKILL");
  await exitedWithOutput(a);

  const b = await procs.spawn(traced("trace-b"));
  await b.waitReady();
  const settled = await waitTerminal(b.url, task.id, 60_000);
  expect(settled.status).toBe("interrupted");
  expect(settled.traceId).toBe(CLIENT_TRACE);
  const spans = inTrace(
    await receiver.waitFor((all) => named(inTrace(all, CLIENT_TRACE), "mooring.settle").length > 0, 60_000),
    CLIENT_TRACE,
  );
  const [submit] = named(spans, "mooring.submit");
  const [settle] = named(spans, "mooring.settle");
  expect(settle.resource["service.instance.id"]).toBe("trace-b");
  expect(settle.parentSpanId).toBe(submit.spanId);
  expect(settle.attributes).toMatchObject({
    "mooring.task.id": task.id,
    "mooring.task.status": "interrupted",
    "mooring.settle.by": "lease_takeover",
    "mooring.error.code": "GATEWAY_RESTART",
  });
});

it("a continuation (MOORING_RECOVERY=continue) carries on the interrupted turn's trace on another instance", {
  timeout: 120_000,
}, async () => {
  const timers = {
    MOORING_RECOVERY: "continue",
    MOORING_SHUTDOWN_GRACE_MS: "500",
    MOORING_LEASE_MS: "30000",
  };
  const a = await procs.spawn(traced("trace-a", timers));
  const b = await procs.spawn(traced("trace-b", timers));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const session = await call(a.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
  expect(session.status).toBe(201);
  // A saved conversation first: only that one is continued.
  const warmup = await submitOk(a.url, session.body.id, { prompt: "hello" });
  expect((await waitTerminal(a.url, warmup.id)).status).toBe("completed");
  const long = await submitOk(
    a.url,
    session.body.id,
    { prompt: "[sleep 30000]" },
    {
      traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
    },
  );
  expect(long.status).toBe("running");
  a.kill("SIGTERM");
  expect(await exitedWithOutput(a)).toBe(0);
  expect((await waitTerminal(b.url, long.id)).status).toBe("interrupted");
  const [continuation] = await db.sql`select id from tasks where continues_task_id = ${long.id}`;
  const done = await waitTerminal(b.url, continuation.id);
  expect(done.status).toBe("completed");
  expect(done.traceId).toBe(CLIENT_TRACE);

  const spans = inTrace(
    await receiver.waitFor(
      (all) =>
        inTrace(all, CLIENT_TRACE).some(
          (s) => s.name === "mooring.turn" && s.attributes["mooring.task.id"] === continuation.id,
        ),
      60_000,
    ),
    CLIENT_TRACE,
  );
  const [submit] = named(spans, "mooring.submit");
  const turns = named(spans, "mooring.turn");
  // The interrupted turn on a (its span ended at the shutdown) and the continuation on b.
  expect(
    Object.fromEntries(
      turns.map((t) => [t.attributes["mooring.task.id"], t.resource["service.instance.id"]]),
    ),
  ).toEqual({
    [long.id]: "trace-a",
    [continuation.id]: "trace-b",
  });
  expect(turns.every((t) => t.parentSpanId === submit.spanId)).toBe(true);
});
