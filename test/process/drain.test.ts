/**
 * Drain (README, Deployment: several hosts): POST /v1/instances/:instanceId/drain (on any instance)
 * or SIGHUP makes an instance stop claiming, let its running turns finish within
 * MOORING_DRAIN_TIMEOUT_MS, hand the rest over and exit 0, answering /readyz 503 `draining`
 * meanwhile. Real gateway processes on one database.
 */
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually, startTestGateway } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, logsWith, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSessions, submitPrompt, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-drain-", procs, (d, w) => {
  db = d;
  workspace = w;
});

// A long lease: anything that waited for a lease to expire would show as a 30 s delay.
const env = (id: string, extra: Record<string, string> = {}) =>
  gatewayEnv(db.url, {
    MOORING_INSTANCE_ID: id,
    MOORING_LEASE_MS: "30000",
    MOORING_MAX_ACTIVE: "2",
    MOORING_RECOVERY: "continue",
    MOORING_DRAIN_TIMEOUT_MS: "30000",
    ...extra,
  });
const bootOf = async (url: string) => (await call(url, "GET", "/readyz")).body.bootId as string;

it("a drain asked on another instance: running turns finish on the drained one, the queued one runs elsewhere, exit 0", async () => {
  const a = await procs.spawn(env("drain-a"));
  const b = await procs.spawn(env("drain-b"));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const [bootA, bootB] = await Promise.all([bootOf(a.url), bootOf(b.url)]);
  const sessions = await createSessions(a.url, workspace, 3);
  // Two turns run on a (claimed in their submits); the gate (2) is full, so the third waits.
  const running = [
    await submitPrompt(a.url, sessions[0], "[sleep 8000] [deltas 2]"),
    await submitPrompt(a.url, sessions[1], "[sleep 8000] [deltas 2]"),
  ];
  expect(running.map((t) => t.status)).toEqual(["running", "running"]);
  const queued = await submitPrompt(a.url, sessions[2], "[deltas 2]");
  expect(queued.status).toBe("queued");

  // Asked on b: a learns it through the database.
  const asked = await call(b.url, "POST", "/v1/instances/drain-a/drain");
  expect(asked.status).toBe(200);
  expect(asked.body).toEqual({ instanceId: "drain-a", draining: true });

  // While its turns run, a says it is draining, to probes and API callers alike.
  const readyz = await eventually(async () => {
    const r = await call(a.url, "GET", "/readyz");
    return r.status === 503 ? r : null;
  });
  expect(readyz.body.error).toMatchObject({ code: "NOT_READY", reason: "draining" });
  const api = await call(a.url, "GET", "/v1/gate");
  expect(api.status).toBe(503);
  expect(api.body.error).toMatchObject({ code: "NOT_READY", reason: "draining" });
  const listed = (await call(b.url, "GET", "/v1/instances")).body.items;
  expect(listed.find((i: any) => i.bootId === bootA)).toMatchObject({ draining: true });
  expect(listed.find((i: any) => i.bootId === bootB)).toMatchObject({ draining: false });
  const [midway] = await db.sql`select status from tasks where id = ${running[0].id}`;
  expect(midway.status).toBe("running");

  expect(await exitedWithOutput(a)).toBe(0);
  for (const t of running) {
    const done = await waitTerminal(b.url, t.id);
    expect(done).toMatchObject({ status: "completed", attempt: 1 });
  }
  expect((await waitTerminal(b.url, queued.id)).status).toBe("completed");
  const owners =
    await db.sql`select id, owner_boot from tasks where id = any(${[...running, queued].map((t) => t.id)}::uuid[])`;
  const ownerOf = new Map(owners.map((r) => [r.id, r.ownerBoot]));
  expect(running.map((t) => ownerOf.get(t.id))).toEqual([bootA, bootA]);
  expect(ownerOf.get(queued.id)).toBe(bootB);
  const [{ interrupted }] =
    await db.sql`select count(*)::int as interrupted from tasks where status = 'interrupted'`;
  expect(interrupted).toBe(0);
  expect(logsWith(a, "drain requested through the API")).toHaveLength(1);
  expect(logsWith(a, "shutdown: done")).toHaveLength(1);
  const [row] = await db.sql`select stopped_at, drain_requested_at from instances where boot_id = ${bootA}`;
  expect(row.stoppedAt).not.toBeNull();
  expect(row.drainRequestedAt).not.toBeNull();
}, 90_000);

