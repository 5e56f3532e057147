/**
 * Graceful shutdown. On SIGTERM a gateway stops admitting and claiming, lets running turns finish
 * for MOORING_SHUTDOWN_GRACE_MS, interrupts the rest (GATEWAY_RESTART) and releases their leases
 * at once, closes WebSockets with 1001, stops an embedded Postgres it started, and exits 0. A
 * second signal during the grace exits at once with code 130. The grace itself is tested on
 * in-process gateways whose clocks the test steps (a 2 min grace in a second); the signals, exit
 * codes and log lines on real processes.
 */
import { existsSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually, startTestGateway } from "../support/gateway.js";
import { cancelOpenTasks, createSessions, submitPrompt, waitTerminal } from "../support/turns.js";
import {
  exitedWithOutput,
  fastTimers,
  gatewayEnv,
  logLines,
  logsWith,
  Processes,
  tempDir,
  useProcessSuite,
} from "../support/lifecycle.js";
import { WsClient } from "../support/ws-client.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-shutdown-", procs, (d, w) => {
  db = d;
  workspace = w;
});

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

it("shutdown: turns that end within the grace finish, the rest are interrupted at its end and their slots go to another instance at once; sockets get 1001", async () => {
  // Two gateways in this process, each on a clock the test steps: the grace (2 min), the agents'
  // sleeps and the end of the queued turns are steps of a clock, not waits. A long lease: a slot
  // found by lease expiry (the database's clock, real time) would show as a 30 s delay.
  const records: Record<string, any>[] = [];
  // The ping interval outlasts the steps: a minute's jump of the clock is a minute's silence of
  // the socket's peer to the ping watchdog, which would cut it (1006) before the shutdown closes it.
  const env = {
    ...fastTimers,
    MOORING_LEASE_MS: "30000",
    MOORING_SHUTDOWN_GRACE_MS: "120000",
    MOORING_WS_PING_MS: "300000",
  };
  const a = await startTestGateway(
    db.url,
    { ...env, MOORING_INSTANCE_ID: "shutdown-a" },
    { onLog: (r) => records.push(r) },
  );
  const b = await startTestGateway(db.url, { ...env, MOORING_INSTANCE_ID: "shutdown-b" });
  try {
    await cancelOpenTasks(a.url, db.sql);
    const bootA = a.identity.bootId;
    const bootB = b.identity.bootId;
    const sessions = await createSessions(a.url, workspace, 12);
    // A minute of A's clock: they run however long the submits below take.
    const short = [
      await submitPrompt(a.url, sessions[0], "[sleep 60000]"),
      await submitPrompt(a.url, sessions[1], "[sleep 60000]"),
    ];
    const long: any[] = [];
    for (const id of sessions.slice(2, 5)) long.push(await submitPrompt(a.url, id, "[hang]"));
    expect([...short, ...long].map((t) => t.status)).toEqual(Array(5).fill("running"));
    const queued: any[] = [];
    for (const id of sessions.slice(5, 11)) queued.push(await submitPrompt(b.url, id, "[sleep 60000]"));
    expect(queued.every((t) => t.status === "queued")).toBe(true);

    const ws = await WsClient.connect(a.url);
    const closed = ws.closed.then((c) => c.code);

    const stopped = a.stop();
    // No more admission on A while it drains.
    const refused = await call(a.url, "POST", `/v1/sessions/${sessions[11]}/turns`, { prompt: "late" });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("NOT_READY");
    await eventually(async () => records.some((r) => r.msg === "shutdown: stopped admitting and claiming"));
    // The premise: the short turns were still running when the shutdown began.
    const [stillRunning] = await db.sql`
      select count(*)::int as n from tasks where id = any(${short.map((t) => t.id)}::uuid[]) and status = 'running'`;
    expect(stillRunning.n).toBe(2);

    // Half the grace: the short turns end, on A.
    await a.clock.advance(60_000);
    for (const t of short) {
      const row = await eventually(async () => {
        const [r] = await db.sql`select status, owner_boot from tasks where id = ${t.id}`;
        return r.status === "completed" ? r : null;
      });
      expect(row).toEqual({ status: "completed", ownerBoot: bootA });
    }
    // The grace ends: the rest are interrupted, their leases released.
    await a.clock.advance(60_000);
    await stopped;
    expect(await closed).toBe(1001);
    const longRows = await db.sql`select * from tasks where id = any(${long.map((t) => t.id)}::uuid[])`;
    for (const row of longRows) {
      expect(row.status).toBe("interrupted");
      expect(row.error.code).toBe("GATEWAY_RESTART");
      expect(row.leaseExpiresAt).toBeNull();
    }
    const interruptedAt = Math.min(...longRows.map((r) => r.finishedAt.getTime()));

    // Every queued turn runs on B: five took the slots A freed (two at the short turns' end, three
    // when A released the rest); the sixth waits for one of them.
    const ids = queued.map((t) => t.id);
    await eventually(async () => {
      const [r] =
        await db.sql`select count(*)::int as n from tasks where id = any(${ids}::uuid[]) and status = 'running'`;
      return r.n === 5;
    });
    await b.clock.advance(60_000);
    await eventually(async () => {
      const [r] = await db.sql`
        select count(*) filter (where status = 'completed')::int as done, count(*) filter (where status = 'running')::int as running
        from tasks where id = any(${ids}::uuid[])`;
      return r.done === 5 && r.running === 1;
    });
    await b.clock.advance(60_000);
    for (const t of queued) expect((await waitTerminal(b.url, t.id)).status).toBe("completed");
    const queuedRows = await db.sql`
      select started_at, owner_boot from tasks where id = any(${ids}::uuid[]) order by started_at`;
    expect(queuedRows.every((r) => r.ownerBoot === bootB)).toBe(true);
    const afterRelease = queuedRows.filter((r) => r.startedAt.getTime() >= interruptedAt);
    expect(afterRelease.length).toBeGreaterThanOrEqual(3);
    const firstThree = afterRelease.slice(0, 3).map((r) => r.startedAt.getTime() - interruptedAt);
    // Released by A, not found by lease expiry (30 s of database time): half a lease is far from either.
    expect(Math.max(...firstThree)).toBeLessThan(15_000);

    // Lifecycle logs, in order.
    const msgs = records.map((l) => l.msg);
    const phases = [
      "shutdown: stopped admitting and claiming",
      "shutdown: running turns drained",
      "shutdown: event log flushed",
      "shutdown: done",
    ];
    const at = phases.map((p) => msgs.indexOf(p));
    expect(
      at.every((i) => i >= 0),
      JSON.stringify(at),
    ).toBe(true);
    expect([...at].sort((x, y) => x - y)).toEqual(at);
    expect(records.find((r) => r.msg === "shutdown: running turns drained")).toMatchObject({
      finished: 2,
      interrupted: 3,
    });
    const [instance] = await db.sql`select stopped_at from instances where boot_id = ${bootA}`;
    expect(instance.stoppedAt).not.toBeNull();
  } finally {
    // A failure above may leave turns running: they would hold a stop for its whole grace.
    await cancelOpenTasks(b.url, db.sql).catch(() => {});
    await a.stop();
    await b.stop();
  }
}, 120_000);

