
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually } from "../support/gateway.js";
import {
  alive,
  exitedWithOutput,
  gatewayEnv,
  logsWith,
  Processes,
  useProcessSuite,
} from "../support/lifecycle.js";
import { createSessions, submitPrompt, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-takeover-", procs, (d, w) => {
  db = d;
  workspace = w;
});

it("the survivor takes over a killed instance's tasks after the lease expires and keeps the global limits", async () => {
  const leaseMs = 1500;
  const a = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "takeover-a" }));
  const b = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "takeover-b" }));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const bootA = (await call(a.url, "GET", "/readyz")).body.bootId;
  const bootB = (await call(b.url, "GET", "/readyz")).body.bootId;

  // Sample the limits in the database for the whole test.
  let sampling = true;
  let samples = 0;
  let maxRunning = 0;
  let maxQueued = 0;
  const sampler = (async () => {
    while (sampling) {
      const [row] = await db.sql`
        select count(*) filter (where status in ('running', 'cancelling'))::int as running,
               count(*) filter (where status = 'queued')::int as queued from tasks`;
      maxRunning = Math.max(maxRunning, row.running);
      maxQueued = Math.max(maxQueued, row.queued);
      samples++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();

  // A claims five long turns in their submit transactions; twenty more wait, submitted on both.
  const sessions = await createSessions(a.url, workspace, 30);
  const onA: any[] = [];
  for (const id of sessions.slice(0, 5)) onA.push(await submitPrompt(a.url, id, "[sleep 20000]"));
  expect(onA.map((t) => t.status)).toEqual(Array(5).fill("running"));
  const waiting: any[] = [];
  for (const [i, id] of sessions.slice(5, 25).entries()) {
    waiting.push(await submitPrompt(i % 2 === 0 ? a.url : b.url, id, "[sleep 300]"));
  }
  expect(waiting.every((t) => t.status === "queued")).toBe(true);
  // The queue is full across both instances.
  const refused = await call(b.url, "POST", `/v1/sessions/${sessions[25]}/turns`, { prompt: "one too many" });
  expect(refused.status).toBe(429);
  expect(refused.body.error).toMatchObject({ code: "GATEWAY_BUSY", reason: "queue_full" });

  const [lease] = await db.sql`
    select max(lease_expires_at) as at from tasks where owner_boot = ${bootA} and status = 'running'`;
  a.kill("SIGKILL");
  const killedAt = Date.now();
  await exitedWithOutput(a);

  // The survivor interrupts A's five, but not before their leases ran out.
  const interrupted = await eventually(async () => {
    const rows =
      await db.sql`select * from tasks where id = any(${onA.map((t) => t.id)}::uuid[]) and status <> 'running'`;
    return rows.length === 5 ? rows : null;
  }, 15_000);
  for (const row of interrupted) {
    expect(row.status).toBe("interrupted");
    expect(row.error).toMatchObject({ code: "GATEWAY_RESTART" });
    expect(row.ownerBoot).toBe(bootA);
    expect(row.finishedAt.getTime()).toBeGreaterThanOrEqual(lease.at.getTime());
  }
  console.log(
    `takeover ${Math.min(...interrupted.map((r) => r.finishedAt.getTime())) - killedAt} ms after kill -9 (lease ${leaseMs} ms)`,
  );
  const takeover = await eventually(async () => {
    const lines = logsWith(b, "lease takeover");
    return lines.flatMap((l) => l.tasks).length >= 5 ? lines : null;
  });
  const taken = takeover.flatMap((l) => l.tasks.map((t: { id: string }) => t.id));
  expect(taken.sort()).toEqual(onA.map((t) => t.id).sort());
  expect(takeover[0].tasks[0]).toMatchObject({ owner: "takeover-a", attempt: 1 });
  const events = await db.sql`select task_id, data from events where type = 'task.interrupted'`;
  expect(events.map((e) => e.taskId).sort()).toEqual(onA.map((t) => t.id).sort());

  // Admission goes on on the survivor while the queue drains.
  const late: any[] = [];
  for (const id of sessions.slice(25, 30)) {
    const res = await eventually(async () => {
      const r = await call(b.url, "POST", `/v1/sessions/${id}/turns`, { prompt: "[sleep 200]" });
      return r.status === 202 ? r : null;
    });
    late.push(res.body);
  }
  for (const t of [...waiting, ...late]) {
    const done = await waitTerminal(b.url, t.id);
    expect(done.status).toBe("completed");
    expect(done.attempt).toBe(1);
  }
  const owners = await db.sql`
    select distinct owner_boot from tasks where id = any(${[...waiting, ...late].map((t) => t.id)}::uuid[])`;
  expect(owners.map((o) => o.ownerBoot)).toEqual([bootB]);

  sampling = false;
  await sampler;
  expect(samples).toBeGreaterThan(50);
  expect(maxRunning).toBe(5);
  expect(maxQueued).toBe(20);
  expect(alive(b)).toBe(true);
}, 90_000);
