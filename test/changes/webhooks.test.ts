/**
 * Signed webhooks from the durable outbox (docs/api.md, Webhooks): a real gateway, the real
 * Postgres, the simulated agent, and loopback receivers that verify every signature with the
 * `standardwebhooks` package and dedupe by webhook-id.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { call, eventually, type TestGateway } from "../support/gateway.js";
import { createSession, submit, submitOk, submitPrompt, waitPermission, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { type Receiver, startReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const auth = (tenant: string) => ({ authorization: `Bearer token-${tenant}` });

// The gateway starts once the receivers listen (its tenants name their URLs).
const gt = useGateway({ workspace: true, start: false });
let gw: TestGateway;
const receivers: Record<string, Receiver> = {};
let flakyFailures = 0;
const logLines: string[] = [];

beforeAll(async () => {
  receivers.a = await startReceiver(SECRET);
  receivers.b = await startReceiver(SECRET);
  // Down for its first three requests (503), then up.
  receivers.flaky = await startReceiver(SECRET, () => (flakyFailures++ < 3 ? 503 : 200));
  receivers.dead = await startReceiver(SECRET, () => 500);
  receivers.turn = await startReceiver(SECRET);
  const tenant = (name: string, extra: Record<string, unknown> = {}) => ({
    tokens: [`token-${name}`],
    webhooks: [{ url: receivers[name].url, secret: SECRET }],
    ...extra,
  });
  gw = await gt.startGateway(
    {
      MOORING_TENANTS: JSON.stringify({
        a: tenant("a"),
        b: tenant("b"),
        flaky: tenant("flaky"),
        dead: tenant("dead"),
        ops: { tokens: ["token-ops"], admin: true },
        t: {
          tokens: ["token-t"],
          webhookUrlPrefixes: [`${new URL(receivers.turn.url).origin}/`],
          webhookSecret: SECRET,
        },
      }),
      MOORING_WEBHOOK_POLL_MS: "20",
      MOORING_WEBHOOK_RETRY_SCHEDULE_MS: "30,30,30,30",
    },
    { onLog: (record) => logLines.push(JSON.stringify(record)), logLevel: "debug" },
  );
});
afterAll(async () => {
  // Before the receivers close: a gateway stopped after them would retry deliveries to nothing.
  await gw?.stop();
  for (const r of Object.values(receivers)) await r.close();
});

const deliveriesOf = (tenant: string) =>
  gt.sql<
    {
      eventType: string;
      status: string;
      attempts: number;
      lastStatusCode: number | null;
      lastResponse: string;
    }[]
  >`
    select event_type, status, attempts, last_status_code, last_response from webhook_deliveries
    where tenant = ${tenant} order by seq`;

it("a turn's permission request and its end arrive signed, once each, with the thin payload; never at another tenant", async () => {
  const sessionId = await createSession(gw.url, gt.workspace, {}, auth("a"));
  const task = await submitPrompt(gw.url, sessionId, "[ask bash] secret prompt text", auth("a"));
  const request = await waitPermission(gw.url, task.id, 20_000, auth("a"));
  const answered = await call(
    gw.url,
    "POST",
    `/v1/tasks/${task.id}/permissions/${request.requestId}`,
    { optionId: "allow" },
    auth("a"),
  );
  expect(answered.status).toBe(200);
  const done = await waitTask(gw.url, task.id, undefined, 60_000, auth("a"));
  expect(done.status).toBe("completed");
  const a = receivers.a;
  await eventually(async () =>
    ["task.completed", "permission.resolved"].every((type) => a.unique.some((r) => r.body.type === type)),
  );
  expect(a.badSignatures).toBe(0);
  const types = a.unique.map((r) => r.body.type);
  expect(types.filter((t) => t === "task.completed")).toHaveLength(1);
  expect(types.filter((t) => t === "permission.requested")).toHaveLength(1);
  expect(types.filter((t) => t === "permission.resolved")).toHaveLength(1);
  const requested = a.unique.find((r) => r.body.type === "permission.requested")!;
  expect(requested.body.data).toMatchObject({
    tenant: "a",
    sessionId,
    taskId: task.id,
    requestId: request.requestId,
  });
  const completed = a.unique.find((r) => r.body.type === "task.completed")!;
  expect(completed.body.data).toMatchObject({ tenant: "a", sessionId, taskId: task.id, status: "completed" });
  expect(completed.body.data.seq).toBeGreaterThan(requested.body.data.seq as number);
  expect(Object.keys(completed.body).sort()).toEqual(["data", "timestamp", "type"]);
  // Thin: neither the prompt nor any agent output travels.
  expect(JSON.stringify(a.unique)).not.toContain("secret prompt text");
  expect(receivers.b.unique).toHaveLength(0);
});

it("a receiver down for a while, then up: every event arrives, the retries are recorded", async () => {
  const sessionId = await createSession(gw.url, gt.workspace, {}, auth("flaky"));
  const task = await submitPrompt(gw.url, sessionId, "hello", auth("flaky"));
  await waitTask(gw.url, task.id, undefined, 60_000, auth("flaky"));
  await eventually(async () => receivers.flaky.unique.some((r) => r.body.type === "task.completed"));
  expect(receivers.flaky.badSignatures).toBe(0);
  const rows = await eventually(async () => {
    const r = await deliveriesOf("flaky");
    return r.every((d) => d.status === "delivered") ? r : null;
  });
  expect(rows.map((r) => r.eventType)).toContain("task.completed");
  // Three 503s were answered: they show as attempts beyond the first.
  expect(rows.reduce((n, r) => n + r.attempts, 0)).toBe(rows.length + 3);
  expect(receivers.flaky.unique).toHaveLength(rows.length);
});

it("a receiver answering 500 forever: the delivery ends failed after its schedule, its last answer recorded", async () => {
  const sessionId = await createSession(gw.url, gt.workspace, {}, auth("dead"));
  const task = await submitPrompt(gw.url, sessionId, "hello", auth("dead"));
  await waitTask(gw.url, task.id, undefined, 60_000, auth("dead"));
  const [row] = await eventually(async () => {
    const r = (await deliveriesOf("dead")).filter((d) => d.eventType === "task.completed");
    return r.length === 1 && r[0].status === "failed" ? r : null;
  });
  // The first attempt and one per entry of the schedule (4).
  expect(row.attempts).toBe(5);
  expect(row.lastStatusCode).toBe(500);
  expect(row.lastResponse).toBe("answered 500");
  expect(receivers.dead.unique).toHaveLength(0);
});

it("GET /v1/webhooks/deliveries shows the caller's tenant only (an admin all), pages, and a retry sends again", async () => {
  const flaky = await call(
    gw.url,
    "GET",
    "/v1/webhooks/deliveries?status=delivered",
    undefined,
    auth("flaky"),
  );
  expect(flaky.status).toBe(200);
  expect(flaky.body.items.length).toBeGreaterThan(0);
  expect(flaky.body.items.every((d: any) => d.tenant === "flaky" && d.status === "delivered")).toBe(true);
  expect(flaky.body.items.some((d: any) => d.attempts > 1)).toBe(true);
  // The receiver's query (a token of its own) is never shown.
  expect(JSON.stringify(flaky.body)).not.toContain("receiver-secret");
  const b = await call(gw.url, "GET", "/v1/webhooks/deliveries", undefined, auth("b"));
  expect(b.body.items).toEqual([]);
  const all = await call(gw.url, "GET", "/v1/webhooks/deliveries?limit=1", undefined, auth("ops"));
  expect(all.body.items).toHaveLength(1);
  const next = await call(
    gw.url,
    "GET",
    `/v1/webhooks/deliveries?limit=200&cursor=${all.body.nextCursor}`,
    undefined,
    auth("ops"),
  );
  const both = [...all.body.items, ...next.body.items];
  expect(new Set(both.map((d: any) => d.tenant))).toEqual(new Set(["a", "flaky", "dead"]));
  expect(next.body.items.map((d: any) => d.id)).not.toContain(all.body.items[0].id);

  const failed = await call(gw.url, "GET", "/v1/webhooks/deliveries?status=failed", undefined, auth("dead"));
  const id = failed.body.items[0].id;
  expect(
    (await call(gw.url, "POST", `/v1/webhooks/deliveries/${id}/retry`, undefined, auth("a"))).status,
  ).toBe(404);
  const retried = await call(gw.url, "POST", `/v1/webhooks/deliveries/${id}/retry`, undefined, auth("dead"));
  expect(retried.status).toBe(200);
  expect(retried.body.status).toBe("pending");
  await eventually(async () => {
    const [row] = await gt.sql<
      { status: string; attempts: number }[]
    >`select status, attempts from webhook_deliveries where id = ${id}`;
    return row.status === "failed" && row.attempts > 5;
  });
  const bad = await call(gw.url, "GET", "/v1/webhooks/deliveries?status=lost", undefined, auth("a"));
  expect(bad.status).toBe(400);
  expect(bad.body.error.code).toBe("INVALID_REQUEST");
});

it("counts attempts by result and the backlog in the metrics", async () => {
  const res = await fetch(`${gw.url}/metrics`, { headers: auth("ops") });
  const text = await res.text();
  expect(text).toMatch(/mooring_webhook_deliveries_total\{result="delivered"\} [1-9]/);
  expect(text).toMatch(/mooring_webhook_deliveries_total\{result="retry"\} [1-9]/);
  expect(text).toMatch(/mooring_webhook_deliveries_total\{result="failed"\} [1-9]/);
  expect(text).toMatch(/mooring_webhook_backlog \d+/);
});

it("a turn's own webhook URL inside its tenant's prefixes gets that turn's events; outside is 400 naming the field", async () => {
  const sessionId = await createSession(gw.url, gt.workspace, {}, auth("t"));
  const task = await submitOk(
    gw.url,
    sessionId,
    { prompt: "hello", webhook: { url: receivers.turn.url } },
    auth("t"),
  );
  await waitTask(gw.url, task.id, undefined, 60_000, auth("t"));
  const got = await eventually(async () =>
    receivers.turn.unique.find((r) => r.body.type === "task.completed"),
  );
  expect(got.body.data).toMatchObject({ tenant: "t", taskId: task.id, status: "completed" });
  expect(receivers.turn.badSignatures).toBe(0);
  for (const url of [
    "https://elsewhere.example.com/hook",
    `${new URL(receivers.turn.url).origin}.evil.test/hook`,
    "not a url",
  ]) {
    const refused = await submit(gw.url, sessionId, { prompt: "hello", webhook: { url } }, auth("t"));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "INVALID_REQUEST", field: "webhook.url" });
  }
  // A tenant without prefixes may not name one at all.
  const aSession = await createSession(gw.url, gt.workspace, {}, auth("a"));
  const none = await submit(
    gw.url,
    aSession,
    { prompt: "hello", webhook: { url: receivers.a.url } },
    auth("a"),
  );
  expect(none.status).toBe(400);
  expect(none.body.error.field).toBe("webhook.url");
});

it("logs attempts without a secret or a URL's query", () => {
  const attempts = logLines.filter((l) => l.includes('"webhook attempt"'));
  expect(attempts.length).toBeGreaterThan(0);
  const all = logLines.join("\n");
  expect(all).not.toContain(SECRET.slice("whsec_".length));
  expect(all).not.toContain("receiver-secret");
});