it("SIGTERM: a turn still running when the grace ends is interrupted and released, sockets get 1001, the phases are logged in order, exit 0", async () => {
  const gw = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "shutdown-process" }));
  await gw.waitReady();
  await cancelOpenTasks(gw.url, db.sql);
  const boot = (await call(gw.url, "GET", "/readyz")).body.bootId;
  const [session] = await createSessions(gw.url, workspace, 1);
  const task = await submitPrompt(gw.url, session, "[hang]");
  expect(task.status).toBe("running");
  const ws = await WsClient.connect(gw.url);
  const closed = ws.closed.then((c) => c.code);

  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(0);
  expect(await closed).toBe(1001);
  const [row] = await db.sql`select status, error, lease_expires_at from tasks where id = ${task.id}`;
  expect(row).toMatchObject({
    status: "interrupted",
    error: { code: "GATEWAY_RESTART" },
    leaseExpiresAt: null,
  });

  const msgs = logLines(gw).map((l) => l.msg);
  const phases = [
    "shutdown requested",
    "shutdown: stopped admitting and claiming",
    "shutdown: running turns drained",
    "shutdown: event log flushed",
    "shutdown: done",
  ];
  const at = phases.map((p) => msgs.indexOf(p));
  expect(
    at.every((i) => i >= 0),
    JSON.stringify(at),
  ).toBe(true);
  expect([...at].sort((x, y) => x - y)).toEqual(at);
  expect(logsWith(gw, "shutdown: running turns drained")[0]).toMatchObject({ finished: 0, interrupted: 1 });
  const [instance] = await db.sql`select stopped_at from instances where boot_id = ${boot}`;
  expect(instance.stoppedAt).not.toBeNull();
}, 60_000);

