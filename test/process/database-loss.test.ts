/**
 * The database goes away under load and comes back on the same port. Readiness flips to
 * 503, submits answer 503 NOT_READY (never 500), the process stays up, it gets ready again by
 * itself, and every turn it accepted reaches a terminal state. The LISTEN connection resumes too.
 *
 * Which terminal state: a turn whose agent finished while the database was away retries its
 * settlement; the lease expired meanwhile, so when the database is back the owner's settle retry
 * and the lease sweep race. The owner's write is fenced by (owner boot, attempt), not by lease
 * time, so whichever commits first wins and the other changes nothing: the turn ends `completed`
 * or `interrupted` (GATEWAY_RESTART), exactly once. Queued turns always complete.
 */
import { createServer } from "node:net";
import { rm } from "node:fs/promises";
import { pino } from "pino";
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { type EmbeddedDatabase, startEmbeddedPostgres } from "../../src/db/embedded.js";
import { GATE_LOCK_KEY } from "../../src/sql/gate-lock.js";
import { call, eventually } from "../support/gateway.js";
import { alive, exitedWithOutput, gatewayEnv, logsWith, Processes, tempDir } from "../support/lifecycle.js";
import { createSessions, submitPrompt, waitTerminal } from "../support/turns.js";
import { WsClient } from "../support/ws-client.js";

const log = pino({ level: "warn" });
let dataDir: string;
let port: number;
let pg: EmbeddedDatabase | null = null;
let workspace: string;
const procs = new Processes();

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

async function startPostgres(): Promise<EmbeddedDatabase> {
  pg = await startEmbeddedPostgres(dataDir, log, { port });
  return pg;
}

async function stopPostgres(): Promise<void> {
  const running = pg;
  pg = null;
  await running?.stop();
}

