/**
 * Direct tests of src/sql/task-lease.ts on a real database: the heartbeat's renewal of every lease
 * a boot holds (with the status report, and SKIP LOCKED passing over a held row) and the renewal of
 * one lease that waits for its row. Each asserts the owner and status fences, so a wrong statement
 * fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Sql } from "../../src/db/client.js";
import { taskRenewLease, taskRenewLeases } from "../../src/sql/task-lease.js";
import { addSession, addTask, useSqlTestDatabase, whileTaskHeld } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

/** Seconds from the database's now() to the task's lease end. */
async function leaseLeftSeconds(sql: Sql, taskId: string): Promise<number> {
  const [row] =
    await sql`select extract(epoch from (lease_expires_at - now())) as s from tasks where id = ${taskId}`;
  return Number(row.s);
}

describe("taskRenewLeases / taskRenewLease", () => {
  const HOUR = 60 * 60_000;

  it("renews every active lease of the boot and reports status and attempt, nothing of others", async () => {
    const boot = randomUUID();
    const s = await addSession(t.sql);
    const running = await addTask(t.sql, s, {
      status: "running",
      ownerBoot: boot,
      attempt: 3,
      leaseInMs: -1_000,
    });
    const cancelling = await addTask(t.sql, s, { status: "cancelling", ownerBoot: boot, leaseInMs: 1_000 });
    const settled = await addTask(t.sql, s, { status: "completed", ownerBoot: boot, leaseInMs: 1_000 });
    const foreign = await addTask(t.sql, s, { status: "running", leaseInMs: 1_000 });

    const renewed = await taskRenewLeases(t.sql, boot, HOUR);
    expect(renewed.sort((a, b) => a.status.localeCompare(b.status))).toEqual([
      { id: cancelling.id, attempt: 1, status: "cancelling", renewed: true },
      { id: running.id, attempt: 3, status: "running", renewed: true },
    ]);
    for (const id of [running.id, cancelling.id])
      expect(await leaseLeftSeconds(t.sql, id)).toBeGreaterThan(3500);
    for (const id of [settled.id, foreign.id]) expect(await leaseLeftSeconds(t.sql, id)).toBeLessThan(2);
  });

  it("skips a locked lease without waiting and still reports it owned", async () => {
    const boot = randomUUID();
    const s = await addSession(t.sql);
    const held = await addTask(t.sql, s, { status: "running", ownerBoot: boot, leaseInMs: 1_000 });
    const free = await addTask(t.sql, s, { status: "running", ownerBoot: boot, leaseInMs: 1_000 });
    const renewed = await whileTaskHeld(t.sql, held.id, () => taskRenewLeases(t.sql, boot, HOUR));
    expect(new Map(renewed.map((r) => [r.id, r.renewed]))).toEqual(
      new Map([
        [held.id, false],
        [free.id, true],
      ]),
    );
    expect(await leaseLeftSeconds(t.sql, held.id)).toBeLessThan(2);
    expect(await taskRenewLease(t.sql, held.id, boot, HOUR)).toBe(true);
    expect(await leaseLeftSeconds(t.sql, held.id)).toBeGreaterThan(3500);
  });

  it("renews one lease only for its owner while the task is active", async () => {
    const boot = randomUUID();
    const s = await addSession(t.sql);
    const running = await addTask(t.sql, s, { status: "running", ownerBoot: boot, leaseInMs: 1_000 });
    const settled = await addTask(t.sql, s, { status: "failed", ownerBoot: boot, leaseInMs: 1_000 });
    expect(await taskRenewLease(t.sql, running.id, randomUUID(), HOUR)).toBe(false);
    expect(await taskRenewLease(t.sql, settled.id, boot, HOUR)).toBe(false);
    expect(await leaseLeftSeconds(t.sql, running.id)).toBeLessThan(2);
    expect(await leaseLeftSeconds(t.sql, settled.id)).toBeLessThan(2);
  });
});