it("a second signal during the grace exits at once (code 130); the next boot settles what was left running", async () => {
  const env = gatewayEnv(db.url, {
    MOORING_INSTANCE_ID: "shutdown-twice",
    MOORING_SHUTDOWN_GRACE_MS: "20000",
  });
  const gw = await procs.spawn(env);
  await gw.waitReady();
  await cancelOpenTasks(gw.url, db.sql); // whatever an earlier test left must not hold the slots
  const [session] = await createSessions(gw.url, workspace, 1);
  const task = await submitPrompt(gw.url, session, "[sleep 30000]");
  expect(task.status).toBe("running");

  gw.kill("SIGTERM");
  await eventually(async () => logsWith(gw, "shutdown: stopped admitting and claiming").length === 1);
  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(130);
  expect(logsWith(gw, "second signal: exiting at once")).toHaveLength(1);
  // At once, not at the end of the 20 s grace: the grace never ended (no drain, the turn it would
  // have interrupted still marked running until the next boot settles it).
  expect(logsWith(gw, "shutdown: running turns drained")).toEqual([]);
  expect((await db.sql`select status from tasks where id = ${task.id}`)[0].status).toBe("running");

  const again = await procs.spawn(env);
  await again.waitReady();
  const [row] = await db.sql`select status, error from tasks where id = ${task.id}`;
  expect(row).toMatchObject({ status: "interrupted", error: { code: "GATEWAY_RESTART" } });
});

it("with an embedded Postgres, SIGTERM stops the postmaster too", async () => {
  const dataDir = await tempDir("mooring-embedded-");
  try {
    const gw = await procs.spawn(
      gatewayEnv("", {
        DATABASE_URL: "",
        MOORING_DATA_DIR: dataDir,
        MOORING_INSTANCE_ID: "shutdown-embedded",
      }),
    );
    await gw.waitReady();
    const pidFile = join(dataDir, "pg", "postmaster.pid");
    const postmaster = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
    expect(processAlive(postmaster)).toBe(true);
    const [session] = await createSessions(gw.url, workspace, 1);
    const task = await submitPrompt(gw.url, session, "[deltas 2]");
    expect((await waitTerminal(gw.url, task.id)).status).toBe("completed");

    gw.kill("SIGTERM");
    expect(await exitedWithOutput(gw)).toBe(0);
    expect(processAlive(postmaster)).toBe(false);
    expect(existsSync(pidFile)).toBe(false);
    expect(logsWith(gw, "embedded postgres stopped")).toHaveLength(1);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}, 90_000);

it("SIGTERM while still waiting for the database exits cleanly (0), not as a failed startup", async () => {
  const missing = new URL(db.url);
  missing.port = "1"; // nothing listens on port 1
  const gw = await procs.spawn(gatewayEnv(missing.toString(), { MOORING_INSTANCE_ID: "shutdown-no-db" }));
  await eventually(async () => logsWith(gw, "database unreachable at startup").length >= 1);
  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(0);
  expect(logsWith(gw, "startup failed")).toEqual([]);
  expect(logsWith(gw, "shutdown: done")).toHaveLength(1);
  // The signal ended the wait for the database: no retry after it.
  const msgs = logLines(gw).map((l) => l.msg);
  const retries = msgs.flatMap((msg, i) => (msg.startsWith("database unreachable at startup") ? [i] : []));
  expect(Math.max(...retries)).toBeLessThan(msgs.indexOf("shutdown requested"));
});