beforeAll(async () => {
  dataDir = await tempDir("mooring-dbloss-");
  workspace = await tempDir("ws-dbloss-");
  port = await freePort();
  await startPostgres();
}, 60_000);
afterEach(async (ctx) => {
  await procs.killAll(ctx.task.result?.state === "fail");
  if (!pg) await startPostgres();
});
afterAll(async () => {
  await procs.killAll();
  await stopPostgres();
  await rm(dataDir, { recursive: true, force: true });
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

it("Postgres stopped under load: 503 NOT_READY, no crash; back on the same port: ready by itself, no accepted turn lost", async () => {
  const url = pg!.url;
  const gw = await procs.spawn(gatewayEnv(url, { MOORING_INSTANCE_ID: "dbloss-a" }));
  await gw.waitReady();
  const sessions = await createSessions(gw.url, workspace, 11);
  // All at once: admitted together, 5 start and 5 wait. (One after another, on a loaded machine
  // the first turns could end before the last submits, which then started too.)
  const accepted: any[] = await Promise.all(
    sessions.slice(0, 10).map((id) => submitPrompt(gw.url, id, "[sleep 2000] [deltas 2]")),
  );
  const wasRunning = accepted.filter((t) => t.status === "running").map((t) => t.id);
  expect(wasRunning).toHaveLength(5);

  await stopPostgres();
  const stoppedAt = Date.now();

  // While it is away: readiness 503, API 503 NOT_READY, never a 500, the process stays up.
  const answers: number[] = [];
  const bad: string[] = [];
  const probe = async () => {
    const results = await Promise.all([
      call(gw.url, "GET", "/readyz"),
      call(gw.url, "POST", `/v1/sessions/${sessions[10]}/turns`, { prompt: "during the outage" }),
      call(gw.url, "GET", `/v1/tasks/${accepted[0].id}`),
      call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" }),
    ]);
    for (const r of results) {
      answers.push(r.status);
      if (r.status >= 500 && !(r.status === 503 && r.body?.error?.code === "NOT_READY"))
        bad.push(JSON.stringify(r.body));
      if (r.status === 202 || r.status === 201)
        bad.push(`accepted while the database was away: ${JSON.stringify(r.body)}`);
    }
    return results;
  };
  await eventually(async () => (await probe()).every((r) => r.status === 503), 20_000);
  console.log(`readiness 503 ${Date.now() - stoppedAt} ms after Postgres stopped`);
  const readyz = await call(gw.url, "GET", "/readyz");
  expect(readyz.body).toMatchObject({ ready: false, error: { code: "NOT_READY" }, instanceId: "dbloss-a" });
  const refused = await call(gw.url, "POST", `/v1/sessions/${sessions[10]}/turns`, {
    prompt: "during the outage",
  });
  expect(refused.status).toBe(503);
  expect(refused.body).toEqual({ error: { code: "NOT_READY", message: expect.any(String) } });
  // Keep it away until the running turns finished and tried to write (their leases expire meanwhile).
  await eventually(async () => {
    await probe();
    return (
      logsWith(gw, "settling failed; retrying").length +
        logsWith(gw, "event log flush failed; retrying").length >
      0
    );
  }, 20_000);
  await eventually(async () => {
    await probe();
    return Date.now() - stoppedAt > 2500;
  });
  if (bad.length > 0)
    console.log(logsWith(gw, "request failed").map((l) => JSON.stringify(l).slice(0, 1500)));
  expect(bad).toEqual([]);
  expect(answers.filter((s) => s === 500)).toEqual([]);
  expect(alive(gw)).toBe(true);

  const restartedAt = Date.now();
  await startPostgres();
  expect(pg!.url).toBe(url);
  await gw.waitReady();
  console.log(
    `ready again ${Date.now() - restartedAt} ms after Postgres came back (outage ${restartedAt - stoppedAt} ms)`,
  );

  // No accepted turn is lost: each reaches exactly one terminal state.
  const outcomes: Record<string, number> = {};
  for (const t of accepted) {
    const done = await waitTerminal(gw.url, t.id, 40_000);
    const key = `${wasRunning.includes(t.id) ? "running" : "queued"} → ${done.status}`;
    outcomes[key] = (outcomes[key] ?? 0) + 1;
    if (wasRunning.includes(t.id)) {
      expect(["completed", "interrupted"]).toContain(done.status);
      if (done.status === "interrupted") expect(done.error.code).toBe("GATEWAY_RESTART");
    } else {
      expect(done).toMatchObject({ status: "completed", attempt: 1 });
    }
    const ends = await call(gw.url, "GET", `/v1/tasks/${t.id}`);
    expect(ends.body.status).toBe(done.status);
  }
  console.log(`outcomes after the outage: ${JSON.stringify(outcomes)}`);
  // And it takes new work.
  const fresh = await submitPrompt(gw.url, sessions[10], "[deltas 1]");
  expect((await waitTerminal(gw.url, fresh.id)).status).toBe("completed");
  expect(alive(gw)).toBe(true);
  expect(gw.output()).not.toContain("unhandledRejection");
  expect(gw.output()).not.toContain("uncaughtException");
}, 90_000);

it("the LISTEN connection resumes after the database comes back (events reach another instance without polling)", async () => {
  // Polling backstops only after an hour: within this test, events reach B only through
  // notifications (and the catch-up read when its LISTEN connection is back).
  const slowPoll = { MOORING_POLL_MS: "3600000" };
  const a = await procs.spawn(gatewayEnv(pg!.url, { ...slowPoll, MOORING_INSTANCE_ID: "dbloss-listen-a" }));
  const b = await procs.spawn(gatewayEnv(pg!.url, { ...slowPoll, MOORING_INSTANCE_ID: "dbloss-listen-b" }));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const [session] = await createSessions(a.url, workspace, 1);

  const ws = await WsClient.connect(b.url);
  await ws.call("events.subscribe", { sessionId: session, afterSeq: 0 });
  const completed = (taskId: string, timeoutMs: number) =>
    ws.waitForEvent(session, (e) => e.taskId === taskId && e.type === "task.completed", timeoutMs);

  const before = await submitPrompt(a.url, session, "[deltas 1]");
  await completed(before.id, 10_000);

  await stopPostgres();
  const stoppedAt = Date.now();
  // Away for a few seconds, so reconnect attempts pile up (and a growing backoff would show). A
  // wait, not an assertion: the gateway logs no event per attempt of its LISTEN connection.
  await eventually(async () => {
    const both = [await call(a.url, "GET", "/readyz"), await call(b.url, "GET", "/readyz")];
    return both.every((r) => r.status === 503) && Date.now() - stoppedAt > 3000;
  });
  const restartedAt = Date.now();
  await startPostgres();
  await Promise.all([a.waitReady(), b.waitReady()]);

  const after = await submitPrompt(a.url, session, "[deltas 1]");
  const t0 = Date.now();
  await completed(after.id, 30_000);
  console.log(
    `after the database came back: B re-listened and delivered A's event ${Date.now() - t0} ms after submit (${Date.now() - restartedAt} ms after restart)`,
  );
  // B's poll never ran in this test (an hour): the notification brought it.
  await eventually(async () => logsWith(b, "listen connection re-established").length >= 1);
  await ws.close();
}, 90_000);

it("shutdown while the database is gone still exits", async () => {
  const gw = await procs.spawn(
    gatewayEnv(pg!.url, { MOORING_INSTANCE_ID: "dbloss-shutdown", MOORING_SHUTDOWN_GRACE_MS: "500" }),
  );
  await gw.waitReady();
  const [session] = await createSessions(gw.url, workspace, 1);
  const running = await submitPrompt(gw.url, session, "[sleep 30000]");
  expect(running.status).toBe("running");
  await stopPostgres();
  await eventually(async () => (await call(gw.url, "GET", "/readyz")).status === 503);

  const t0 = Date.now();
  gw.kill("SIGTERM");
  const code = await exitedWithOutput(gw);
  console.log(`shutdown without a database: exit ${code} after ${Date.now() - t0} ms`);
  // Through the shutdown's own steps, not the safety net that ends a shutdown which hangs.
  expect(code).toBe(0);
  expect(logsWith(gw, "shutdown: did not finish in time")).toEqual([]);
  expect(logsWith(gw, "shutdown: done")).toHaveLength(1);
}, 60_000);

it("connections killed inside transactions (pg_terminate_backend) neither crash the gateway nor leave its pool broken", async () => {
  const gw = await procs.spawn(gatewayEnv(pg!.url, { MOORING_INSTANCE_ID: "dbloss-terminate" }));
  await gw.waitReady();
  const sessions = await createSessions(gw.url, workspace, 3);
  const admin = postgres(pg!.url, { max: 2, onnotice: () => {} });
  try {
    // Hold the gate lock, so the gateway's gate transactions (an admission, a claim, the sweep)
    // wait inside their transactions; then kill those backends while they wait. Submits that arrive
    // while one admission waits wait in the gateway for it (domain/admission.ts), so at least one
    // backend waits, not one per submit.
    const holder = await admin.reserve();
    await holder`select pg_advisory_lock(${GATE_LOCK_KEY})`;
    const submits = sessions.map((id) =>
      call(gw.url, "POST", `/v1/sessions/${id}/turns`, { prompt: "[deltas 1]" }),
    );
    const waiting = await eventually(async () => {
      const rows = await admin`
        select pid from pg_stat_activity
        where application_name = 'mooring:dbloss-terminate' and wait_event_type = 'Lock'`;
      return rows.length >= 1 ? rows : null;
    });
    await admin`select pg_terminate_backend(pid) from pg_stat_activity
      where application_name = 'mooring:dbloss-terminate' and wait_event_type = 'Lock'`;
    await holder`select pg_advisory_unlock(${GATE_LOCK_KEY})`;
    holder.release();
    const answers = await Promise.all(submits);
    console.log(
      `killed ${waiting.length} waiting backends; submits answered ${answers.map((a) => a.status).join(", ")}`,
    );
    for (const a of answers) {
      // A killed transaction is "database away" for its request: 503 NOT_READY, never 500.
      if (a.status !== 202) expect(a.body.error.code).toBe("NOT_READY");
    }
    expect(logsWith(gw, "request failed")).toEqual([]);
    expect(alive(gw)).toBe(true);

    // The pool is healthy: a burst of requests soon answers in full (a connection left broken
    // would make some of them wait for connect_timeout, 10 s, and fail). The killed connections
    // may make a heartbeat fail first, so readiness can flicker for one beat.
    await eventually(async () => {
      const burst = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          i % 2 === 0
            ? call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" })
            : call(gw.url, "GET", "/v1/gate"),
        ),
      );
      return burst.every((b) => b.status === 200 || b.status === 201);
    }, 10_000);
    for (const [i, id] of sessions.entries()) {
      const task = answers[i].status === 202 ? answers[i].body : await submitPrompt(gw.url, id, "[deltas 1]");
      expect((await waitTerminal(gw.url, task.id)).status).toBe("completed");
    }
    expect(alive(gw)).toBe(true);
  } finally {
    await admin.end({ timeout: 1 });
  }
}, 60_000);
