/**
 * Direct tests of the instance-group and drain operations of src/sql/instance.ts on a real
 * database: the live groups, the gate by group, and the drain request with its read-back by the
 * heartbeat. A wrong statement fails here. The claim, the lease sweep and the queue check by group:
 * task-claim, task-orphans and task-read.test.ts.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  instanceGroupUsage,
  instanceHeartbeat,
  instanceLiveGroups,
  instanceMarkDraining,
  instanceMarkStopped,
  instanceRegister,
  instanceRequestDrain,
} from "../../src/sql/instance.js";
import { addSession, addTask, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

/** A task of a session of `group`, carrying the group as admission copies it. */
async function taskOf(group: string, fixture: Parameters<typeof addTask>[2] = {}) {
  const id = await addSession(t.sql);
  await t.sql`update sessions set instance_group = ${group} where id = ${id}`;
  const row = await addTask(t.sql, id, fixture);
  await t.sql`update tasks set instance_group = ${group} where id = ${row.id}`;
  return row;
}

describe("instanceLiveGroups", () => {
  it("a group is live with a running, recently heard instance that is not draining", async () => {
    const live = { bootId: randomUUID(), instanceId: "live-a", host: "h", pid: 1, version: "1", group: "a" };
    const stopped = { ...live, bootId: randomUUID(), instanceId: "stopped-b", group: "b" };
    const silent = { ...live, bootId: randomUUID(), instanceId: "silent-c", group: "c" };
    for (const i of [live, stopped, silent]) await instanceRegister(t.sql, i);
    await instanceMarkStopped(t.sql, stopped.bootId);
    await t.sql`update instances set heartbeat_at = now() - interval '1 hour' where boot_id = ${silent.bootId}`;
    expect([...(await instanceLiveGroups(t.sql, ["a", "b", "c", "d"], 30_000))]).toEqual(["a"]);
    expect([...(await instanceLiveGroups(t.sql, ["b", "c"], 30_000))]).toEqual([]);
    expect([...(await instanceLiveGroups(t.sql, [], 30_000))]).toEqual([]);
    // A draining instance takes no more turns: its group is not live through it.
    const draining = { ...live, bootId: randomUUID(), instanceId: "draining-d", group: "d" };
    await instanceRegister(t.sql, draining);
    expect([...(await instanceLiveGroups(t.sql, ["d"], 30_000))]).toEqual(["d"]);
    await instanceMarkDraining(t.sql, draining.bootId);
    expect([...(await instanceLiveGroups(t.sql, ["d"], 30_000))]).toEqual([]);
  });
});

describe("instanceGroupUsage", () => {
  it("lists live groups and groups with unfinished work, distinct instances, draining ones left out", async () => {
    const live = { bootId: randomUUID(), instanceId: "live-a", host: "h", pid: 1, version: "1", group: "a" };
    const again = { ...live, bootId: randomUUID() };
    const stopped = { ...live, bootId: randomUUID(), instanceId: "stopped-b", group: "b" };
    const draining = { ...live, bootId: randomUUID(), instanceId: "draining-d", group: "d" };
    const silent = { ...live, bootId: randomUUID(), instanceId: "silent-c", group: "c" };
    for (const i of [live, again, stopped, draining, silent]) await instanceRegister(t.sql, i);
    await instanceMarkStopped(t.sql, stopped.bootId);
    await instanceMarkDraining(t.sql, draining.bootId);
    await t.sql`update instances set heartbeat_at = now() - interval '1 hour' where boot_id = ${silent.bootId}`;

    await taskOf("b");
    await taskOf("b", { status: "running" });
    await taskOf("b", { status: "cancelling" });
    await taskOf("c", { status: "completed" });
    expect(await instanceGroupUsage(t.sql, 30_000)).toEqual([
      { name: "a", instances: 1, active: 0, queued: 0 },
      { name: "b", instances: 0, active: 2, queued: 1 },
    ]);
  });
});

describe("instanceRequestDrain", () => {
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
