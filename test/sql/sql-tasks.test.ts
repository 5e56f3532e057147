/**
 * Direct tests of the task operations in src/sql on a real database: insert-task, cancel-task,
 * expire-queued, gate-check, read-tasks, save-upstream, upstream-orphans and task-row. Each asserts
 * what the operation promises, including its guards (status, tenant, idempotency key, owner fence,
 * SKIP LOCKED), so a wrong statement fails here.
 */
import { randomUUID } from "node:crypto";
import { getTableColumns } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { tasks } from "../../src/db/schema.js";
import {
  cancelQueuedTask,
  findActiveTaskOfSession,
  interruptRunningTaskOfSession,
  lockOpenTasksOfSession,
  markTaskCancelling,
} from "../../src/sql/cancel-task.js";
import { expireQueuedTasks } from "../../src/sql/expire-queued.js";
import {
  isQueueFull,
  isTenantQueueFull,
  QUEUE_FULL_SQLSTATE,
  refuseIfQueueOverflows,
  TENANT_QUEUE_FULL_SQLSTATE,
} from "../../src/sql/gate-check.js";
import { queuePositions } from "../../src/sql/gate-status.js";
import { findTaskByIdempotencyKey, insertQueuedTask, type TaskToInsert } from "../../src/sql/insert-task.js";
import { channels } from "../../src/sql/notify.js";
import {
  anyTaskQueued,
  listTasks,
  readOwnedActiveTasks,
  readTask,
  readTaskStatuses,
  readTasks,
  type TaskListFilter,
} from "../../src/sql/read-tasks.js";
import { saveUpstream } from "../../src/sql/save-upstream.js";
import { isTerminal } from "../../src/sql/task-row.js";
import { listUpstreamOrphans, markUpstreamReleased } from "../../src/sql/upstream-orphans.js";
import {
  addOwnedTask,
  addSession,
  addTask,
  rowIsFree,
  sqlStateOf,
  taskById,
  tieWithinMillisecond,
  NOTIFIED,
  useSqlTestDatabase,
  whileTaskHeld,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();
const MISSING = "00000000-0000-4000-8000-000000000000";

describe("insertQueuedTask", () => {
  const task = (sessionId: string, over: Partial<TaskToInsert> = {}): TaskToInsert => ({
    sessionId,
    prompt: "hello",
    idempotencyKey: null,
    jumpsQueue: false,
    loadClass: null,
    timeoutMs: 30_000,
    queueTimeoutMs: 1_500,
    continuesTaskId: null,
    tenant: null,
    ...over,
  });
  const insert = (tt: TaskToInsert) => t.sql.begin((tx) => insertQueuedTask(tx, tt));
  const session = async (id: string) => {
    const [row] = await t.sql`select next_turn_index, last_seq from sessions where id = ${id}`;
    return row;
  };

  it("inserts a queued task with dense turn indexes and its task.queued event at the next seq", async () => {
    const id = await addSession(t.sql, { tenant: "a", lastSeq: 4 });
    const first = await insert(task(id));
    const second = await insert(task(id, { continuesTaskId: first!.row.id }));
    expect(first?.row).toMatchObject({
      status: "queued",
      turnIndex: 0,
      tenant: "a",
      firstSeq: 5,
      lastSeq: 5,
    });
    expect(second?.row).toMatchObject({
      turnIndex: 1,
      firstSeq: 6,
      lastSeq: 6,
      continuesTaskId: first!.row.id,
    });
    expect(second?.queued).toMatchObject({
      sessionId: id,
      seq: 6,
      taskId: second!.row.id,
      type: "task.queued",
    });
    expect(second?.queued.data).toEqual({ position: 2, turnIndex: 1, continuesTaskId: first!.row.id });
    expect(await session(id)).toEqual({ nextTurnIndex: 2, lastSeq: 6 });
    const events =
      await t.sql`select seq, task_id, type, data from events where session_id = ${id} order by seq`;
    expect(events.map((e) => [e.seq, e.taskId, e.type])).toEqual([
      [5, first!.row.id, "task.queued"],
      [6, second!.row.id, "task.queued"],
    ]);
  });

  it("tells the position the fair queue gives it (gate-status.ts) at admission, whatever the mix of tenants", async () => {
    // A fixed pseudo-random walk: turns of three tenants queued, started and ended in turn, each new
    // turn's told position compared with the live ranking of the whole queue.
    let seed = 12;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 30; round++) {
      const tenant = ["a", "b", "c"][next(3)];
      const action = next(4);
      if (action === 0) await addTask(t.sql, await addSession(t.sql, { tenant }), { status: "running" });
      if (action === 1)
        await t.sql`update tasks set status = 'completed' where id = (
        select id from tasks where status = 'running' order by queue_order limit 1)`;
      if (action === 2)
        await t.sql`update tasks set status = 'running' where id = (
        select id from tasks where status = 'queued' and tenant = ${tenant} order by queue_order limit 1)`;
      const found = await insert(task(await addSession(t.sql, { tenant })));
      const live = await queuePositions(t.sql, [found!.row.id]);
      expect(found?.queued.data).toMatchObject({ position: live.get(found!.row.id) });
    }
  });

  it("keeps turn indexes dense and seqs gap-free under concurrent submits to one session", async () => {
    const id = await addSession(t.sql);
    const found = await Promise.all(
      Array.from({ length: 6 }, (_, i) => insert(task(id, { prompt: `p${i}` }))),
    );
    const rows = found.map((f) => f!.row).sort((a, b) => a.turnIndex - b.turnIndex);
    expect(rows.map((r) => r.turnIndex)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(rows.map((r) => r.firstSeq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(await session(id)).toEqual({ nextTurnIndex: 6, lastSeq: 6 });
  });

  it("takes the caller's id and sets the queue deadline from the queue timeout", async () => {
    const id = await addSession(t.sql);
    const taskId = randomUUID();
    const found = await insert(task(id, { id: taskId, queueTimeoutMs: 1_500 }));
    expect(found?.row.id).toBe(taskId);
    const [{ ms }] = await t.sql`
      select extract(epoch from (queue_deadline_at - created_at)) * 1000 as ms from tasks where id = ${taskId}`;
    expect(Number(ms)).toBe(1_500);
  });

  it("inserts nothing into an archived, missing or foreign session", async () => {
    const archived = await addSession(t.sql, { archived: true });
    expect(await insert(task(archived))).toBeNull();
    expect(await insert(task(MISSING))).toBeNull();
    const foreign = await addSession(t.sql, { tenant: "a" });
    expect(await insert(task(foreign, { tenant: "b" }))).toBeNull();
    expect(await session(foreign)).toEqual({ nextTurnIndex: 0, lastSeq: 0 });
    expect((await insert(task(foreign, { tenant: "a" })))?.row.tenant).toBe("a");
    const [{ n }] = await t.sql`select count(*)::int as n from tasks`;
    expect(n).toBe(1);
  });

  it("inserts nothing for a taken idempotency key and takes no turn index or seq", async () => {
    const id = await addSession(t.sql);
    const first = await insert(task(id, { idempotencyKey: "k" }));
    expect(await insert(task(id, { idempotencyKey: "k" }))).toBeNull();
    expect(await session(id)).toEqual({ nextTurnIndex: 1, lastSeq: 1 });
    const other = await addSession(t.sql);
    expect(await insert(task(other, { idempotencyKey: "k" }))).not.toBeNull();
    expect((await t.sql.begin((tx) => findTaskByIdempotencyKey(tx, id, "k", null)))?.id).toBe(first?.row.id);
  });

  it("counts its position over the queue, its own tenant's running turns not ahead of it", async () => {
    const id = await addSession(t.sql, { tenant: "a" });
    await addTask(t.sql, id, { status: "running" });
    await addTask(t.sql, id, { status: "completed" });
    await addTask(t.sql, await addSession(t.sql, { tenant: "a" }), { status: "queued" });
    const found = await insert(task(id));
    expect(found?.queued.data).toMatchObject({ position: 2 });
  });

  it("counts other tenants' queued turns only up to its own tenant's level (fair order)", async () => {
    // Tenant a: 3 queued, nothing running. A first turn of b comes after a's first only.
    const a = await addSession(t.sql, { tenant: "a" });
    for (let i = 0; i < 3; i++) await addTask(t.sql, a, { status: "queued" });
    const b = await addSession(t.sql, { tenant: "b" });
    expect((await insert(task(b)))?.queued.data).toMatchObject({ position: 2 });
    // With one of a's turns running, c's first turn goes before every queued turn of a; b's queued
    // one (level 1) is ahead of it.
    await addTask(t.sql, a, { status: "running" });
    const c = await addSession(t.sql, { tenant: "c" });
    expect((await insert(task(c)))?.queued.data).toMatchObject({ position: 2 });
  });
});

describe("findTaskByIdempotencyKey", () => {
  it("finds the session's task holding the key, for its tenant or null only", async () => {
    const id = await addSession(t.sql, { tenant: "a" });
    const row = await addTask(t.sql, id, { idempotencyKey: "k" });
    const find = (key: string, tenant: string | null) =>
      t.sql.begin((tx) => findTaskByIdempotencyKey(tx, id, key, tenant));
    expect((await find("k", "a"))?.id).toBe(row.id);
    expect((await find("k", null))?.id).toBe(row.id);
    expect(await find("k", "b")).toBeNull();
    expect(await find("other", null)).toBeNull();
  });
});

describe("cancel-task", () => {
  it("cancels a queued task at once, and nothing else", async () => {
    const id = await addSession(t.sql);
    const queued = await addTask(t.sql, id, { status: "queued" });
    const running = await addTask(t.sql, id, { status: "running" });
    const cancelled = await cancelQueuedTask(t.sql, queued.id);
    expect(cancelled).toMatchObject({ status: "cancelled", version: queued.version + 1 });
    expect(cancelled?.error?.code).toBe("CANCELLED");
    expect(cancelled?.finishedAt).toBeInstanceOf(Date);
    expect(cancelled?.cancelRequestedAt).toBeInstanceOf(Date);
    expect(await cancelQueuedTask(t.sql, queued.id)).toBeNull();
    expect(await cancelQueuedTask(t.sql, running.id)).toBeNull();
    expect((await taskById(t.sql, running.id)).status).toBe("running");
  });

  it("marks a running task cancelling, and only a running one", async () => {
    const id = await addSession(t.sql);
    const running = await addTask(t.sql, id, { status: "running" });
    const queued = await addTask(t.sql, id, { status: "queued" });
    expect(await markTaskCancelling(t.sql, running.id)).toMatchObject({
      status: "cancelling",
      version: running.version + 1,
    });
    expect(await markTaskCancelling(t.sql, running.id)).toBeNull();
    expect(await markTaskCancelling(t.sql, queued.id)).toBeNull();
    expect((await taskById(t.sql, queued.id)).status).toBe("queued");
  });

  it("finds the session's running or cancelling task", async () => {
    const id = await addSession(t.sql);
    await addTask(t.sql, id, { status: "completed" });
    await addTask(t.sql, id, { status: "queued" });
    expect(await findActiveTaskOfSession(t.sql, id)).toBeNull();
    const cancelling = await addTask(t.sql, id, { status: "cancelling" });
    expect((await findActiveTaskOfSession(t.sql, id))?.id).toBe(cancelling.id);
    await addTask(t.sql, await addSession(t.sql), { status: "running" });
    expect((await findActiveTaskOfSession(t.sql, id))?.id).toBe(cancelling.id);
  });

  it("interrupts the session's running turn, notifying nothing itself (the admission declares the cancel)", async () => {
    const id = await addSession(t.sql, { tenant: "a" });
    const running = await addTask(t.sql, id, { status: "running" });
    const heard: string[] = [];
    const listening = await t.sql.listen(channels.cancel, (payload) => heard.push(payload));
    try {
      const row = await t.sql.begin((tx) => interruptRunningTaskOfSession(tx, id, null, "a"));
      expect(row).toMatchObject({ id: running.id, status: "cancelling" });
      // A marker sent after it: once heard, anything the interrupt's commit sent was heard first.
      await t.sql`select pg_notify(${channels.cancel}, 'marker')`;
      await expect.poll(() => heard, NOTIFIED).toEqual(["marker"]);
    } finally {
      await listening.unlisten();
    }
    expect(await interruptRunningTaskOfSession(t.sql, id, null, null)).toBeNull();
  });

  it("interrupts nothing for another tenant, a taken key, or a session with nothing running", async () => {
    const id = await addSession(t.sql, { tenant: "a" });
    const running = await addTask(t.sql, id, { status: "running", idempotencyKey: "k" });
    expect(await interruptRunningTaskOfSession(t.sql, id, null, "b")).toBeNull();
    expect(await interruptRunningTaskOfSession(t.sql, id, "k", "a")).toBeNull();
    expect((await taskById(t.sql, running.id)).status).toBe("running");
    expect((await interruptRunningTaskOfSession(t.sql, id, "new", null))?.id).toBe(running.id);
    const queuedOnly = await addSession(t.sql);
    await addTask(t.sql, queuedOnly, { status: "queued" });
    expect(await interruptRunningTaskOfSession(t.sql, queuedOnly, null, null)).toBeNull();
  });

  it("locks the session's queued and running tasks in queue order, not the others", async () => {
    const id = await addSession(t.sql);
    const running = await addTask(t.sql, id, { status: "running" });
    const q1 = await addTask(t.sql, id, { status: "queued" });
    const cancelling = await addTask(t.sql, id, { status: "cancelling" });
    const q2 = await addTask(t.sql, id, { status: "queued" });
    await addTask(t.sql, id, { status: "completed" });
    await addTask(t.sql, await addSession(t.sql), { status: "queued" });
    await t.sql.begin(async (tx) => {
      const rows = await lockOpenTasksOfSession(tx, id);
      expect(rows.map((r) => r.id)).toEqual([running.id, q1.id, q2.id]);
      expect(await rowIsFree(t.sql, "tasks", q1.id)).toBe(false);
      expect(await rowIsFree(t.sql, "tasks", cancelling.id)).toBe(true);
    });
  });
});

describe("expireQueuedTasks", () => {
  it("expires queued tasks past their deadline, leaves the rest", async () => {
    const id = await addSession(t.sql);
    const due = await addTask(t.sql, id, { status: "queued", queueDeadlineInMs: -1_000 });
    const waiting = await addTask(t.sql, id, { status: "queued", queueDeadlineInMs: 60_000 });
    const running = await addTask(t.sql, id, { status: "running", queueDeadlineInMs: -1_000 });
    const expired = await expireQueuedTasks(t.sql);
    expect(expired.map((r) => r.id)).toEqual([due.id]);
    expect(expired[0]).toMatchObject({ status: "expired", version: due.version + 1 });
    expect(expired[0].error).toMatchObject({ code: "GATEWAY_BUSY", reason: "queue_timeout" });
    expect(expired[0].finishedAt).toBeInstanceOf(Date);
    expect((await taskById(t.sql, waiting.id)).status).toBe("queued");
    expect((await taskById(t.sql, running.id)).status).toBe("running");
    expect(await expireQueuedTasks(t.sql)).toEqual([]);
  });

  it("skips a task another transaction holds (a claim taking it)", async () => {
    const id = await addSession(t.sql);
    const held = await addTask(t.sql, id, { status: "queued", queueDeadlineInMs: -1_000 });
    const free = await addTask(t.sql, id, { status: "queued", queueDeadlineInMs: -1_000 });
    const expired = await whileTaskHeld(t.sql, held.id, () => expireQueuedTasks(t.sql));
    expect(expired.map((r) => r.id)).toEqual([free.id]);
    expect((await taskById(t.sql, held.id)).status).toBe("queued");
  });
});

describe("refuseIfQueueOverflows", () => {
  const check = (ids: string[], maxQueued: number, limits: Record<string, unknown> = {}) =>
    sqlStateOf(t.sql.begin((tx) => refuseIfQueueOverflows(tx, ids, maxQueued, JSON.stringify(limits))));
  const queue = async (tenant: string, n: number) => {
    const id = await addSession(t.sql, { tenant });
    const rows = [];
    for (let i = 0; i < n; i++) rows.push(await addTask(t.sql, id, { status: "queued" }));
    return rows.map((r) => r.id);
  };

  it("refuses only past the global limit, counting queued tasks only", async () => {
    const ids = await queue("a", 3);
    await addTask(t.sql, await addSession(t.sql), { status: "running" });
    expect(await check(ids, 3)).toBeNull();
    expect(await check(ids, 2)).toBe(QUEUE_FULL_SQLSTATE);
    const err = await t.sql.begin((tx) => refuseIfQueueOverflows(tx, ids, 2, "{}")).catch((e) => e);
    expect(isQueueFull(err)).toBe(true);
    expect(isTenantQueueFull(err)).toBe(false);
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
      .begin((tx) => refuseIfQueueOverflows(tx, [a[1]], 10, JSON.stringify(limits)))
      .catch((e) => e);
    expect(isTenantQueueFull(err)).toBe(true);
  });

  it("answers the global refusal first when both limits are passed", async () => {
    const a = await queue("a", 3);
    expect(await check([a[2]], 2, { a: { queued: 1 } })).toBe(QUEUE_FULL_SQLSTATE);
  });
});

describe("read-tasks", () => {
  it("reads a task for its tenant or null (any), not for another tenant", async () => {
    const row = await addTask(t.sql, await addSession(t.sql, { tenant: "a" }));
    expect((await readTask(t.sql, row.id))?.id).toBe(row.id);
    expect((await readTask(t.sql, row.id, "a"))?.id).toBe(row.id);
    expect(await readTask(t.sql, row.id, "b")).toBeNull();
    expect(await readTask(t.sql, MISSING)).toBeNull();
  });

  it("reads several tasks' rows or statuses; missing ids are absent", async () => {
    const id = await addSession(t.sql);
    const a = await addTask(t.sql, id, { status: "running" });
    const b = await addTask(t.sql, id, { status: "completed" });
    await addTask(t.sql, id);
    expect((await readTasks(t.sql, [a.id, b.id, MISSING])).map((r) => r.id).sort()).toEqual(
      [a.id, b.id].sort(),
    );
    const statuses = await readTaskStatuses(t.sql, [a.id, b.id, MISSING]);
    expect(statuses.sort((x, y) => x.status.localeCompare(y.status))).toEqual([
      { id: b.id, status: "completed" },
      { id: a.id, status: "running" },
    ]);
  });

  it("knows whether anything is queued", async () => {
    const id = await addSession(t.sql);
    expect(await anyTaskQueued(t.sql)).toBe(false);
    await addTask(t.sql, id, { status: "running" });
    await addTask(t.sql, id, { status: "expired" });
    expect(await anyTaskQueued(t.sql)).toBe(false);
    await addTask(t.sql, id, { status: "queued" });
    expect(await anyTaskQueued(t.sql)).toBe(true);
  });

  it("reads the tasks among the ids this boot still owns and runs", async () => {
    const id = await addSession(t.sql);
    const boot = randomUUID();
    const running = await addTask(t.sql, id, { status: "running", ownerBoot: boot });
    const cancelling = await addTask(t.sql, id, { status: "cancelling", ownerBoot: boot });
    const settled = await addTask(t.sql, id, { status: "completed", ownerBoot: boot });
    const foreign = await addTask(t.sql, id, { status: "running" });
    const owned = await readOwnedActiveTasks(
      t.sql,
      [running.id, cancelling.id, settled.id, foreign.id],
      boot,
    );
    expect(owned.map((r) => r.id).sort()).toEqual([running.id, cancelling.id].sort());
  });

  describe("listTasks", () => {
    const filter = (f: Partial<TaskListFilter>): TaskListFilter => ({
      tenant: null,
      sessionId: null,
      status: null,
      after: null,
      limit: 100,
      ...f,
    });
    const ids = (rows: { id: string }[]) => rows.map((r) => r.id);

    it("pages newest first, ties within a millisecond by id, and filters by tenant, session and status", async () => {
      const a = await addSession(t.sql, { tenant: "a" });
      const b = await addSession(t.sql, { tenant: "b" });
      const t0 = await addTask(t.sql, a, { status: "completed", createdAt: "2026-01-01T00:00:00Z" });
      const t1 = await addTask(t.sql, b, { status: "queued", createdAt: "2026-01-01T00:01:00Z" });
      const t2 = await addTask(t.sql, a, { status: "queued", createdAt: "2026-01-01T00:02:00Z" });
      const t3 = await addTask(t.sql, a, { status: "queued", createdAt: "2026-01-01T00:02:00Z" });
      const [tieHigh, tieLow] = await tieWithinMillisecond(
        t.sql,
        "tasks",
        [t2.id, t3.id],
        "2026-01-01T00:02:00Z",
      );
      expect(ids(await listTasks(t.sql, filter({})))).toEqual([tieHigh, tieLow, t1.id, t0.id]);

      const page1 = await listTasks(t.sql, filter({ limit: 2 }));
      expect(ids(page1)).toEqual([tieHigh, tieLow]);
      const after = { createdAt: page1[1].createdAt.toISOString(), id: page1[1].id };
      expect(ids(await listTasks(t.sql, filter({ after })))).toEqual([t1.id, t0.id]);

      expect(ids(await listTasks(t.sql, filter({ tenant: "b" })))).toEqual([t1.id]);
      expect(ids(await listTasks(t.sql, filter({ sessionId: a, status: "completed" })))).toEqual([t0.id]);
      expect(ids(await listTasks(t.sql, filter({ tenant: "a", status: "queued" })))).toEqual([
        tieHigh,
        tieLow,
      ]);
    });
  });
});

describe("saveUpstream", () => {
  const upstream = { taskId: randomUUID(), position: 3, queueDeadlineAt: null };

  it("writes the upstream state of the owner's running turn only", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "running");
    expect(await saveUpstream(t.sql, { ...fence, attempt: 1 }, upstream)).toBe(false);
    expect(await saveUpstream(t.sql, { ...fence, bootId: randomUUID() }, upstream)).toBe(false);
    expect((await taskById(t.sql, row.id)).upstream).toBeNull();
    expect(await saveUpstream(t.sql, fence, upstream)).toBe(true);
    expect((await taskById(t.sql, row.id)).upstream).toEqual(upstream);
  });

  it("after the settlement, writes only the release", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "completed");
    expect(await saveUpstream(t.sql, fence, upstream)).toBe(false);
    const released = { ...upstream, released: new Date().toISOString() };
    expect(await saveUpstream(t.sql, fence, released)).toBe(true);
    expect((await taskById(t.sql, row.id)).upstream).toEqual(released);
    expect(await saveUpstream(t.sql, { ...fence, attempt: 3 }, released)).toBe(false);
  });
});

