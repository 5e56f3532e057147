/**
 * R4 on a fake clock: a `complex` turn (60 min) whose gateway becomes unreachable for
 * longer than an hour. The run never rejects before the task's deadline plus the lease and sweep
 * periods; then it rejects with TaskLostError. With `giveUpAfterMs` it rejects earlier with
 * StillRunningError carrying the task, which is still running.
 */
import { rm } from "node:fs/promises";
import { afterAll, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { MooringClient, type Run, StillRunningError, TaskLostError } from "../../src/client/index.js";
import { FakeClock } from "../support/fake-clock.js";
import { TcpProxy } from "../support/tcp-proxy.js";

const LEASE_MS = 30_000;
const SWEEP_MS = 10_000;

const t = useGateway({ workspace: true });
let proxy: TcpProxy;

afterAll(async () => {
  await proxy?.close();
  await rm(t.workspace, { recursive: true, force: true });
});

/** A complex [hang] turn, followed by a fake-clock client through a proxy that then refuses everything. */
async function unreachableRun(options: { giveUpAfterMs?: number }) {
  proxy = await TcpProxy.start(t.url);
  const real = new MooringClient({ url: t.url });
  const session = await real.sessions.create({ workspace: t.workspace, agent: "simulated" });
  const submitted = await real.turns.submit(session.id, { prompt: "[hang]", loadClass: "complex" });
  let task = await real.tasks.get(submitted.taskId);
  while (task.status !== "running") task = await real.tasks.get(task.id, { waitMs: 5000 });
  const clock = new FakeClock();
  const client = new MooringClient({
    url: proxy.url,
    clock,
    transport: "poll",
    longPollMs: 500,
    leaseMs: LEASE_MS,
    sweepMs: SWEEP_MS,
    backoffMaxMs: 60_000,
  });
  const run = client.tasks.follow(task.id, options);
  await new Promise<void>((resolve) => run.on("state", (s) => s.state === "polling" && resolve()));
  proxy.refuse = true;
  proxy.cutAll();
  const lostAt = Date.parse(task.deadlineAt!) + LEASE_MS + SWEEP_MS;
  return { run, clock, lostAt, task, cleanup: () => real.tasks.cancel(task.id) };
}

/** Moves the fake clock timer by timer until the run settles (or the clock passes `until`). */
async function drive(run: Run, clock: FakeClock, until: number) {
  let outcome: { error?: unknown } | null = null;
  run.done().then(
    () => (outcome = {}),
    (error) => (outcome = { error }),
  );
  while (!outcome && clock.now() < until) {
    await clock.fireNext();
    // Let the client run what the timer started (its real I/O answers within milliseconds).
    await new Promise((r) => setImmediate(r));
  }
  return { outcome: outcome as { error?: unknown } | null, at: clock.now() };
}

it("an hour and more unreachable: no rejection before deadline + lease + sweep, then TaskLostError", async () => {
  const { run, clock, lostAt, cleanup } = await unreachableRun({});
  expect(lostAt - clock.now()).toBeGreaterThan(59 * 60_000);
  const { outcome, at } = await drive(run, clock, lostAt + 10 * 60_000);
  expect(outcome?.error).toBeInstanceOf(TaskLostError);
  // Time only moves forward and the loop stops as soon as the run settled: it settled at `at`.
  expect(at).toBeGreaterThanOrEqual(lostAt);
  expect(run.state).toBe("polling");
  proxy.refuse = false;
  await cleanup();
  await proxy.close();
});

it("giveUpAfterMs rejects with StillRunningError carrying the task, long before the deadline", async () => {
  const { run, clock, lostAt, task, cleanup } = await unreachableRun({ giveUpAfterMs: 10 * 60_000 });
  const start = clock.now();
  const { outcome, at } = await drive(run, clock, lostAt);
  const error = outcome?.error as StillRunningError;
  expect(error).toBeInstanceOf(StillRunningError);
  expect(error.task?.id).toBe(task.id);
  expect(error.task?.status).toBe("running");
  expect(at - start).toBeGreaterThanOrEqual(10 * 60_000);
  expect(at).toBeLessThan(lostAt);
  proxy.refuse = false;
  await cleanup();
  await proxy.close();
});
