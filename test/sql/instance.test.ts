/**
 * Direct tests of the instance rows in src/sql/instance.ts on a real database: a boot registered
 * (again, safely), its heartbeat, its drain and stop recorded, and the list of recent instances
 * with their leases. Each asserts that it touches its own boot's row only, so a wrong statement
 * fails here. The groups and the drain request: instance-groups.test.ts.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  instanceHeartbeat,
  instanceList,
  instanceMarkDraining,
  instanceMarkStopped,
  instanceRegister,
} from "../../src/sql/instance.js";
import { addSession, addTask, instanceInfo, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

const instance = instanceInfo;

const rowOf = async (bootId: string) => {
  const [row] = await t.sql`select * from instances where boot_id = ${bootId}`;
  return row;
};

describe("instanceRegister", () => {
  it("keeps one row per boot, an earlier boot of the instance its own", async () => {
    const first = instance("gw-1");
    const second = { ...instance("gw-1"), group: "gpu" };
    await instanceRegister(t.sql, first);
    await instanceRegister(t.sql, second);
    const rows =
      await t.sql`select boot_id, instance_id, instance_group, host, pid, version, stopped_at from instances`;
    expect(new Map(rows.map((r) => [r.bootId, r]))).toEqual(
      new Map([
        [
          first.bootId,
          {
            bootId: first.bootId,
            instanceId: "gw-1",
            instanceGroup: "default",
            host: "host",
            pid: 42,
            version: "1.0.0",
            stoppedAt: null,
          },
        ],
        [
          second.bootId,
          {
            bootId: second.bootId,
            instanceId: "gw-1",
            instanceGroup: "gpu",
            host: "host",
            pid: 42,
            version: "1.0.0",
            stoppedAt: null,
          },
        ],
      ]),
    );
  });

  it("registers a boot again without an error (a retried registration, the row's service started again): its row is live again", async () => {
    const boot = instance("gw-again");
    await instanceRegister(t.sql, boot);
    await instanceMarkStopped(t.sql, boot.bootId);
    await t.sql`update instances set heartbeat_at = now() - interval '1 hour'`;
    await instanceRegister(t.sql, boot);
    const rows = await t.sql`
      select stopped_at, heartbeat_at > now() - interval '1 minute' as fresh from instances where boot_id = ${boot.bootId}`;
    expect(rows).toEqual([{ stoppedAt: null, fresh: true }]);
  });
});

describe("instanceHeartbeat / instanceMarkStopped", () => {
  it("heartbeats and stops one boot only", async () => {
    const first = instance("gw-1");
    const second = instance("gw-1");
    await instanceRegister(t.sql, first);
    await instanceRegister(t.sql, second);
    const backdated = new Date("2026-01-01T00:00:00Z");
    await t.sql`update instances set heartbeat_at = ${backdated}`;
    expect(await instanceHeartbeat(t.sql, second.bootId)).toEqual({ drainRequested: false });
    await instanceMarkStopped(t.sql, first.bootId);
    expect(await rowOf(first.bootId)).toMatchObject({ heartbeatAt: backdated });
    expect((await rowOf(first.bootId)).stoppedAt).toBeInstanceOf(Date);
    expect(await rowOf(second.bootId)).toMatchObject({ stoppedAt: null });
    expect((await rowOf(second.bootId)).heartbeatAt.getTime()).toBeGreaterThan(backdated.getTime());
  });

  it("answers no drain for a boot without a row", async () => {
    expect(await instanceHeartbeat(t.sql, randomUUID())).toEqual({ drainRequested: false });
  });
});

describe("instanceMarkDraining", () => {
  it("records the drain of this boot only, keeping its first time, and the heartbeat then reports it", async () => {
    const draining = instance("gw-1");
    const other = instance("gw-1");
    for (const i of [draining, other]) await instanceRegister(t.sql, i);
    await instanceMarkDraining(t.sql, draining.bootId);
    const first = (await rowOf(draining.bootId)).drainRequestedAt;
    expect(first).toBeInstanceOf(Date);
    expect((await rowOf(other.bootId)).drainRequestedAt).toBeNull();
    await t.sql`update instances set drain_requested_at = drain_requested_at - interval '1 minute' where boot_id = ${draining.bootId}`;
    const backdated = (await rowOf(draining.bootId)).drainRequestedAt;
    await instanceMarkDraining(t.sql, draining.bootId);
    expect((await rowOf(draining.bootId)).drainRequestedAt).toEqual(backdated);
    expect(await instanceHeartbeat(t.sql, draining.bootId)).toEqual({ drainRequested: true });
    expect(await instanceHeartbeat(t.sql, other.bootId)).toEqual({ drainRequested: false });
  });
});

describe("instanceList", () => {
  it("lists instances heard from within the window, live first, then newest heartbeat, with their leases", async () => {
    const stopped = instance("gw-stopped");
    const older = instance("gw-older");
    const newer = instance("gw-newer");
    const gone = instance("gw-gone");
    for (const i of [stopped, older, newer, gone]) await instanceRegister(t.sql, i);
    await t.sql`update instances set heartbeat_at = now() - interval '30 seconds' where boot_id = ${older.bootId}`;
    await t.sql`update instances set heartbeat_at = now() - interval '2 hours' where boot_id = ${gone.bootId}`;
    await instanceMarkStopped(t.sql, stopped.bootId);
    const s = await addSession(t.sql);
    await addTask(t.sql, s, { status: "running", ownerBoot: newer.bootId });
    await addTask(t.sql, s, { status: "cancelling", ownerBoot: newer.bootId });
    await addTask(t.sql, s, { status: "completed", ownerBoot: newer.bootId });

    const listed = await instanceList(t.sql, 60 * 60_000, 10);
    expect(listed.map((i) => i.instanceId)).toEqual(["gw-newer", "gw-older", "gw-stopped"]);
    expect(listed.map((i) => i.runningTasks)).toEqual([2, 0, 0]);
    expect(listed[1].heartbeatAgeMs).toBeGreaterThanOrEqual(30_000);
    expect(listed[1].heartbeatAgeMs).toBeLessThan(60 * 60_000);
    expect(listed[0]).toMatchObject({
      bootId: newer.bootId,
      group: "default",
      host: "host",
      pid: 42,
      version: "1.0.0",
      drainRequestedAt: null,
    });
    expect((await instanceList(t.sql, 60 * 60_000, 1)).map((i) => i.instanceId)).toEqual(["gw-newer"]);
    expect((await instanceList(t.sql, 10_000, 10)).map((i) => i.instanceId)).toEqual([
      "gw-newer",
      "gw-stopped",
    ]);
  });
});