describe("upstream orphans", () => {
  it("lists ended chained turns not yet released, oldest first, with their agent", async () => {
    const s = await addSession(t.sql, { agent: "chain" });
    const up = () => ({ taskId: randomUUID(), position: null, queueDeadlineAt: null });
    const newer = await addTask(t.sql, s, {
      status: "failed",
      upstream: up(),
      finishedAt: "2026-01-01T00:02:00Z",
    });
    const older = await addTask(t.sql, s, {
      status: "interrupted",
      upstream: up(),
      finishedAt: "2026-01-01T00:01:00Z",
    });
    await addTask(t.sql, s, { status: "running", upstream: up() });
    await addTask(t.sql, s, { status: "completed", upstream: { ...up(), released: "2026-01-01T00:00:00Z" } });
    await addTask(t.sql, s, { status: "completed", upstream: { taskId: null, position: null } });
    await addTask(t.sql, s, { status: "completed" });

    const orphans = await listUpstreamOrphans(t.sql, 10);
    expect(orphans).toEqual([
      { id: older.id, agent: "chain", upstreamTaskId: older.upstream!.taskId },
      { id: newer.id, agent: "chain", upstreamTaskId: newer.upstream!.taskId },
    ]);
    expect((await listUpstreamOrphans(t.sql, 1)).map((o) => o.id)).toEqual([older.id]);

    await markUpstreamReleased(t.sql, older.id);
    const released = (await taskById(t.sql, older.id)).upstream;
    expect(released).toMatchObject({ taskId: older.upstream!.taskId });
    expect(typeof released?.released).toBe("string");
    expect((await listUpstreamOrphans(t.sql, 10)).map((o) => o.id)).toEqual([newer.id]);
  });
});

describe("task-row", () => {
  it("a task row read back has exactly the schema's columns, and the terminal statuses are the ended ones", async () => {
    const row = await addTask(t.sql, await addSession(t.sql));
    expect(Object.keys(row).sort()).toEqual(Object.keys(getTableColumns(tasks)).sort());
    expect(isTerminal("completed")).toBe(true);
    expect(isTerminal("interrupted")).toBe(true);
    expect(isTerminal("cancelling")).toBe(false);
    expect(isTerminal("queued")).toBe(false);
  });
});
