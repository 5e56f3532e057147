import { connect, createServer } from "node:net";
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { type Answer, call, eventually } from "../support/gateway.js";
import {
  alive,
  exitedWithOutput,
  gatewayEnv,
  logLines,
  logsWith,
  Processes,
  useProcessSuite,
} from "../support/lifecycle.js";
import { createSessions, submitPrompt, terminal } from "../support/turns.js";
import { WsClient } from "../support/ws-client.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-restart-", procs, (d, w) => {
  db = d;
  workspace = w;
});

it("kill -9 with 5 running and 20 queued: the 5 are interrupted at restart, the 20 run exactly once, in order", async () => {
  const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: "restart-a" });
  const first = await procs.spawn(env);
  await first.waitReady();
  const sessions = await createSessions(first.url, workspace, 25);
  const submitted = [];
  // The first five run until the kill (a slow machine must not let one finish and free a slot);
  // the twenty behind them only ever run after the restart.
  for (const [i, id] of sessions.entries())
    submitted.push(await submitPrompt(first.url, id, i < 5 ? "[hang]" : "[sleep 1000]"));
  const ids = submitted.map((t) => t.id);
  // The first five were claimed in their submit transactions; the rest wait.
  const before = await eventually(async () => {
    const rows =
      await db.sql`select id, status, queue_order, queue_deadline_at from tasks order by queue_order`;
    return rows.filter((r) => r.status === "running").length === 5 ? rows : null;
  });
  const running = before.filter((r) => r.status === "running").map((r) => r.id);
  const queued = before.filter((r) => r.status === "queued");
  expect(queued).toHaveLength(20);
  expect(running).toEqual(ids.slice(0, 5));
  const firstBoot = (await call(first.url, "GET", "/readyz")).body.bootId;

  first.kill("SIGKILL");
  expect(await exitedWithOutput(first)).toBe("SIGKILL");

  // Restart: measure spawn → /readyz 200, and keep asking for all 25 tasks the whole time.
  const t0 = Date.now();
  const second = await procs.spawn(env);
  let readyAt = 0;
  const nonOk: string[] = [];
  const seenStatuses = new Map<string, Set<string>>();
  let stopPolling = false;
  const poller = (async () => {
    while (!stopPolling && alive(second)) {
      // Whether /readyz had said 200 before this round was sent.
      const afterReady = readyAt > 0;
      const answers = await Promise.all(
        ids.map((id) =>
          call(second.url, "GET", `/v1/tasks/${id}`).catch(
            (err) => ({ status: 0, body: String(err) }) as Answer,
          ),
        ),
      );
      answers.forEach((a, i) => {
        if (a.status === 200) {
          const set = seenStatuses.get(ids[i]) ?? new Set<string>();
          set.add(a.body.status);
          seenStatuses.set(ids[i], set);
        } else if (afterReady || a.status !== 503 || a.body?.error?.code !== "NOT_READY") {
          nonOk.push(`${ids[i]}: ${a.status} ${JSON.stringify(a.body)}`);
        }
      });
      if (answers.every((a) => a.status === 200 && terminal.includes(a.body.status))) return;
    }
  })();
  await second.waitReady();
  readyAt = Date.now();
  const restartToReadyMs = readyAt - t0;
  // A figure, not an assertion: startup speed is measured by the benchmark (bench/recovery.ts).
  console.log(`restart → /readyz 200 in ${restartToReadyMs} ms (process spawn included)`);

  // Startup reconcile settled the previous boot's tasks before readiness: no lease wait.
  const atReady =
    await db.sql`select id, status, error, attempt from tasks where id = any(${running}::uuid[])`;
  for (const row of atReady) {
    expect(row.status).toBe("interrupted");
    expect(row.error.code).toBe("GATEWAY_RESTART");
    expect(row.attempt).toBe(1);
  }
  const reconcile = await eventually(async () => {
    const lines = logsWith(second, "startup reconcile done");
    return lines.length > 0 ? lines : null;
  });
  expect(reconcile).toHaveLength(1);
  expect(reconcile[0]).toMatchObject({ previousBoot: 5 });
  const ready = (await call(second.url, "GET", "/readyz")).body;
  expect(ready).toMatchObject({ ready: true, instanceId: "restart-a" });
  expect(ready.bootId).not.toBe(firstBoot);

  await poller;
  stopPolling = true;
  expect(nonOk).toEqual([]);
  expect(alive(second)).toBe(true);

  const after = await db.sql`
    select id, status, attempt, queue_order, queue_deadline_at, started_at, owner_boot, error from tasks order by queue_order`;
  const byId = new Map(after.map((r) => [r.id, r]));
  for (const id of running) {
    expect(byId.get(id)!.status).toBe("interrupted");
    // Once interrupted, always interrupted: the poller never saw it change afterwards.
    expect([...seenStatuses.get(id)!]).toEqual(["interrupted"]);
  }
  for (const q of queued) {
    const row = byId.get(q.id)!;
    expect(row.status).toBe("completed");
    expect(row.attempt).toBe(1);
    expect(row.ownerBoot).toBe(ready.bootId);
    expect(row.queueDeadlineAt.getTime()).toBe(q.queueDeadlineAt.getTime());
  }
  // Original order: a task admitted earlier never started later than one admitted after it.
  const started = queued.map((q) => byId.get(q.id)!);
  for (let i = 1; i < started.length; i++) {
    expect(started[i].startedAt.getTime()).toBeGreaterThanOrEqual(started[i - 1].startedAt.getTime());
  }
  // Exactly one start and one terminal event per task; the 5 each got task.interrupted.
  const events = await db.sql`
    select task_id, type, data from events where type in ('task.started', 'task.completed', 'task.interrupted')`;
  for (const id of ids) {
    const mine = events.filter((e) => e.taskId === id);
    expect(mine.filter((e) => e.type === "task.started")).toHaveLength(1);
    const end = mine.filter((e) => e.type !== "task.started");
    expect(end).toHaveLength(1);
    expect(end[0].type).toBe(running.includes(id) ? "task.interrupted" : "task.completed");
    if (running.includes(id)) expect(end[0].data.error.code).toBe("GATEWAY_RESTART");
  }
}, 90_000);

