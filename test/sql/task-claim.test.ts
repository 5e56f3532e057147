/**
 * Direct tests of src/sql/task-claim.ts on a real database: queued tasks moved to running with
 * their `task.started` events, under the global and per-tenant limits, one turn per session (its
 * head first), fair between tenants, only the claimant's instance group's, and passing over rows
 * another transaction holds. A wrong statement fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { Tx } from "../../src/db/client.js";
import { type Claimant, taskClaim } from "../../src/sql/task-claim.js";
import { addSession, addTask, taskById, useSqlTestDatabase, whileTaskHeld } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();
const inTx = <T>(fn: (tx: Tx) => Promise<T>) => t.sql.begin((tx) => fn(tx)) as Promise<T>;

const claimant = (group = "default"): Claimant => ({
  instanceId: `i-${group}`,
  bootId: randomUUID(),
  leaseMs: 30_000,
  group,
});
const claim = ({
  maxActive = 5,
  limit = 5,
  limits = {},
  group = "default",
}: Partial<{
  maxActive: number;
  limit: number;
  limits: Record<string, unknown>;
  group: string;
}> = {}) =>
  inTx(async (tx) =>
    (await taskClaim(tx, claimant(group), maxActive, JSON.stringify(limits), limit)).map((c) => c.row.id),
  );

describe("taskClaim", () => {
  it("starts queued tasks for the claimant with their task.started events at the session's next seq", async () => {
    const s = await addSession(t.sql, { lastSeq: 3 });
    const queued = await addTask(t.sql, s);
    const who = claimant();
    const [claimed] = await inTx((tx) => taskClaim(tx, who, 5, "{}", 5));
    expect(claimed.row).toMatchObject({
      id: queued.id,
      status: "running",
      attempt: queued.attempt + 1,
      ownerInstance: who.instanceId,
      ownerBoot: who.bootId,
      firstSeq: 4,
      lastSeq: 4,
      version: queued.version + 1,
    });
    const { startedAt, deadlineAt, leaseExpiresAt } = claimed.row;
    expect(deadlineAt!.getTime() - startedAt!.getTime()).toBe(60_000);
    expect(leaseExpiresAt!.getTime() - startedAt!.getTime()).toBe(30_000);
    expect(claimed.started).toMatchObject({ sessionId: s, seq: 4, taskId: queued.id, type: "task.started" });
    expect(claimed.started.data).toEqual({ attempt: 1, deadlineAt: deadlineAt!.toISOString() });
    const [session] = await t.sql`select last_seq from sessions where id = ${s}`;
    expect(session.lastSeq).toBe(4);
    const events = await t.sql`select seq, type from events where session_id = ${s}`;
    expect(events).toEqual([{ seq: 4, type: "task.started" }]);
  });

  it("claims nothing for a limit of zero, and no more than the limit or the free global slots", async () => {
    const sessions = [await addSession(t.sql), await addSession(t.sql), await addSession(t.sql)];
    for (const s of sessions) await addTask(t.sql, s);
    await addTask(t.sql, await addSession(t.sql), { status: "cancelling" });
    expect(await claim({ limit: 0 })).toEqual([]);
    expect(await claim({ limit: 1 })).toHaveLength(1);
    expect(await claim({ maxActive: 3 })).toHaveLength(1);
    expect(await claim({ maxActive: 3 })).toEqual([]);
  });

  it("starts one turn per session: none while one runs, else its head (an interrupting turn first)", async () => {
    const busy = await addSession(t.sql);
    await addTask(t.sql, busy, { status: "running" });
    const waitingBehind = await addTask(t.sql, busy);
    const s = await addSession(t.sql);
    await addTask(t.sql, s);
    const jumper = await addTask(t.sql, s);
    await t.sql`update tasks set jumps_queue = true where id = ${jumper.id}`;
    expect(await claim()).toEqual([jumper.id]);
    expect((await taskById(t.sql, waitingBehind.id)).status).toBe("queued");
    expect(await claim()).toEqual([]);
  });

  it("gives each slot to the tenant with the fewest running turns, ties to the oldest, never past a tenant's limit", async () => {
    const queue = async (tenant: string, n: number) => {
      const ids = [];
      for (let i = 0; i < n; i++) ids.push((await addTask(t.sql, await addSession(t.sql, { tenant }))).id);
      return ids;
    };
    await addTask(t.sql, await addSession(t.sql, { tenant: "a" }), { status: "running" });
    const a = await queue("a", 3);
    const b = await queue("b", 3);
    // a runs 1: b's first two turns come before a's first (level 0, 1 against a's 1), then the ties by age.
    expect(await claim({ maxActive: 10, limit: 3 })).toEqual([b[0], b[1], a[0]].sort(byQueueOrder(a, b)));
    expect(await claim({ maxActive: 10, limits: { a: { active: 2 } } })).toEqual([b[2]]);
  });

  it("passes over a queued task another transaction holds", async () => {
    const held = await addTask(t.sql, await addSession(t.sql));
    const free = await addTask(t.sql, await addSession(t.sql));
    expect(await whileTaskHeld(t.sql, held.id, () => claim())).toEqual([free.id]);
    expect((await taskById(t.sql, held.id)).status).toBe("queued");
  });
});

/** The claim answers in queue order; a and b were queued in that order. */
const byQueueOrder = (a: string[], b: string[]) => {
  const order = [...a, ...b];
  return (x: string, y: string) => order.indexOf(x) - order.indexOf(y);
};

describe("taskClaim by instance group", () => {
  /** A task of a session of `group`, carrying the group as admission copies it. */
  async function taskOf(group: string, fixture: Parameters<typeof addTask>[2] = {}) {
    const id = await addSession(t.sql);
    await t.sql`update sessions set instance_group = ${group} where id = ${id}`;
    const row = await addTask(t.sql, id, fixture);
    await t.sql`update tasks set instance_group = ${group} where id = ${row.id}`;
    return row;
  }

  it("claims only the claimant's group's queued tasks", async () => {
    const a1 = await taskOf("a");
    const b1 = await taskOf("b");
    const a2 = await taskOf("a");
    expect((await claim({ group: "a" })).sort()).toEqual([a1.id, a2.id].sort());
    expect((await taskById(t.sql, b1.id)).status).toBe("queued");
    expect(await claim({ group: "a" })).toEqual([]);
    expect(await claim({ group: "b" })).toEqual([b1.id]);
  });

  it("counts every group's running turns against the global limit", async () => {
    await taskOf("b", { status: "running" });
    const a = await taskOf("a");
    expect(await claim({ group: "a", maxActive: 1 })).toEqual([]);
    expect(await claim({ group: "a", maxActive: 2 })).toEqual([a.id]);
  });
});
