/**
 * Direct tests of src/sql/task-read.ts on a real database: a task read for its tenant, several
 * tasks' rows and statuses, whether anything is queued for a group, the active tasks a boot owns,
 * and the keyset-paged list. Each asserts its filters (tenant, owner, status, group), so a wrong
 * statement fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  taskAnyQueued,
  taskList,
  type TaskListFilter,
  taskRead,
  taskReadMany,
  taskReadOwnedActive,
  taskReadStatuses,
} from "../../src/sql/task-read.js";
import { addSession, addTask, tieWithinMillisecond, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();
const MISSING = "00000000-0000-4000-8000-000000000000";

describe("taskRead", () => {
  it("reads a task for its tenant or null (any), not for another tenant", async () => {
    const row = await addTask(t.sql, await addSession(t.sql, { tenant: "a" }));
    expect((await taskRead(t.sql, row.id))?.id).toBe(row.id);
    expect((await taskRead(t.sql, row.id, "a"))?.id).toBe(row.id);
    expect(await taskRead(t.sql, row.id, "b")).toBeNull();
    expect(await taskRead(t.sql, MISSING)).toBeNull();
  });
});

describe("taskReadMany / taskReadStatuses", () => {
  it("reads several tasks' rows or statuses; missing ids are absent", async () => {
    const id = await addSession(t.sql);
    const a = await addTask(t.sql, id, { status: "running" });
    const b = await addTask(t.sql, id, { status: "completed" });
    await addTask(t.sql, id);
    expect((await taskReadMany(t.sql, [a.id, b.id, MISSING])).map((r) => r.id).sort()).toEqual(
      [a.id, b.id].sort(),
    );
    const statuses = await taskReadStatuses(t.sql, [a.id, b.id, MISSING]);
    expect(statuses.sort((x, y) => x.status.localeCompare(y.status))).toEqual([
      { id: b.id, status: "completed" },
      { id: a.id, status: "running" },
    ]);
    expect(await taskReadMany(t.sql, [])).toEqual([]);
  });
});

describe("taskAnyQueued", () => {
  it("knows whether anything is queued", async () => {
    const id = await addSession(t.sql);
    expect(await taskAnyQueued(t.sql)).toBe(false);
    await addTask(t.sql, id, { status: "running" });
    await addTask(t.sql, id, { status: "expired" });
    expect(await taskAnyQueued(t.sql)).toBe(false);
    await addTask(t.sql, id, { status: "queued" });
    expect(await taskAnyQueued(t.sql)).toBe(true);
  });

  it("sees only the asked instance group's queue", async () => {
    const taskOf = async (group: string, status: "queued" | "running") => {
      const row = await addTask(t.sql, await addSession(t.sql), { status });
      await t.sql`update tasks set instance_group = ${group} where id = ${row.id}`;
    };
    await taskOf("b", "queued");
    expect(await taskAnyQueued(t.sql, "a")).toBe(false);
    expect(await taskAnyQueued(t.sql, "b")).toBe(true);
    await taskOf("a", "running");
    expect(await taskAnyQueued(t.sql, "a")).toBe(false);
    expect(await taskAnyQueued(t.sql)).toBe(false);
  });
});

describe("taskReadOwnedActive", () => {
  it("reads the tasks among the ids this boot still owns and runs", async () => {
    const id = await addSession(t.sql);
    const boot = randomUUID();
    const running = await addTask(t.sql, id, { status: "running", ownerBoot: boot });
    const cancelling = await addTask(t.sql, id, { status: "cancelling", ownerBoot: boot });
    const settled = await addTask(t.sql, id, { status: "completed", ownerBoot: boot });
    const foreign = await addTask(t.sql, id, { status: "running" });
    const notAsked = await addTask(t.sql, await addSession(t.sql), { status: "running", ownerBoot: boot });
    const owned = await taskReadOwnedActive(t.sql, [running.id, cancelling.id, settled.id, foreign.id], boot);
    expect(owned.map((r) => r.id).sort()).toEqual([running.id, cancelling.id].sort());
    expect(owned.map((r) => r.id)).not.toContain(notAsked.id);
  });
});

describe("taskList", () => {
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
    expect(ids(await taskList(t.sql, filter({})))).toEqual([tieHigh, tieLow, t1.id, t0.id]);

    const page1 = await taskList(t.sql, filter({ limit: 2 }));
    expect(ids(page1)).toEqual([tieHigh, tieLow]);
    const after = { createdAt: page1[1].createdAt.toISOString(), id: page1[1].id };
    expect(ids(await taskList(t.sql, filter({ after })))).toEqual([t1.id, t0.id]);

    expect(ids(await taskList(t.sql, filter({ tenant: "b" })))).toEqual([t1.id]);
    expect(ids(await taskList(t.sql, filter({ sessionId: a, status: "completed" })))).toEqual([t0.id]);
    expect(ids(await taskList(t.sql, filter({ tenant: "a", status: "queued" })))).toEqual([tieHigh, tieLow]);
  });
});
