/**
 * Per-endpoint concurrency across instances (MOORING_WEBHOOK_ENDPOINT_CONCURRENCY, docs/api.md,
 * Webhooks): two gateways on one database, a receiver that holds every request and one that
 * answers at once. The slow URL never has more than its two requests in flight over both
 * instances, and the fast URL's deliveries all arrive while the slow ones hang.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { TestClock } from "../support/fake-clock.js";
import { eventually, type TestGateway } from "../support/gateway.js";
import { createSession, submitPrompt, waitTerminal } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { type Receiver, startReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TURNS = 6;
const POLL_MS = 20;

/** A gateway's clock that counts its webhook polls (the poll loop is its only timer of POLL_MS). */
class PollCountingClock extends TestClock {
  polls = 0;
  override setTimeout(fn: () => void, ms: number) {
    if (ms === POLL_MS) this.polls++;
    return super.setTimeout(fn, ms);
  }
}
const clocks = { a: new PollCountingClock(), b: new PollCountingClock() };

const gt = useGateway({ workspace: true, start: false });
let a: TestGateway;
let b: TestGateway;
let slow: Receiver;
let fast: Receiver;
let release: () => void;
const released = new Promise<void>((resolve) => {
  release = resolve;
});

beforeAll(async () => {
  slow = await startReceiver(SECRET);
  slow.hold = () => released;
  fast = await startReceiver(SECRET);
  const env = (id: string) => ({
    MOORING_INSTANCE_ID: id,
    MOORING_MAX_ACTIVE: "6",
    MOORING_WEBHOOKS: JSON.stringify([
      { url: slow.url, secret: SECRET, events: ["task.completed"] },
      { url: fast.url, secret: SECRET, events: ["task.completed"] },
    ]),
    MOORING_WEBHOOK_POLL_MS: String(POLL_MS),
    // Each instance alone could send every slow delivery at once: only the per-URL bound stops it.
    MOORING_WEBHOOK_CONCURRENCY: "8",
    MOORING_WEBHOOK_ENDPOINT_CONCURRENCY: "2",
    MOORING_WEBHOOK_TIMEOUT_MS: "60000",
    MOORING_WEBHOOK_LEASE_MS: "120000",
  });
  a = await gt.startGateway(env("wh-conc-a"), { clock: clocks.a });
  b = await gt.startGateway(env("wh-conc-b"), { clock: clocks.b });
});
afterAll(async () => {
  release?.();
  await a?.stop();
  await b?.stop();
  await slow?.close();
  await fast?.close();
});

it("a slow URL holds at most its endpoint concurrency over both instances; another URL does not wait", async () => {
  const tasks = await Promise.all(
    Array.from({ length: TURNS }, async (_, i) => {
      const gw = i % 2 === 0 ? a : b;
      const sessionId = await createSession(gw.url, gt.workspace);
      return submitPrompt(gw.url, sessionId, "hello");
    }),
  );
  for (const t of tasks) expect((await waitTerminal(a.url, t.id)).status).toBe("completed");

  // Every fast delivery arrives while the slow receiver answers nothing.
  await eventually(async () => fast.unique.length === TURNS);
  expect(fast.unique.map((r) => r.body.data.taskId).sort()).toEqual(tasks.map((t) => t.id).sort());
  await eventually(async () => slow.inFlight === 2);
  expect(slow.requests).toBe(0);
  // Both instances keep polling meanwhile: still no third request to the slow URL, and the
  // database shows exactly two of its deliveries leased.
  const before = { a: clocks.a.polls, b: clocks.b.polls };
  await eventually(async () => clocks.a.polls >= before.a + 10 && clocks.b.polls >= before.b + 10);
  expect(slow.maxInFlight).toBe(2);
  const [leased] = await gt.sql<{ n: number }[]>`
    select count(*)::int as n from webhook_deliveries
    where url = ${slow.url} and lease_until is not null and status = 'pending'`;
  expect(leased.n).toBe(2);

  release();
  await eventually(async () => slow.unique.length === TURNS);
  expect(slow.maxInFlight).toBe(2);
  expect(slow.badSignatures + fast.badSignatures).toBe(0);
  // Recorded once answered: every row delivered, each in one attempt.
  await eventually(async () => {
    const rows = await gt.sql<{ status: string; attempts: number }[]>`
      select status, attempts from webhook_deliveries`;
    return rows.length === 2 * TURNS && rows.every((r) => r.status === "delivered" && r.attempts === 1);
  });
});
