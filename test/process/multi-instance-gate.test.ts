/**
 * Two real gateway processes on one database: the gate holds across both (sampled from the
 * database, never more than 5 running or 20 queued), and every accepted task runs exactly once.
 */
import { beforeAll, expect, it } from "vitest";
import { type Answer, eventually, type GatewayProcess } from "../support/gateway.js";
import { createSession, submit, waitTask } from "../support/turns.js";
import { useProcessGateway } from "../support/use-gateway.js";

const suite = useProcessGateway({ env: { LOG_LEVEL: "info", MOORING_POLL_MS: "100" }, workspace: true });
let a: GatewayProcess;
let b: GatewayProcess;

beforeAll(async () => {
  [a, b] = await Promise.all([
    suite.spawn({ MOORING_INSTANCE_ID: "gate-a" }),
    suite.spawn({ MOORING_INSTANCE_ID: "gate-b" }),
  ]);
  await Promise.all([a.waitReady(), b.waitReady()]);
});

it("holds 5 running / 20 queued across two instances, and runs every accepted task exactly once", async () => {
  const sessions = await Promise.all(
    Array.from({ length: 80 }, (_, i) => createSession(i % 2 ? a.url : b.url, suite.workspace)),
  );

  // Sample the gate from the database for the whole run.
  let sampling = true;
  let samples = 0;
  let maxActive = 0;
  let maxQueued = 0;
  const sampler = (async () => {
    while (sampling) {
      const [row] = await suite.sql<{ active: number; queued: number }[]>`
        select count(*) filter (where status in ('running', 'cancelling'))::int as active,
               count(*) filter (where status = 'queued')::int as queued
        from tasks`;
      maxActive = Math.max(maxActive, row.active);
      maxQueued = Math.max(maxQueued, row.queued);
      samples++;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();

  // Phase 1: a burst of 40 long turns, half to each instance. When nothing finishes during the
  // burst, exactly 25 are admitted in total, whichever instance took them; each turn that ended
  // before the last answer (a loaded machine can take 2 s for 40 submits) freed one place more.
  const burst = await Promise.all(
    sessions
      .slice(0, 40)
      .map((id, i) => submit(i % 2 ? a.url : b.url, id, { prompt: `[sleep 2000] burst ${i}` })),
  );
  const [{ ended }] = await suite.sql<{ ended: number }[]>`
    select count(*)::int as ended from tasks where finished_at is not null`;
  const acceptedBurst = burst.filter((r) => r.status === 202);
  expect(acceptedBurst.length).toBeGreaterThanOrEqual(25);
  expect(acceptedBurst.length).toBeLessThanOrEqual(25 + ended);
  for (const r of burst.filter((r) => r.status !== 202)) {
    expect(r.status).toBe(429);
    expect(r.body.error).toMatchObject({ code: "GATEWAY_BUSY", reason: "queue_full" });
    expect(r.headers.get("retry-after")).toBeTruthy();
  }
  const startedAtOnce = acceptedBurst.filter((r) => r.body.status === "running").length;
  expect(startedAtOnce).toBeGreaterThanOrEqual(5);
  expect(startedAtOnce).toBeLessThanOrEqual(5 + ended);

  // Phase 2: a trickle of short turns to both instances while the burst drains, so admissions and
  // claims happen on both sides at once: the next pair goes once another turn ended.
  const endedCount = async () =>
    (await suite.sql<{ n: number }[]>`select count(*)::int as n from tasks where finished_at is not null`)[0]
      .n;
  let endedSoFar = await endedCount();
  const trickle: Answer[] = [];
  for (let i = 40; i < 80; i += 2) {
    const pair = await Promise.all([
      submit(a.url, sessions[i], { prompt: `[sleep ${100 + (i % 5) * 50}] trickle ${i}` }),
      submit(b.url, sessions[i + 1], { prompt: `[sleep ${100 + (i % 3) * 50}] trickle ${i + 1}` }),
    ]);
    trickle.push(...pair);
    endedSoFar = await eventually(async () => {
      const now = await endedCount();
      return now > endedSoFar ? now : null;
    }, 30_000);
  }
  for (const r of trickle) expect([202, 429]).toContain(r.status);
  const accepted = [...acceptedBurst, ...trickle.filter((r) => r.status === 202)].map((r) => r.body);
  expect(accepted.length).toBeGreaterThan(25);

  const finals = await Promise.all(
    accepted.map((t, i) => waitTask(i % 2 ? a.url : b.url, t.id, undefined, 45_000)),
  );
  sampling = false;
  await sampler;

  expect(samples).toBeGreaterThan(100);
  expect(maxActive).toBe(5);
  expect(maxQueued).toBe(20);
  for (const t of finals) {
    expect(t.status).toBe("completed");
    expect(t.attempt).toBe(1);
  }

  // Only accepted submits wrote anything; each task started once and ended once, the end last.
  const rows = await suite.sql<{ id: string; attempt: number; ownerInstance: string }[]>`
    select id, attempt, owner_instance from tasks`;
  expect(rows.map((r) => r.id).sort()).toEqual(accepted.map((t) => t.id).sort());
  const logs = await suite.sql<{ taskId: string; types: string[] }[]>`
    select task_id, array_agg(type order by seq) as types from events where task_id is not null group by task_id`;
  expect(logs).toHaveLength(accepted.length);
  for (const { taskId, types } of logs) {
    const count = (type: string) => types.filter((t) => t === type).length;
    expect(count("task.started"), taskId).toBe(1);
    const terminals = types.filter((t) =>
      ["task.completed", "task.failed", "task.cancelled", "task.expired", "task.interrupted"].includes(t),
    );
    expect(terminals, taskId).toEqual(["task.completed"]);
    expect(types[types.length - 1], taskId).toBe("task.completed");
  }

  // Neither instance had to warn about anything (no failed claim or flush, no lost guard, no deadlock).
  for (const p of [a, b]) expect(p.output().match(/.*"level":(40|50|60).*/g) ?? []).toEqual([]);

  // Both instances ran turns.
  const owners = new Set(rows.map((r) => r.ownerInstance));
  expect(owners).toEqual(new Set(["gate-a", "gate-b"]));
}, 90_000);