it("startup order: /healthz answers at once, /readyz and the API say NOT_READY until the database is there, then it gets ready by itself", async () => {
  // A port where nothing listens yet; later a TCP proxy to the test database opens on it.
  const proxy = createServer((client) => {
    const target = new URL(db.url);
    const upstream = connect(Number(target.port || 5432), target.hostname);
    client.pipe(upstream).pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const address = proxy.address();
  const port = typeof address === "object" && address ? address.port : 0;
  await new Promise((resolve) => proxy.close(resolve));
  const viaProxy = new URL(db.url);
  viaProxy.port = String(port);
  const gw = await procs.spawn(gatewayEnv(viaProxy.toString(), { MOORING_INSTANCE_ID: "no-db" }));
  try {
    expect((await call(gw.url, "GET", "/healthz")).status).toBe(200);
    const readyz = await call(gw.url, "GET", "/readyz");
    expect(readyz.status).toBe(503);
    expect(readyz.body).toMatchObject({ ready: false, error: { code: "NOT_READY" }, instanceId: "no-db" });
    const create = await call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
    expect(create.status).toBe(503);
    expect(create.body).toEqual({ error: { code: "NOT_READY", message: expect.any(String) } });
    expect(create.headers.get("retry-after")).toBe("1");
    const rpc = await call(gw.url, "POST", "/v1/rpc", { jsonrpc: "2.0", id: 1, method: "gate.status" });
    expect(rpc.status).toBe(503);
    // A JSON-RPC client gets a JSON-RPC error envelope for its call's id, with the spec's code in data.
    expect(rpc.body).toEqual({
      jsonrpc: "2.0",
      id: 1,
      error: { code: -32003, message: expect.any(String), data: { code: "NOT_READY", retryAfterSeconds: 1 } },
    });
    // It keeps retrying the database rather than crashing.
    await eventually(async () => logsWith(gw, "database unreachable at startup").length >= 2);
    expect(alive(gw)).toBe(true);
    expect((await call(gw.url, "GET", "/healthz")).status).toBe(200);

    // The database appears: migrate, register, reconcile, workers, then ready, with no restart.
    const appeared = Date.now();
    await new Promise<void>((resolve) => proxy.listen(port, "127.0.0.1", resolve));
    await gw.waitReady();
    console.log(`database appeared → /readyz 200 in ${Date.now() - appeared} ms`);
    const lines = await eventually(async () => {
      const msgs = logLines(gw).map((l) => l.msg);
      return msgs.includes("ready") ? msgs : null;
    });
    expect(lines.indexOf("startup reconcile done")).toBeGreaterThan(-1);
    expect(lines.indexOf("startup reconcile done")).toBeLessThan(lines.indexOf("ready"));
    expect((await call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" })).status).toBe(201);
  } finally {
    gw.kill("SIGKILL");
    await exitedWithOutput(gw);
    proxy.close();
  }
});

it("registers the instance (instanceId, bootId, host, pid, version), heartbeats it, reports it in /readyz and hello", async () => {
  const gw = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "registry-a" }));
  await gw.waitReady();
  const ready = (await call(gw.url, "GET", "/readyz")).body;
  // Host and pid only in the instances row (and /readyz with a valid token, test/process/access.test.ts).
  expect(ready).toEqual({
    ready: true,
    instanceId: "registry-a",
    bootId: expect.any(String),
    version: expect.any(String),
  });
  const [row] = await db.sql`select * from instances where boot_id = ${ready.bootId}`;
  expect(row).toMatchObject({
    instanceId: "registry-a",
    host: expect.any(String),
    pid: gw.child.pid,
    version: ready.version,
  });
  expect(row.stoppedAt).toBeNull();
  const firstBeat = row.heartbeatAt.getTime();
  await eventually(async () => {
    const [r] = await db.sql`select heartbeat_at from instances where boot_id = ${ready.bootId}`;
    return r.heartbeatAt.getTime() > firstBeat;
  });

  const ws = await WsClient.connect(gw.url);
  const hello = ws.received[0].message;
  await ws.close();
  // hello carries the docs/api.md, Streaming fields; host and pid are only in the instances row.
  expect(hello).toMatchObject({
    jsonrpc: "2.0",
    method: "hello",
    params: { instanceId: "registry-a", bootId: ready.bootId, version: ready.version },
  });

  // A clean stop marks the row stopped.
  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(0);
  const [stopped] = await db.sql`select stopped_at from instances where boot_id = ${ready.bootId}`;
  expect(stopped.stoppedAt).not.toBeNull();
});
