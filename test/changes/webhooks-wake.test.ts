/**
 * Deliveries are woken, not polled (docs/api.md, Webhooks): with the poll an hour away, only the
 * commit's notification (the outbox trigger's NOTIFY) and a freed slot can start a claim. A burst
 * of turns to one URL of concurrency 1 arrives whole: each turn's commit wakes the worker (a wake
 * during a claim runs one more claim after it), and each finished attempt wakes it for the next.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { eventually, type TestGateway } from "../support/gateway.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { type Receiver, startReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TURNS = 5;

const gt = useGateway({ workspace: true, start: false });
let gw: TestGateway;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver(SECRET);
  gw = await gt.startGateway({
    MOORING_WEBHOOKS: JSON.stringify([{ url: receiver.url, secret: SECRET, events: ["task.completed"] }]),
    MOORING_WEBHOOK_POLL_MS: "3600000",
    MOORING_WEBHOOK_ENDPOINT_CONCURRENCY: "1",
  });
});
afterAll(async () => {
  await gw?.stop();
  await receiver?.close();
});

it("one turn's webhook arrives without waiting for a poll", async () => {
  const sessionId = await createSession(gw.url, gt.workspace);
  const task = await submitPrompt(gw.url, sessionId, "hello");
  await waitTask(gw.url, task.id, undefined, 60_000);
  const got = await eventually(async () =>
    receiver.unique.find((r) => r.body.type === "task.completed" && r.body.data.taskId === task.id),
  );
  expect(got.body.data.sessionId).toBe(sessionId);
});

it("a burst of turns to a URL of concurrency 1: every webhook arrives, each claimed by a wake", async () => {
  const sessions = await Promise.all(
    Array.from({ length: TURNS }, () => createSession(gw.url, gt.workspace)),
  );
  const tasks = await Promise.all(sessions.map((s) => submitPrompt(gw.url, s, "hello")));
  for (const task of tasks) await waitTask(gw.url, task.id, undefined, 60_000);
  const ids = new Set(tasks.map((t) => t.id));
  await eventually(
    async () => receiver.unique.filter((r) => ids.has(r.body.data.taskId as string)).length === TURNS,
  );
  expect(receiver.maxInFlight).toBe(1);
  expect(receiver.badSignatures).toBe(0);
});
