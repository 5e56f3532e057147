/**
 * Instance groups (MOORING_INSTANCE_GROUP, docs/api.md, Instance groups): real gateway processes of
 * groups `a` and `b` on one database. A session runs on the instances of the group that created
 * it (or an admin's choice) only; a killed group's orphans wait for an instance of that group.
 */
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import type { TestDatabase } from "../support/db.js";
import { call, eventually, startTestGateway } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, logsWith, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSession, submitPrompt, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-groups-", procs, (d, w) => {
  db = d;
  workspace = w;
});

const SWEEP_MS = 500;
const env = (group: string, id: string) =>
  gatewayEnv(db.url, {
    MOORING_INSTANCE_GROUP: group,
    MOORING_INSTANCE_ID: id,
    MOORING_RECOVERY: "continue",
    MOORING_SWEEP_MS: String(SWEEP_MS),
  });
const bootOf = async (url: string) => (await call(url, "GET", "/readyz")).body.bootId as string;

describe("instance groups", () => {
  it("a session created on group a runs only on a; an admin may place a session in another group", async () => {
    const a = await procs.spawn(env("a", "groups-a1"));
    const b = await procs.spawn(env("b", "groups-b1"));
    await Promise.all([a.waitReady(), b.waitReady()]);
    const [bootA, bootB] = await Promise.all([bootOf(a.url), bootOf(b.url)]);

    const onA = await call(a.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
    expect(onA.status).toBe(201);
    expect(onA.body.group).toBe("a");
    const onB = await createSession(b.url, workspace);
    // An admin (every caller without MOORING_TENANTS) names the group: created on a, run by b.
    const placed = await call(a.url, "POST", "/v1/sessions", { workspace, agent: "simulated", group: "b" });
    expect(placed.body.group).toBe("b");

    // Turns of a's session submitted through both instances, several at once (b is idle all along
    // and gets the gate notifications of every one of them).
    const tasks: any[] = [];
    for (let i = 0; i < 4; i++)
      tasks.push(await submitPrompt(i % 2 ? a.url : b.url, onA.body.id, "[sleep 50] [deltas 3]"));
    const other = await submitPrompt(a.url, onB, "[deltas 2]");
    const placedTask = await submitPrompt(a.url, placed.body.id, "[deltas 2]");
    for (const t of [...tasks, other, placedTask])
      expect((await waitTerminal(b.url, t.id)).status).toBe("completed");
    const owners = async (ids: string[]) =>
      (await db.sql`select distinct owner_boot from tasks where id = any(${ids}::uuid[])`).map(
        (r) => r.ownerBoot,
      );
    expect(await owners(tasks.map((t) => t.id))).toEqual([bootA]);
    expect(await owners([other.id, placedTask.id])).toEqual([bootB]);
    const rows = await db.sql`select distinct instance_group from tasks where session_id = ${onA.body.id}`;
    expect(rows.map((r) => r.instanceGroup)).toEqual(["a"]);

    // The instances and the gate show the groups.
    const instances = (await call(b.url, "GET", "/v1/instances")).body.items;
    const live = instances.filter((i: any) => i.status === "live");
    expect(Object.fromEntries(live.map((i: any) => [i.instanceId, i.group]))).toEqual({
      "groups-a1": "a",
      "groups-b1": "b",
    });
    const gate = (await call(a.url, "GET", "/v1/gate")).body;
    expect(gate.groups).toEqual([
      { name: "a", instances: 1, active: 0, queued: 0 },
      { name: "b", instances: 1, active: 0, queued: 0 },
    ]);

    // A group name that is no name is refused as a field, before anything is written.
    const bad = await call(a.url, "POST", "/v1/sessions", { workspace, agent: "simulated", group: "a b" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("INVALID_REQUEST");
  }, 120_000);

  it("a killed group's turns wait for an instance of that group: b does not take them over, a new a does", async () => {
    const a1 = await procs.spawn(env("a", "groups-a1"));
    const b = await procs.spawn(env("b", "groups-b1"));
    await Promise.all([a1.waitReady(), b.waitReady()]);
    const bootA1 = await bootOf(a1.url);
    const session = await createSession(a1.url, workspace);
    // A first turn saves the conversation, so the killed turn gets a continuation (MOORING_RECOVERY=continue).
    expect((await waitTerminal(a1.url, (await submitPrompt(a1.url, session, "[deltas 1]")).id)).status).toBe(
      "completed",
    );
    const running = await submitPrompt(a1.url, session, "[sleep 30000]");
    expect(running.status).toBe("running");
    const queued = await submitPrompt(b.url, session, "[deltas 2]");
    expect(queued.status).toBe("queued");
    // While a1 lives, nothing is waiting for a group.
    expect((await call(b.url, "GET", `/v1/tasks/${queued.id}`)).body.waitingForGroup).toBeUndefined();

    a1.kill("SIGKILL");
    await exitedWithOutput(a1);

    // Once a1's heartbeat is older than a lease, the queued turn says why it waits.
    const waiting = await eventually(async () => {
      const t = (await call(b.url, "GET", `/v1/tasks/${queued.id}`)).body;
      return t.waitingForGroup ? t : null;
    });
    expect(waiting).toMatchObject({ status: "queued", waitingForGroup: "a" });
    const snapshot = (await call(b.url, "GET", `/v1/sessions/${session}`)).body;
    expect(snapshot.turns.find((t: any) => t.id === queued.id).waitingForGroup).toBe("a");
    const gate = (await call(b.url, "GET", "/v1/gate")).body;
    expect(gate.groups).toContainEqual({ name: "a", instances: 0, active: 1, queued: 1 });

    // The orphan's lease has been expired for several of b's sweeps: b leaves it alone.
    await eventually(async () => {
      const [row] = await db.sql`
        select lease_expires_at < now() - ${4 * SWEEP_MS} * interval '1 millisecond' as long_expired
        from tasks where id = ${running.id}`;
      return row.longExpired;
    });
    const [still] = await db.sql`select status, owner_boot from tasks where id = ${running.id}`;
    expect(still).toMatchObject({ status: "running", ownerBoot: bootA1 });
    expect((await call(b.url, "GET", `/v1/tasks/${queued.id}`)).body.status).toBe("queued");
    expect(logsWith(b, "lease takeover")).toEqual([]);

    // A new instance of group a (another id, as on another host of the group) takes them over.
    const a2 = await procs.spawn(env("a", "groups-a2"));
    await a2.waitReady();
    const bootA2 = await bootOf(a2.url);
    const interrupted = await waitTerminal(b.url, running.id);
    expect(interrupted).toMatchObject({ status: "interrupted", error: { code: "GATEWAY_RESTART" } });
    expect(logsWith(a2, "lease takeover").length + logsWith(a2, "startup reconcile").length).toBeGreaterThan(
      0,
    );
    const done = await waitTerminal(b.url, queued.id);
    expect(done.status).toBe("completed");
    expect(done.waitingForGroup).toBeUndefined();
    const continuation = await eventually(
      async () => (await db.sql`select * from tasks where continues_task_id = ${running.id}`)[0],
    );
    expect((await waitTerminal(b.url, continuation.id)).status).toBe("completed");
    const ran = await db.sql`
      select distinct owner_boot from tasks where id = any(${[queued.id, continuation.id]}::uuid[])`;
    expect(ran.map((r) => r.ownerBoot)).toEqual([bootA2]);
  }, 150_000);

  it("only an admin may set a session's group (INVALID_REQUEST, reason admin_only)", async () => {
    const gw = await startTestGateway(db.url, {
      MOORING_INSTANCE_GROUP: "a",
      MOORING_TENANTS: JSON.stringify({
        ops: { tokens: ["groups-ops-token-0001"], admin: true },
        dev: { tokens: ["groups-dev-token-0001"] },
      }),
    });
    try {
      const as = (token: string) => ({ authorization: `Bearer ${token}` });
      const body = { workspace, agent: "simulated", group: "b" };
      const refused = await call(gw.url, "POST", "/v1/sessions", body, as("groups-dev-token-0001"));
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({
        code: "INVALID_REQUEST",
        reason: "admin_only",
        field: "group",
      });
      const rpc = await call(
        gw.url,
        "POST",
        "/v1/rpc",
        { jsonrpc: "2.0", id: 1, method: "sessions.create", params: body },
        as("groups-dev-token-0001"),
      );
      expect(rpc.body.error.data).toMatchObject({ code: "INVALID_REQUEST", reason: "admin_only" });
      const own = await call(
        gw.url,
        "POST",
        "/v1/sessions",
        { workspace, agent: "simulated" },
        as("groups-dev-token-0001"),
      );
      expect(own.body.group).toBe("a");
      const placed = await call(gw.url, "POST", "/v1/sessions", body, as("groups-ops-token-0001"));
      expect(placed.status).toBe(201);
      expect(placed.body.group).toBe("b");
    } finally {
      await gw.stop();
    }
  }, 30_000);

  it("MOORING_INSTANCE_GROUP defaults to `default` and must be a plain name", () => {
    // Unset or empty (as every option): the default.
    expect(loadConfig({}).instanceGroup).toBe("default");
    expect(loadConfig({ MOORING_INSTANCE_GROUP: "" }).instanceGroup).toBe("default");
    expect(loadConfig({ MOORING_INSTANCE_GROUP: "host-1.eu_west" }).instanceGroup).toBe("host-1.eu_west");
    for (const bad of ["a b", "-a", "x".repeat(65)])
      expect(() => loadConfig({ MOORING_INSTANCE_GROUP: bad }), bad).toThrow(ConfigError);
    expect(loadConfig({}).drainTimeoutMs).toBe(600_000);
  });
});
