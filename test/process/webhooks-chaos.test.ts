/**
 * Webhooks under chaos (docs/api.md, Webhooks): two gateway processes on one database, one killed
 * -9 in the middle of the run (turns running, deliveries in flight) and started again, a receiver
 * that refuses some requests. Counted at the receiver after dedupe by webhook-id (verified with
 * `standardwebhooks`): every turn has exactly one terminal webhook, of its final status; none is
 * missing, none is doubled.
 */
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSession, submitPrompt, waitTerminal } from "../support/turns.js";
import { startReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TURNS = 24;
const TERMINAL = ["task.completed", "task.failed", "task.cancelled", "task.interrupted", "task.expired"];
let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("wh-chaos-", procs, (d, w) => {
  db = d;
  workspace = w;
});

it("two instances, one killed -9 and restarted mid-run: each turn gets exactly its one terminal webhook", async () => {
  // Every seventh request is refused: those deliveries are retried.
  let requests = 0;
  const receiver = await startReceiver(SECRET, () => (++requests % 7 === 0 ? 503 : 200));
  try {
    const env = (id: string) =>
      gatewayEnv(db.url, {
        MOORING_INSTANCE_ID: id,
        MOORING_MAX_ACTIVE: "4",
        MOORING_MAX_QUEUED: "100",
        MOORING_WEBHOOKS: JSON.stringify([{ url: receiver.url, secret: SECRET, events: TERMINAL }]),
        MOORING_WEBHOOK_POLL_MS: "200",
        MOORING_WEBHOOK_RETRY_SCHEDULE_MS: "100,200,400,800,1600",
        MOORING_WEBHOOK_TIMEOUT_MS: "1000",
        MOORING_WEBHOOK_LEASE_MS: "2000",
      });
    let a = await procs.spawn(env("wh-chaos-a"));
    const b = await procs.spawn(env("wh-chaos-b"));
    await Promise.all([a.waitReady(), b.waitReady()]);

    const tasks: { id: string }[] = [];
    const submitOn = async (url: string, i: number) => {
      const sessionId = await createSession(url, workspace);
      const prompt = i % 6 === 5 ? "[sleep 300] [fail]" : `[sleep ${300 + (i % 4) * 400}] [deltas 3]`;
      tasks.push(await submitPrompt(url, sessionId, prompt));
    };
    for (let i = 0; i < TURNS / 2; i++) await submitOn(i % 2 === 0 ? a.url : b.url, i);
    // Kill a while it runs turns of its own.
    await eventually(async () => {
      const rows = await db.sql`
        select 1 from tasks t join instances i on i.boot_id = t.owner_boot
        where i.instance_id = 'wh-chaos-a' and t.status = 'running'`;
      return rows.length > 0;
    });
    a.kill("SIGKILL");
    await exitedWithOutput(a);
    a = await procs.spawn(env("wh-chaos-a"));
    await a.waitReady();
    for (let i = TURNS / 2; i < TURNS; i++) await submitOn(i % 2 === 0 ? a.url : b.url, i);

    const ended = await Promise.all(tasks.map((t) => waitTerminal(b.url, t.id)));
    const statuses = new Set(ended.map((t) => t.status));
    expect(statuses.has("interrupted")).toBe(true);
    expect(statuses.has("completed")).toBe(true);
    expect(statuses.has("failed")).toBe(true);

    await eventually(async () => {
      const got = new Set(receiver.unique.map((r) => r.body.data.taskId));
      return tasks.every((t) => got.has(t.id));
    }, 60_000);
    // Late duplicates would show up here: wait until the outbox is empty, then count.
    await eventually(async () => {
      const [row] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from webhook_deliveries where status <> 'delivered'`;
      return row.n === 0;
    }, 30_000);
    expect(receiver.badSignatures).toBe(0);
    for (const task of ended) {
      const got = receiver.unique.filter((r) => r.body.data.taskId === task.id);
      expect(got.map((r) => r.body.type)).toEqual([`task.${task.status}`]);
      expect(got[0].body.data.status).toBe(task.status);
    }
    expect(receiver.unique).toHaveLength(TURNS);
    // The refusals were retried, so more requests than webhooks arrived.
    expect(receiver.requests).toBeGreaterThan(TURNS);
  } finally {
    await receiver.close();
  }
  // Three process starts on a shared 2-core machine take most of it.
}, 150_000);
