/**
 * Notifications go out after the commit, in a transaction of their own (sql/notify.ts, Notifier),
 * so one can be lost when its sender dies between the two. Gateways on one database: A; "lossy",
 * behind a proxy that cuts its connection at the very statement that sends its notifications (the
 * statement never reaches Postgres, as when the sender dies right after a commit); and B, which
 * runs the turns, with its heartbeat and polls at two minutes on its TestClock, so within a test's
 * time only a notification can tell B anything, until the test steps B's clock.
 * - Delivered: a cancel asked of A stops the turn B runs; A hears B's settlement.
 * - Lost: the cancel is committed, B does not hear it, and B's next lease heartbeat (which reads
 *   `cancelling`) stops the turn; a turn the lossy instance runs reaches B's subscriber at B's next
 *   feed poll.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { DatabaseProxy } from "../support/db-proxy.js";
import { call, type TestGateway } from "../support/gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";
import { WsClients } from "../support/ws-client.js";

const BACKSTOP_MS = 120_000;
const t = useGateway({ workspace: true, start: false });
const clients = new WsClients(() => b.url);
let proxy: DatabaseProxy;
let a: TestGateway;
/** A behind the proxy: each of its notification statements is cut before Postgres sees it. */
let lossy: TestGateway;
let b: TestGateway;
let lost = 0;

beforeAll(async () => {
  // Every statement that sends notifications is cut, its connection terminated. A connection runs
  // it once at most, so the statement's text (not only its prepared name) is always on the wire.
  proxy = await DatabaseProxy.start(t.databaseUrl, (sent) => {
    const notifies = sent.includes("set_config('synchronous_commit', 'off', true)");
    if (notifies) lost++;
    return notifies;
  });
  const backstops = { MOORING_POLL_MS: String(BACKSTOP_MS) };
  a = await t.startGateway({ ...backstops, MOORING_INSTANCE_ID: "notify-a" });
  lossy = await t.startGateway({
    ...backstops,
    MOORING_INSTANCE_ID: "notify-lossy",
    DATABASE_URL: proxy.url,
  });
  b = await t.startGateway({
    ...backstops,
    MOORING_INSTANCE_ID: "notify-b",
    MOORING_HEARTBEAT_MS: String(BACKSTOP_MS),
    MOORING_LEASE_MS: String(3 * BACKSTOP_MS),
  });
});

afterAll(async () => {
  await lossy?.stop();
  await proxy?.close();
});

async function runningOnB(prompt: string): Promise<{ session: string; task: { id: string } }> {
  const session = await createSession(b.url, t.workspace);
  // Submitted on B: B's admission claims it, so B runs it.
  const task = await submitOk(b.url, session, { prompt });
  expect(task.status).toBe("running");
  const [row] = await t.sql<
    { ownerInstance: string }[]
  >`select owner_instance from tasks where id = ${task.id}`;
  expect(row.ownerInstance).toBe("notify-b");
  return { session, task };
}

async function statusOf(taskId: string): Promise<string> {
  const [row] = await t.sql<{ status: string }[]>`select status from tasks where id = ${taskId}`;
  return row.status;
}

it("a cancel committed on A reaches the turn B runs through the notification sent after the commit", async () => {
  const { task } = await runningOnB("[sleep 600000]");
  const cancelled = await call(a.url, "POST", `/v1/tasks/${task.id}/cancel`);
  expect(cancelled.status).toBe(200);
  // B stops it (its heartbeat is two minutes away) and settles it; A's long poll hears the
  // settlement through B's notification (A's own poll is two minutes away too).
  const done = await waitTask(a.url, task.id, undefined, 20_000);
  expect(done.status).toBe("cancelled");
});

it("when the notification after the commit is lost, B's lease heartbeat stops the turn", async () => {
  const { task } = await runningOnB("[sleep 600000]");
  const lostBefore = lost;
  const cancelled = await call(lossy.url, "POST", `/v1/tasks/${task.id}/cancel`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.status).toBe("cancelling");
  // Its notification statement was cut: the cancel is committed and nobody was told.
  await expect.poll(() => lost, { timeout: 10_000 }).toBeGreaterThan(lostBefore);
  expect(await statusOf(task.id)).toBe("cancelling");
  await b.clock.advance(BACKSTOP_MS);
  const done = await waitTask(b.url, task.id, undefined, 20_000);
  expect(done.status).toBe("cancelled");
});

it("when the notifications are lost, a subscriber on B gets the events of a turn run elsewhere at B's next feed poll", async () => {
  const session = await createSession(lossy.url, t.workspace);
  const onB = await clients.connect(b.url);
  await onB.call("events.subscribe", { sessionId: session });
  const lostBefore = lost;
  // Submitted on the lossy instance: it claims and runs the turn; its admission's and flushes'
  // notifications are cut.
  const task = await submitOk(lossy.url, session, { prompt: "[deltas 3]" });
  expect((await waitTask(lossy.url, task.id, undefined, 20_000)).status).toBe("completed");
  await expect.poll(() => lost, { timeout: 10_000 }).toBeGreaterThan(lostBefore + 1);
  const [owner] = await t.sql<
    { ownerInstance: string }[]
  >`select owner_instance from tasks where id = ${task.id}`;
  expect(owner.ownerInstance).toBe("notify-lossy");
  expect(onB.eventsOf(session).filter((e) => e.taskId === task.id)).toEqual([]);
  await b.clock.advance(BACKSTOP_MS);
  await onB.waitForTerminal(session, task.id, 20_000);
  const log = await t.sql<
    { seq: number }[]
  >`select seq from events where session_id = ${session} order by seq`;
  expect(onB.eventsOf(session).map((e) => e.seq)).toEqual(log.map((e) => e.seq));
});