it("SIGHUP: a turn that does not fit the drain timeout is interrupted and continued on another instance; exit 0", async () => {
  const a = await procs.spawn(env("hup-a", { MOORING_DRAIN_TIMEOUT_MS: "1000" }));
  const b = await procs.spawn(env("hup-b"));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const bootB = await bootOf(b.url);
  const [session] = await createSessions(a.url, workspace, 1);
  // A first turn saves the conversation, which a continuation needs.
  expect((await waitTerminal(a.url, (await submitPrompt(a.url, session, "[deltas 1]")).id)).status).toBe(
    "completed",
  );
  const long = await submitPrompt(a.url, session, "[sleep 30000]");
  expect(long.status).toBe("running");

  a.kill("SIGHUP");
  expect(await exitedWithOutput(a)).toBe(0);
  expect(logsWith(a, "drain requested")[0]).toMatchObject({ signal: "SIGHUP" });
  const [instanceRow] =
    await db.sql`select drain_requested_at, stopped_at from instances where instance_id = 'hup-a'`;
  expect(instanceRow.drainRequestedAt).not.toBeNull();
  expect(instanceRow.stoppedAt).not.toBeNull();
  const ended = await waitTerminal(b.url, long.id);
  expect(ended).toMatchObject({ status: "interrupted", error: { code: "GATEWAY_RESTART" } });
  const continuation = await eventually(
    async () => (await db.sql`select id from tasks where continues_task_id = ${long.id}`)[0],
  );
  const done = await waitTerminal(b.url, continuation.id);
  expect(done.status).toBe("completed");
  const [row] = await db.sql`select owner_boot from tasks where id = ${continuation.id}`;
  expect(row.ownerBoot).toBe(bootB);
}, 90_000);

it("only an admin drains, and only a live instance", async () => {
  const gw = await startTestGateway(db.url, {
    MOORING_INSTANCE_ID: "drain-inproc",
    MOORING_TENANTS: JSON.stringify({
      ops: { tokens: ["drain-ops-token-0001"], admin: true },
      dev: { tokens: ["drain-dev-token-0001"] },
    }),
  });
  let stopped = false;
  try {
    const as = (token: string) => ({ authorization: `Bearer ${token}` });
    const refused = await call(
      gw.url,
      "POST",
      "/v1/instances/drain-inproc/drain",
      undefined,
      as("drain-dev-token-0001"),
    );
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "INVALID_REQUEST", reason: "admin_only" });
    const [row] =
      await db.sql`select drain_requested_at from instances where boot_id = ${gw.identity.bootId}`;
    expect(row.drainRequestedAt).toBeNull();
    const unknown = await call(
      gw.url,
      "POST",
      "/v1/instances/nobody/drain",
      undefined,
      as("drain-ops-token-0001"),
    );
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: "NOT_FOUND", reason: "instance_not_found" });
    // Its own id: without a process to end (in-process), the gateway drains and stops itself.
    const own = await call(
      gw.url,
      "POST",
      "/v1/instances/drain-inproc/drain",
      undefined,
      as("drain-ops-token-0001"),
    );
    expect(own.status).toBe(200);
    await eventually(async () => {
      const [r] = await db.sql`select stopped_at from instances where boot_id = ${gw.identity.bootId}`;
      return r.stoppedAt !== null;
    });
    stopped = true;
  } finally {
    await gw.stop();
  }
  expect(stopped).toBe(true);
}, 30_000);
