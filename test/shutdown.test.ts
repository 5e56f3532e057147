/**
 * Issue 5: graceful shutdown. On SIGTERM a gateway stops admitting and claiming, lets running
 * turns finish for MOORING_SHUTDOWN_GRACE_MS, interrupts the rest (GATEWAY_RESTART) and releases
 * their leases at once, closes WebSockets with 1001, stops an embedded Postgres it started, and
 * exits 0. A second signal during the grace exits at once with code 130.
 */
import { existsSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { TestDatabase } from "./support/db.js";
import { call, eventually } from "./support/gateway.js";
import { cancelOpenTasks, createSessions, submitPrompt, waitTerminal } from "./support/turns.js";
import {
  exitedWithOutput,
  gatewayEnv,
  logLines,
  logsWith,
  Processes,
  tempDir,
  useProcessSuite,
} from "./support/lifecycle.js";
import { WsClient } from "./support/ws-client.js";

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

it("SIGTERM: short turns finish, the rest are interrupted and their slots go to another instance at once; sockets get 1001; exit 0", async () => {
  // A long lease: anything waiting for lease expiry would show as a 30 s delay.
  // The short turns outlast the moment the shutdown begins and end well within the grace, with
  // room for a loaded machine on both sides.
  const timers = { MOORING_LEASE_MS: "30000", MOORING_SHUTDOWN_GRACE_MS: "12000" };
  const a = await procs.spawn(gatewayEnv(db.url, { ...timers, MOORING_INSTANCE_ID: "shutdown-a" }));
  const b = await procs.spawn(gatewayEnv(db.url, { ...timers, MOORING_INSTANCE_ID: "shutdown-b" }));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const bootA = (await call(a.url, "GET", "/readyz")).body.bootId;
  const bootB = (await call(b.url, "GET", "/readyz")).body.bootId;
  const sessions = await createSessions(a.url, workspace, 12);

  const short = [
    await submitPrompt(a.url, sessions[0], "[sleep 6000]"),
    await submitPrompt(a.url, sessions[1], "[sleep 6000]"),
  ];
  const long: any[] = [];
  for (const id of sessions.slice(2, 5)) long.push(await submitPrompt(a.url, id, "[sleep 30000]"));
  expect([...short, ...long].map((t) => t.status)).toEqual(Array(5).fill("running"));
  const queued: any[] = [];
  // Long enough that four of them still wait when the grace ends (two take the short turns' slots)
  // and the two that took them are still running then: they start when the short turns end (6 s)
  // and the grace ends 12 s after the SIGTERM, which comes after these submits. At 8 s only ~2 s
  // of submits fit before they finished first and took A's released slots' place, under load.
  for (const id of sessions.slice(5, 11)) queued.push(await submitPrompt(b.url, id, "[sleep 12000]"));
  expect(queued.every((t) => t.status === "queued")).toBe(true);

  const ws = await WsClient.connect(a.url);
  const closed = ws.closed.then((c) => c.code);

  a.kill("SIGTERM");
  await eventually(async () => logsWith(a, "shutdown: stopped admitting and claiming").length === 1);
  // The premise: the short turns were still running when the shutdown began.
  const [stillRunning] = await db.sql`
    select count(*)::int as n from tasks where id = any(${short.map((t) => t.id)}::uuid[]) and status = 'running'`;
  expect(stillRunning.n).toBe(2);
  // No more admission on A while it drains.
  const refused = await call(a.url, "POST", `/v1/sessions/${sessions[11]}/turns`, { prompt: "late" });
  expect(refused.status).toBe(503);
  expect(refused.body.error.code).toBe("NOT_READY");

  expect(await exitedWithOutput(a)).toBe(0);
  expect(await closed).toBe(1001);

  // Turns that finished within the grace completed on A.
  for (const t of short) {
    const [row] = await db.sql`select status, owner_boot from tasks where id = ${t.id}`;
    expect(row).toEqual({ status: "completed", ownerBoot: bootA });
  }
  // The rest were interrupted when the grace ran out.
  const longRows = await db.sql`select * from tasks where id = any(${long.map((t) => t.id)}::uuid[])`;
  for (const row of longRows) {
    expect(row.status).toBe("interrupted");
    expect(row.error.code).toBe("GATEWAY_RESTART");
    expect(row.leaseExpiresAt).toBeNull();
  }
  const interruptedAt = Math.min(...longRows.map((r) => r.finishedAt.getTime()));

  // Every queued turn ran on B; those that waited for A's interrupted slots started right away.
  for (const t of queued) expect((await waitTerminal(b.url, t.id)).status).toBe("completed");
  const queuedRows = await db.sql`
    select started_at, owner_boot from tasks where id = any(${queued.map((t) => t.id)}::uuid[]) order by started_at`;
  expect(queuedRows.every((r) => r.ownerBoot === bootB)).toBe(true);
  const afterRelease = queuedRows.filter((r) => r.startedAt.getTime() >= interruptedAt);
  expect(afterRelease.length).toBeGreaterThanOrEqual(3);
  const firstThree = afterRelease.slice(0, 3).map((r) => r.startedAt.getTime() - interruptedAt);
  console.log(`B claimed A's released slots ${firstThree.join(", ")} ms after they were interrupted`);
  // Released by A, not found by lease expiry (30 s): half a lease is far from either.
  expect(Math.max(...firstThree)).toBeLessThan(15_000);

  // Lifecycle logs, in order.
  const msgs = logLines(a).map((l) => l.msg);
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
  expect(logsWith(a, "shutdown: running turns drained")[0]).toMatchObject({ finished: 2, interrupted: 3 });
  const [instance] = await db.sql`select stopped_at from instances where boot_id = ${bootA}`;
  expect(instance.stoppedAt).not.toBeNull();
}, 120_000);

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
  const t0 = Date.now();
  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(130);
  // At once, not after the 20 s grace.
  expect(Date.now() - t0).toBeLessThan(10_000);
  expect(logsWith(gw, "second signal: exiting at once")).toHaveLength(1);

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
  const t0 = Date.now();
  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(0);
  expect(Date.now() - t0).toBeLessThan(8000);
  expect(logsWith(gw, "startup failed")).toEqual([]);
  expect(logsWith(gw, "shutdown: done")).toHaveLength(1);
});
