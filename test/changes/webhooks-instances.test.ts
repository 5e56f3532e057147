/**
 * Webhooks with two instances on one database (docs/api.md, Webhooks): every terminal event of
 * turns spread over both instances arrives exactly once at the receiver (after dedupe) and no
 * delivery is attempted twice while the receiver answers; settlements by other paths (a cancel,
 * a failing turn) write their webhook as well.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { call, eventually, type TestGateway } from "../support/gateway.js";
import { createSession, submitPrompt, waitStatus, waitTerminal } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { type Receiver, startReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const gt = useGateway({ workspace: true, start: false });
let a: TestGateway;
let b: TestGateway;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver(SECRET);
  const env = (id: string) => ({
    MOORING_INSTANCE_ID: id,
    MOORING_MAX_ACTIVE: "4",
    MOORING_WEBHOOKS: JSON.stringify([
      { url: receiver.url, secret: SECRET, events: ["task.completed", "task.failed", "task.cancelled"] },
    ]),
    MOORING_WEBHOOK_POLL_MS: "10",
  });
  a = await gt.startGateway(env("wh-a"));
  b = await gt.startGateway(env("wh-b"));
});
afterAll(async () => {
  // Before the receiver closes: a gateway stopped after it would retry deliveries to nothing.
  await a?.stop();
  await b?.stop();
  await receiver?.close();
});

it("turns on two instances each produce exactly their terminal webhook, each attempted once", async () => {
  const tasks = await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      const gw = i % 2 === 0 ? a : b;
      const sessionId = await createSession(gw.url, gt.workspace);
      return submitPrompt(gw.url, sessionId, i % 4 === 3 ? "[fail]" : "hello");
    }),
  );
  const ended = await Promise.all(tasks.map((t) => waitTerminal(a.url, t.id)));
  await eventually(async () => receiver.unique.length >= tasks.length);
  expect(receiver.badSignatures).toBe(0);
  expect(receiver.unique.map((r) => r.body.data.taskId).sort()).toEqual(tasks.map((t) => t.id).sort());
  for (const task of ended) {
    const got = receiver.unique.find((r) => r.body.data.taskId === task.id)!;
    expect(got.body.type).toBe(`task.${task.status}`);
  }
  expect(ended.some((t) => t.status === "failed")).toBe(true);
  // Both instances compete for the same rows: still one attempt per delivery. An attempt is
  // recorded after its answer arrives (by the sender's next claim): awaited, not assumed.
  const rows = await eventually(async () => {
    const r = await gt.sql<
      { attempts: number; status: string }[]
    >`select attempts, status from webhook_deliveries`;
    return r.every((d) => d.status === "delivered") ? r : null;
  });
  expect(rows.every((r) => r.attempts === 1)).toBe(true);
  expect(receiver.requests).toBe(tasks.length);
});

it("a cancelled turn's webhook is written by the cancel", async () => {
  const sessionId = await createSession(b.url, gt.workspace);
  const task = await submitPrompt(b.url, sessionId, "[sleep 30000]");
  await waitStatus(b.url, task.id, "running");
  expect((await call(a.url, "POST", `/v1/tasks/${task.id}/cancel`)).status).toBe(200);
  expect((await waitTerminal(a.url, task.id)).status).toBe("cancelled");
  const got = await eventually(async () => receiver.unique.find((r) => r.body.data.taskId === task.id));
  expect(got.body).toMatchObject({
    type: "task.cancelled",
    data: { status: "cancelled", tenant: "default" },
  });
});
