/**
 * The outbox survives kill -9 (docs/api.md, Webhooks): the delivery row commits with the turn's
 * settlement, so a gateway killed after the settlement and before any send delivers after restart.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { eventually, type GatewayProcess, spawnGateway, testEnv } from "../support/gateway.js";
import { createSession, submitPrompt, tempWorkspace, waitTerminal } from "../support/turns.js";
import { type Receiver, startReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
let db: TestDatabase;
let receiver: Receiver;
let gateway: GatewayProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  receiver = await startReceiver(SECRET);
});
afterAll(async () => {
  gateway?.kill();
  await gateway?.exited;
  await receiver?.close();
  await db?.drop();
});

it("a turn settled before kill -9 and not yet sent is delivered after the restart", async () => {
  const env = (pollMs: string) =>
    testEnv(db.url, {
      MOORING_WEBHOOKS: JSON.stringify([{ url: receiver.url, secret: SECRET, events: ["task.completed"] }]),
      MOORING_WEBHOOK_POLL_MS: pollMs,
      LOG_LEVEL: "info",
    });
  // Its one poll runs at start, before the turn: nothing is sent before the kill.
  gateway = await spawnGateway(env("3600000"));
  await gateway.waitReady();
  const sessionId = await createSession(gateway.url, await tempWorkspace());
  const task = await submitPrompt(gateway.url, sessionId, "hello");
  expect((await waitTerminal(gateway.url, task.id)).status).toBe("completed");
  const [pending] = await db.sql<{ status: string; attempts: number }[]>`
    select status, attempts from webhook_deliveries where event_type = 'task.completed'`;
  expect(pending).toEqual({ status: "pending", attempts: 0 });
  gateway.kill("SIGKILL");
  await gateway.exited;
  expect(receiver.requests).toBe(0);

  gateway = await spawnGateway(env("50"));
  await gateway.waitReady();
  const got = await eventually(async () => receiver.unique.find((r) => r.body.type === "task.completed"));
  expect(got.body.data).toMatchObject({ taskId: task.id, sessionId, status: "completed", tenant: "default" });
  expect(receiver.badSignatures).toBe(0);
  expect(receiver.unique).toHaveLength(1);
});
