/**
 * Direct tests of the admission gate in src/sql on a real database: its lock (gate-lock.ts), the
 * queue limits decided in SQL (gate-check.ts), its counts and the fair queue's positions
 * (gate-status.ts), and the savepoint that lets one submit of a pipelined batch fail alone
 * (gate-submit-savepoint.ts). A wrong statement fails here.
 */
import { describe, expect, it } from "vitest";
import type { Tx } from "../../src/db/client.js";
import { pipelined } from "../../src/db/pipeline.js";
import {
  gateIsQueueFull,
  gateIsTenantQueueFull,
  gateRefuseIfQueueOverflows,
  QUEUE_FULL_SQLSTATE,
  TENANT_QUEUE_FULL_SQLSTATE,
} from "../../src/sql/gate-check.js";
import { GATE_LOCK_KEY, gateLock } from "../../src/sql/gate-lock.js";
import {
  gateCountActiveAndQueued,
  gateCountByTenant,
  gateListQueuePositions,
  gateQueuePositions,
} from "../../src/sql/gate-status.js";
import { gateCloseSubmit, gateOpenSubmit } from "../../src/sql/gate-submit-savepoint.js";
import { taskInsertQueued } from "../../src/sql/task-insert.js";
import {
  addSession,
  addTask,
  someoneWaitsForALock,
  sqlStateOf,
  useSqlTestDatabase,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();
const MISSING = "00000000-0000-4000-8000-000000000000";

/** `n` queued turns of a fresh session of `tenant`, in admission order. */
async function queue(tenant: string, n: number): Promise<string[]> {
  const id = await addSession(t.sql, { tenant });
  const rows = [];
  for (let i = 0; i < n; i++) rows.push(await addTask(t.sql, id, { status: "queued" }));
  return rows.map((r) => r.id);
}

describe("gateRefuseIfQueueOverflows", () => {
  const check = (ids: string[], maxQueued: number, limits: Record<string, unknown> = {}) =>
    sqlStateOf(t.sql.begin((tx) => gateRefuseIfQueueOverflows(tx, ids, maxQueued, JSON.stringify(limits))));

  it("refuses only past the global limit, counting queued tasks only", async () => {
    const ids = await queue("a", 3);
    await addTask(t.sql, await addSession(t.sql), { status: "running" });
    expect(await check(ids, 3)).toBeNull();
    expect(await check(ids, 2)).toBe(QUEUE_FULL_SQLSTATE);
    const err = await t.sql.begin((tx) => gateRefuseIfQueueOverflows(tx, ids, 2, "{}")).catch((e) => e);
    expect(gateIsQueueFull(err)).toBe(true);
    expect(gateIsTenantQueueFull(err)).toBe(false);
  });

  it("refuses nothing when none of the tasks exists (nothing was inserted)", async () => {
    await queue("a", 3);
    expect(await check([MISSING], 1)).toBeNull();
  });

  it("refuses a tenant past its own limit, not another tenant with the global one", async () => {
    const a = await queue("a", 2);
    const b = await queue("b", 2);
    const limits = { a: { queued: 1 } };
    expect(await check([a[1]], 10, limits)).toBe(TENANT_QUEUE_FULL_SQLSTATE);
    expect(await check([b[1]], 10, limits)).toBeNull();
    expect(await check([a[1]], 10, { a: { queued: 2 } })).toBeNull();
    const err = await t.sql
      .begin((tx) => gateRefuseIfQueueOverflows(tx, [a[1]], 10, JSON.stringify(limits)))
      .catch((e) => e);
    expect(gateIsTenantQueueFull(err)).toBe(true);
  });

  it("answers the global refusal first when both limits are passed", async () => {
    const a = await queue("a", 3);
    expect(await check([a[2]], 2, { a: { queued: 1 } })).toBe(QUEUE_FULL_SQLSTATE);
  });

  it("refuses no task that is no longer queued (its claim started it: the queue did not grow)", async () => {
    const a = await queue("a", 3);
    const started = (await addTask(t.sql, await addSession(t.sql, { tenant: "a" }), { status: "running" }))
      .id;
    expect(await check([started], 1)).toBeNull();
    expect(await check([started], 1, { a: { queued: 1 } })).toBeNull();
    // With one still-queued task beside it, the queue's limits apply again.
    expect(await check([started, a[0]], 1)).toBe(QUEUE_FULL_SQLSTATE);
    expect(await check([started, a[0]], 10, { a: { queued: 2 } })).toBe(TENANT_QUEUE_FULL_SQLSTATE);
  });

  it("checks every tenant of the still-queued tasks, not only the first", async () => {
    const a = await queue("a", 1);
    const b = await queue("b", 3);
    expect(await check([a[0], b[0]], 10, { b: { queued: 2 } })).toBe(TENANT_QUEUE_FULL_SQLSTATE);
    expect(await check([a[0], b[0]], 10, { b: { queued: 3 } })).toBeNull();
  });
});

describe("gateIsQueueFull / gateIsTenantQueueFull", () => {
  it("tells the two refusals apart by SQLSTATE, and anything else from both", () => {
    expect(gateIsQueueFull({ code: QUEUE_FULL_SQLSTATE })).toBe(true);
    expect(gateIsTenantQueueFull({ code: QUEUE_FULL_SQLSTATE })).toBe(false);
    expect(gateIsTenantQueueFull({ code: TENANT_QUEUE_FULL_SQLSTATE })).toBe(true);
    expect(gateIsQueueFull({ code: TENANT_QUEUE_FULL_SQLSTATE })).toBe(false);
    for (const other of [new Error("x"), { code: "40P01" }, null, undefined]) {
      expect(gateIsQueueFull(other)).toBe(false);
      expect(gateIsTenantQueueFull(other)).toBe(false);
    }
  });
});

describe("gateLock", () => {
  it("makes a second gate transaction wait until the first ends, and is gone with its transaction", async () => {
    const steps: string[] = [];
    let second: Promise<unknown> | undefined;
    await t.sql.begin(async (first) => {
      await gateLock(first);
      second = t.sql.begin(async (tx) => {
        await gateLock(tx);
        steps.push("second locked");
      });
      await someoneWaitsForALock(t.sql);
      steps.push("first ends");
    });
    await second;
    expect(steps).toEqual(["first ends", "second locked"]);
    const [{ n }] = await t.sql`
      select count(*)::int as n from pg_locks
      where locktype = 'advisory' and objid = ${GATE_LOCK_KEY}
        and database = (select oid from pg_database where datname = current_database())`;
    expect(n).toBe(0);
  });

  it("turns bitmap scans off for its own transaction only (index scans mark dead entries; see gate-lock.ts)", async () => {
    const inside = await t.sql.begin(async (tx) => {
      await gateLock(tx);
      const [{ enableBitmapscan }] = await tx`show enable_bitmapscan`;
      return enableBitmapscan;
    });
    expect(inside).toBe("off");
    const [{ enableBitmapscan: after }] = await t.sql`show enable_bitmapscan`;
    expect(after).toBe("on");
  });
});

describe("gateCountActiveAndQueued", () => {
  it("counts running and cancelling turns as active, queued ones as queued, nothing ended", async () => {
    expect(await gateCountActiveAndQueued(t.sql)).toEqual({ active: 0, queued: 0 });
    const s = await addSession(t.sql);
    for (const status of [
      "running",
      "cancelling",
      "queued",
      "queued",
      "queued",
      "completed",
      "expired",
    ] as const)
      await addTask(t.sql, s, { status });
    expect(await gateCountActiveAndQueued(t.sql)).toEqual({ active: 2, queued: 3 });
  });
});

describe("gateQueuePositions", () => {
  it("ranks the asked queued tasks in the fair order, the others absent", async () => {
    await addTask(t.sql, await addSession(t.sql, { tenant: "a" }), { status: "running" });
    const a = await queue("a", 2);
    const b = await queue("b", 2);
    const done = await addTask(t.sql, await addSession(t.sql), { status: "completed" });
    // a runs one: b's first turn (level 0) is first, then a's first and b's second (level 1, by age).
    const positions = await gateQueuePositions(t.sql, [...a, ...b, done.id, MISSING]);
    expect(positions).toEqual(
      new Map([
        [b[0], 1],
        [a[0], 2],
        [b[1], 3],
        [a[1], 4],
      ]),
    );
    expect(await gateQueuePositions(t.sql, [a[1]])).toEqual(new Map([[a[1], 4]]));
    expect(await gateQueuePositions(t.sql, [])).toEqual(new Map());
  });
});

describe("gateListQueuePositions", () => {
  it("lists the queue in the fair order up to the limit, with the position each task was told at admission", async () => {
    const s = await addSession(t.sql, { tenant: "a" });
    const inserted = async (sessionId: string) => {
      const found = await t.sql.begin((tx) =>
        taskInsertQueued(tx, {
          sessionId,
          prompt: "p",
          idempotencyKey: null,
          jumpsQueue: false,
          loadClass: null,
          timeoutMs: 60_000,
          queueTimeoutMs: 60_000,
          continuesTaskId: null,
          tenant: null,
        }),
      );
      return found!.row;
    };
    const a1 = await inserted(s);
    const a2 = await inserted(s);
    const b1 = await inserted(await addSession(t.sql, { tenant: "b" }));
    const noEvent = await addTask(t.sql, await addSession(t.sql, { tenant: "c" }));
    await addTask(t.sql, s, { status: "running" });
    // a now runs one, so b and c (level 0) are ahead of a's turns.
    expect(await gateListQueuePositions(t.sql, 10)).toEqual([
      { id: b1.id, sessionId: b1.sessionId, position: 1, queuedAt: 2 },
      { id: noEvent.id, sessionId: noEvent.sessionId, position: 2, queuedAt: null },
      { id: a1.id, sessionId: s, position: 3, queuedAt: 1 },
      { id: a2.id, sessionId: s, position: 4, queuedAt: 2 },
    ]);
    expect((await gateListQueuePositions(t.sql, 2)).map((r) => r.id)).toEqual([b1.id, noEvent.id]);
  });
});

describe("gateCountByTenant", () => {
  it("counts each tenant's active and queued turns, of the asked tenants or of every tenant with any", async () => {
    await queue("a", 2);
    const a = await addSession(t.sql, { tenant: "a" });
    await addTask(t.sql, a, { status: "running" });
    await addTask(t.sql, a, { status: "completed" });
    await addTask(t.sql, await addSession(t.sql, { tenant: "b" }), { status: "cancelling" });
    await addTask(t.sql, await addSession(t.sql, { tenant: "c" }), { status: "failed" });
    expect(await gateCountByTenant(t.sql, null)).toEqual(
      new Map([
        ["a", { active: 1, queued: 2 }],
        ["b", { active: 1, queued: 0 }],
      ]),
    );
    expect(await gateCountByTenant(t.sql, ["b", "c"])).toEqual(new Map([["b", { active: 1, queued: 0 }]]));
    expect(await gateCountByTenant(t.sql, [])).toEqual(new Map());
  });
});

describe("gateOpenSubmit / gateCloseSubmit", () => {
  /** One submit inside its savepoint: an insert, then (when `fails`) a statement that fails. */
  function submit(q: Tx, sessionId: string, fails: boolean) {
    const open = gateOpenSubmit(q);
    const inserted = q`insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at)
      select id, tenant, next_turn_index, 'queued', 'p', 1000, now() from sessions where id = ${sessionId}`;
    const failing = fails ? q`select 1 / 0` : Promise.resolve();
    const { kept, undo, release } = gateCloseSubmit(q);
    const contained = (p: Promise<unknown>) =>
      p.then(
        () => "ok",
        (e: { code?: string }) => e.code ?? "error",
      );
    return [open, contained(inserted), contained(failing), contained(kept), undo, release] as const;
  }

  it("keeps a submit that went through and undoes one that failed, the batch's others committed", async () => {
    const [ok1, bad, ok2] = [await addSession(t.sql), await addSession(t.sql), await addSession(t.sql)];
    const answers = await pipelined(t.sql, (q) => [
      ...submit(q, ok1, false),
      ...submit(q, bad, true),
      ...submit(q, ok2, false),
    ]);
    // The failed submit's `kept` fails (the transaction was aborted); its rollback ends that.
    expect(answers.filter((a) => typeof a === "string")).toEqual([
      "ok",
      "ok",
      "ok",
      "ok",
      "22012",
      "25P02",
      "ok",
      "ok",
      "ok",
    ]);
    const rows = await t.sql`select session_id from tasks`;
    expect(rows.map((r) => r.sessionId).sort()).toEqual([ok1, ok2].sort());
  });
});
