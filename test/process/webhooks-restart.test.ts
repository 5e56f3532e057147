/**
 * The outbox survives kill -9 (docs/api.md, Webhooks): the delivery row commits with the turn's
 * settlement and its notification wakes the sender at once (no poll needed); a gateway killed
 * before the receiver answered delivers it after restart, under the same webhook-id.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { eventually, type GatewayProcess } from "../support/gateway.js";
import { createSession, submitPrompt, waitTerminal } from "../support/turns.js";
import { type Receiver, startReceiver } from "../support/webhook-receiver.js";
import { useProcessGateway } from "../support/use-gateway.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
// The test's gateways are its own: stopped when it ends (the leak guard checks).
const suite = useProcessGateway({ workspace: true });
let receiver: Receiver;
let gateway: GatewayProcess;

beforeAll(async () => {
  receiver = await startReceiver(SECRET);
});
afterAll(() => receiver?.close());

it("a commit wakes the sender at once; killed -9 before the receiver answered, the webhook is delivered after restart", async () => {
  // The receiver takes the first request and never answers it.
  let held = false;
  receiver.hold = () => {
    if (held) return Promise.resolve();
    held = true;
    return new Promise<void>(() => {});
  };
  // A short lease (the killed sender's claim runs out in database time, which no clock moves).
  const env = (pollMs: string) => ({
    MOORING_WEBHOOKS: JSON.stringify([{ url: receiver.url, secret: SECRET, events: ["task.completed"] }]),
    MOORING_WEBHOOK_POLL_MS: pollMs,
    MOORING_WEBHOOK_TIMEOUT_MS: "1000",
    MOORING_WEBHOOK_LEASE_MS: "1500",
    LOG_LEVEL: "info",
  });
  // Its one poll runs at start, before the turn: only the settlement's notification can wake it.
  gateway = await suite.spawn(env("3600000"));
  await gateway.waitReady();
  const sessionId = await createSession(gateway.url, suite.workspace);
  const task = await submitPrompt(gateway.url, sessionId, "hello");
  expect((await waitTerminal(gateway.url, task.id)).status).toBe("completed");
  await eventually(async () => receiver.inFlight === 1);
  const [pending] = await suite.sql<{ status: string; attempts: number }[]>`
    select status, attempts from webhook_deliveries where event_type = 'task.completed'`;
  expect(pending).toEqual({ status: "pending", attempts: 0 });
  gateway.kill("SIGKILL");
  await gateway.exited;
  expect(receiver.unique).toHaveLength(0);

  // The killed sender's lease runs out; then the restarted gateway sends it again, same webhook-id.
  gateway = await suite.spawn(env("50"));
  await gateway.waitReady();
  const got = await eventually(async () => receiver.unique.find((r) => r.body.type === "task.completed"));
  expect(got.body.data).toMatchObject({ taskId: task.id, sessionId, status: "completed", tenant: "default" });
  expect(receiver.badSignatures).toBe(0);
  expect(receiver.unique).toHaveLength(1);
  const [row] = await suite.sql<{ id: string; status: string; attempts: number }[]>`
    select id, status, attempts from webhook_deliveries where event_type = 'task.completed'`;
  expect(got.id).toBe(row.id);
  await eventually(async () => {
    const [r] = await suite.sql<
      { status: string }[]
    >`select status from webhook_deliveries where id = ${row.id}`;
    return r.status === "delivered";
  });
}, 120_000);
