/**
 * Direct tests of the instance-group and drain operations in src/sql on a real database: the claim
 * and the lease sweep keep to the claimant's group (with the gate's counts still global), the
 * queue check asks for the group, live groups and the gate by group, and the drain request with
 * its read-back by the heartbeat. A wrong statement fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Tx } from "../../src/db/client.js";
import { taskClaim } from "../../src/sql/task-claim.js";
import {
  instanceGroupUsage,
  instanceHeartbeat,
  instanceLiveGroups,
  instanceMarkDraining,
  instanceMarkStopped,
  instanceRegister,
  instanceRequestDrain,
} from "../../src/sql/instance.js";
import { taskLockExpiredLeases } from "../../src/sql/task-orphans.js";
import { taskAnyQueued } from "../../src/sql/task-read.js";
import {
  addSession,
  addTask,
  interruptLocked,
  taskById,
  useSqlTestDatabase,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();
const inTx = <T>(fn: (tx: Tx) => Promise<T>) => t.sql.begin((tx) => fn(tx)) as Promise<T>;

/** A session of `group` (the fixture makes `default` ones). */
async function sessionOf(group: string): Promise<string> {
  const id = await addSession(t.sql);
  await t.sql`update sessions set instance_group = ${group} where id = ${id}`;
  return id;
}

/** A task of a session of `group`, carrying the group as admission copies it. */
async function taskOf(group: string, fixture: Parameters<typeof addTask>[2] = {}) {
  const row = await addTask(t.sql, await sessionOf(group), fixture);
  await t.sql`update tasks set instance_group = ${group} where id = ${row.id}`;
  return row;
}

const claimant = (group: string) => ({
  instanceId: `i-${group}`,
  bootId: randomUUID(),
  leaseMs: 30_000,
  group,
});
const claim = (group: string, maxActive = 5, limit = 5) =>
  inTx(async (tx) => (await taskClaim(tx, claimant(group), maxActive, "{}", limit)).map((c) => c.row.id));

describe("taskClaim by instance group", () => {
  it("claims only the claimant's group's queued tasks", async () => {
    const a1 = await taskOf("a");
    const b1 = await taskOf("b");
    const a2 = await taskOf("a");
    expect((await claim("a")).sort()).toEqual([a1.id, a2.id].sort());
    expect((await taskById(t.sql, b1.id)).status).toBe("queued");
    expect(await claim("a")).toEqual([]);
    expect(await claim("b")).toEqual([b1.id]);
  });

  it("counts every group's running turns against the global limit", async () => {
    await taskOf("b", { status: "running" });
    const a = await taskOf("a");
    expect(await claim("a", 1)).toEqual([]);
    expect(await claim("a", 2)).toEqual([a.id]);
  });
});

describe("taskLockExpiredLeases by instance group", () => {
  it("takes over only the sweeper's own group's expired leases", async () => {
    const a = await taskOf("a", { status: "running", leaseInMs: -1_000 });
    const b = await taskOf("b", { status: "running", leaseInMs: -1_000 });
    const swept = await inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, randomUUID(), "a")));
    expect(swept.map((r) => r.id)).toEqual([a.id]);
    expect((await taskById(t.sql, b.id)).status).toBe("running");
    expect(
      (await inTx((tx) => interruptLocked(tx, taskLockExpiredLeases(tx, randomUUID(), "b")))).map(
        (r) => r.id,
      ),
    ).toEqual([b.id]);
  });
});

describe("taskAnyQueued by instance group", () => {
  it("sees only the asked group's queue", async () => {
    await taskOf("b");
    expect(await taskAnyQueued(t.sql, "a")).toBe(false);
    expect(await taskAnyQueued(t.sql, "b")).toBe(true);
    await taskOf("a", { status: "running" });
    expect(await taskAnyQueued(t.sql, "a")).toBe(false);
  });
});

describe("live groups and the gate by group", () => {
  it("a group is live with a running, recently heard instance; usage lists live groups and groups with work", async () => {
    const live = { bootId: randomUUID(), instanceId: "live-a", host: "h", pid: 1, version: "1", group: "a" };
    const stopped = { ...live, bootId: randomUUID(), instanceId: "stopped-b", group: "b" };
    const silent = { ...live, bootId: randomUUID(), instanceId: "silent-c", group: "c" };
    for (const i of [live, stopped, silent]) await instanceRegister(t.sql, i);
    await instanceMarkStopped(t.sql, stopped.bootId);
    await t.sql`update instances set heartbeat_at = now() - interval '1 hour' where boot_id = ${silent.bootId}`;
    expect([...(await instanceLiveGroups(t.sql, ["a", "b", "c", "d"], 30_000))]).toEqual(["a"]);
    expect([...(await instanceLiveGroups(t.sql, [], 30_000))]).toEqual([]);
    // A draining instance takes no more turns: its group is not live through it.
    const draining = { ...live, bootId: randomUUID(), instanceId: "draining-d", group: "d" };
    await instanceRegister(t.sql, draining);
    expect([...(await instanceLiveGroups(t.sql, ["d"], 30_000))]).toEqual(["d"]);
    await instanceMarkDraining(t.sql, draining.bootId);
    expect([...(await instanceLiveGroups(t.sql, ["d"], 30_000))]).toEqual([]);

    await taskOf("b");
    await taskOf("b", { status: "running" });
    await taskOf("c", { status: "completed" });
    expect(await instanceGroupUsage(t.sql, 30_000)).toEqual([
      { name: "a", instances: 1, active: 0, queued: 0 },
      { name: "b", instances: 0, active: 1, queued: 1 },
    ]);
  });
});

describe("instanceRequestDrain and the heartbeat's read-back", () => {
  it("marks the live boots of the instance only; their heartbeat then says so; a repeat keeps the first time", async () => {
    const base = { host: "h", pid: 1, version: "1", instanceId: "gw-1" };
    const current = { ...base, bootId: randomUUID() };
    const earlier = { ...base, bootId: randomUUID() };
    const other = { ...base, bootId: randomUUID(), instanceId: "gw-2" };
    for (const i of [current, earlier, other]) await instanceRegister(t.sql, i);
    await instanceMarkStopped(t.sql, earlier.bootId);

    expect(await instanceHeartbeat(t.sql, current.bootId)).toEqual({ drainRequested: false });
    expect(await instanceRequestDrain(t.sql, "gw-1", 30_000)).toEqual([current.bootId]);
    const [first] = await t.sql`select drain_requested_at from instances where boot_id = ${current.bootId}`;
    expect(await instanceHeartbeat(t.sql, current.bootId)).toEqual({ drainRequested: true });
    expect(await instanceHeartbeat(t.sql, other.bootId)).toEqual({ drainRequested: false });
    const [stoppedRow] =
      await t.sql`select drain_requested_at from instances where boot_id = ${earlier.bootId}`;
    expect(stoppedRow.drainRequestedAt).toBeNull();

    expect(await instanceRequestDrain(t.sql, "gw-1", 30_000)).toEqual([current.bootId]);
    const [again] = await t.sql`select drain_requested_at from instances where boot_id = ${current.bootId}`;
    expect(again.drainRequestedAt).toEqual(first.drainRequestedAt);

    // Not a live instance: nothing to drain (a silent one, an unknown id).
    await t.sql`update instances set heartbeat_at = now() - interval '1 hour' where boot_id = ${other.bootId}`;
    expect(await instanceRequestDrain(t.sql, "gw-2", 30_000)).toEqual([]);
    expect(await instanceRequestDrain(t.sql, "nobody", 30_000)).toEqual([]);
  });
});
