/**
 * src/sql/checkpoint.ts on a real database: a repeated checkpoint name keeps the first "before" and
 * takes the latest "after"; the reads answer one session's (or one repository's) rows in the order
 * they promise; turns left without an "after" are found only once they ended; and the workspace
 * lock serializes two holders of one path, not of two.
 */
import { describe, expect, it } from "vitest";
import type { Sql } from "../../src/db/client.js";
import {
  checkpointDeleteOfSession,
  checkpointInsert,
  checkpointNextRevertIndex,
  checkpointRead,
  checkpointReadLatestOnRepo,
  checkpointReadLatestRevert,
  checkpointReadMissingAfters,
  checkpointReadOfTask,
  checkpointReadRepos,
  checkpointWithWorkspaceLock,
  type NewCheckpoint,
} from "../../src/sql/checkpoint.js";
import type { TaskStatus } from "../../src/contract/task-status.js";
import { addSession, addTask, someoneWaitsForALock, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

const sha = (c: string) => c.repeat(40);

/** A turn's checkpoint of `sessionId`, its name `<turn>/<phase>`. */
const turnCheckpoint = (
  sessionId: string,
  taskId: string | null,
  turnIndex: number,
  phase: "before" | "after",
  over: Partial<NewCheckpoint> = {},
): NewCheckpoint => ({
  sessionId,
  name: `${turnIndex}/${phase}`,
  taskId,
  turnIndex,
  revertIndex: null,
  phase,
  commitSha: sha("a"),
  store: "shadow",
  gitDir: "/repo.git",
  atReconcile: false,
  skipped: [],
  ...over,
});

/** A revert's checkpoint (`revert/<n>`). */
const revertCheckpoint = (sessionId: string, revertIndex: number, gitDir = "/repo.git"): NewCheckpoint => ({
  ...turnCheckpoint(sessionId, null, 0, "after"),
  name: `revert/${revertIndex}`,
  turnIndex: null,
  revertIndex,
  gitDir,
});

const rowOf = async (sql: Sql, sessionId: string, name: string) => {
  const [row] = await sql`select * from checkpoints where session_id = ${sessionId} and name = ${name}`;
  return row;
};

describe("checkpointInsert", () => {
  it("stores a checkpoint with its fields", async () => {
    const id = await addSession(t.sql);
    const task = await addTask(t.sql, id, { status: "running" });
    const skipped = [{ path: "big.bin", reason: "too large" }];
    await checkpointInsert(t.sql, turnCheckpoint(id, task.id, 0, "before", { skipped, store: "workspace" }));
    expect(await rowOf(t.sql, id, "0/before")).toMatchObject({
      sessionId: id,
      taskId: task.id,
      turnIndex: 0,
      revertIndex: null,
      phase: "before",
      commitSha: sha("a"),
      store: "workspace",
      gitDir: "/repo.git",
      atReconcile: false,
      skipped,
    });
  });

  it("on a repeated name keeps the first 'before' and takes the latest 'after'", async () => {
    const id = await addSession(t.sql);
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "before"));
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "after"));
    await t.sql`update checkpoints set created_at = '2020-01-01T00:00:00Z' where session_id = ${id}`;
    const retry = { commitSha: sha("b"), atReconcile: true, skipped: [{ path: "x", reason: "r" }] };
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "before", retry));
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "after", retry));
    const before = await rowOf(t.sql, id, "0/before");
    expect(before).toMatchObject({ commitSha: sha("a"), atReconcile: false, skipped: [] });
    expect(before.createdAt.toISOString()).toBe("2020-01-01T00:00:00.000Z");
    const after = await rowOf(t.sql, id, "0/after");
    expect(after).toMatchObject(retry);
    expect(after.createdAt.getFullYear()).toBeGreaterThan(2020);
  });

  it("keeps one session's name apart from another's", async () => {
    const a = await addSession(t.sql);
    const b = await addSession(t.sql);
    await checkpointInsert(t.sql, turnCheckpoint(a, null, 0, "after"));
    await checkpointInsert(t.sql, turnCheckpoint(b, null, 0, "after", { commitSha: sha("b") }));
    expect((await rowOf(t.sql, a, "0/after")).commitSha).toBe(sha("a"));
    expect((await rowOf(t.sql, b, "0/after")).commitSha).toBe(sha("b"));
  });
});

describe("checkpointReadOfTask", () => {
  it("reads the task's before and after, in that order, and no other task's", async () => {
    const id = await addSession(t.sql);
    const task = await addTask(t.sql, id, { status: "completed" });
    const other = await addTask(t.sql, id, { status: "completed" });
    await checkpointInsert(t.sql, turnCheckpoint(id, task.id, 0, "after", { commitSha: sha("b") }));
    await checkpointInsert(t.sql, turnCheckpoint(id, task.id, 0, "before"));
    await checkpointInsert(t.sql, turnCheckpoint(id, other.id, 1, "before"));
    const rows = await checkpointReadOfTask(t.sql, task.id);
    expect(rows.map((r) => [r.name, r.commitSha])).toEqual([
      ["0/before", sha("a")],
      ["0/after", sha("b")],
    ]);
    expect(await checkpointReadOfTask(t.sql, (await addTask(t.sql, id)).id)).toEqual([]);
  });
});

describe("checkpointRead", () => {
  it("reads one checkpoint of the session by name; null for a missing one or another session's", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "after"));
    expect(await checkpointRead(t.sql, id, "0/after")).toMatchObject({ sessionId: id, name: "0/after" });
    expect(await checkpointRead(t.sql, id, "0/before")).toBeNull();
    expect(await checkpointRead(t.sql, other, "0/after")).toBeNull();
  });
});

describe("checkpointReadLatestOnRepo", () => {
  it("answers the newest checkpoint on the repository by any session, 'after' first within one instant", async () => {
    const a = await addSession(t.sql);
    const b = await addSession(t.sql);
    expect(await checkpointReadLatestOnRepo(t.sql, "/repo.git")).toBeNull();
    await checkpointInsert(t.sql, turnCheckpoint(a, null, 0, "before"));
    await checkpointInsert(t.sql, turnCheckpoint(b, null, 0, "before"));
    await checkpointInsert(t.sql, turnCheckpoint(b, null, 0, "after"));
    await checkpointInsert(t.sql, turnCheckpoint(a, null, 9, "after", { gitDir: "/elsewhere.git" }));
    await t.sql`update checkpoints set created_at = '2026-01-01T00:00:00Z' where session_id = ${a}`;
    await t.sql`update checkpoints set created_at = '2026-01-01T00:00:01Z' where session_id = ${b}`;
    expect(await checkpointReadLatestOnRepo(t.sql, "/repo.git")).toMatchObject({
      sessionId: b,
      name: "0/after",
    });
    await t.sql`update checkpoints set created_at = '2026-01-01T00:00:02Z' where session_id = ${a} and name = '0/before'`;
    expect(await checkpointReadLatestOnRepo(t.sql, "/repo.git")).toMatchObject({
      sessionId: a,
      name: "0/before",
    });
    expect(await checkpointReadLatestOnRepo(t.sql, "/elsewhere.git")).toMatchObject({ name: "9/after" });
  });
});

describe("checkpointReadMissingAfters", () => {
  it("finds the session's ended turns with a 'before' and no 'after', in turn order", async () => {
    const id = await addSession(t.sql);
    const statuses: TaskStatus[] = [
      "completed",
      "interrupted",
      "queued",
      "running",
      "cancelling",
      "failed",
      "completed",
    ];
    const tasks = [];
    for (const status of statuses) tasks.push(await addTask(t.sql, id, { status }));
    // Turns 6 and 0..5 have a before; turn 1 also has its after.
    for (const i of [6, 0, 1, 2, 3, 4, 5])
      await checkpointInsert(t.sql, turnCheckpoint(id, tasks[i].id, i, "before"));
    await checkpointInsert(t.sql, turnCheckpoint(id, tasks[1].id, 1, "after"));
    const other = await addSession(t.sql);
    const otherTask = await addTask(t.sql, other, { status: "failed" });
    await checkpointInsert(t.sql, turnCheckpoint(other, otherTask.id, 0, "before"));
    // Another session's "after" of the same turn index is not this session's.
    await checkpointInsert(t.sql, turnCheckpoint(other, null, 5, "after"));
    expect(await checkpointReadMissingAfters(t.sql, id)).toEqual([
      { taskId: tasks[0].id, turnIndex: 0 },
      { taskId: tasks[5].id, turnIndex: 5 },
      { taskId: tasks[6].id, turnIndex: 6 },
    ]);
  });
});

describe("checkpointNextRevertIndex / checkpointReadLatestRevert", () => {
  it("counts the session's reverts: 1 and null when none, then past the highest", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "after"));
    await checkpointInsert(t.sql, revertCheckpoint(other, 7));
    expect(await checkpointNextRevertIndex(t.sql, id)).toBe(1);
    expect(await checkpointReadLatestRevert(t.sql, id)).toBeNull();
    await checkpointInsert(t.sql, revertCheckpoint(id, 2));
    await checkpointInsert(t.sql, revertCheckpoint(id, 1));
    expect(await checkpointNextRevertIndex(t.sql, id)).toBe(3);
    expect(await checkpointReadLatestRevert(t.sql, id)).toBe(2);
  });
});

describe("checkpointReadRepos", () => {
  it("answers each repository of the session once, with its store", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "before"));
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "after"));
    await checkpointInsert(
      t.sql,
      turnCheckpoint(id, null, 1, "after", { gitDir: "/ws/.git", store: "workspace" }),
    );
    await checkpointInsert(t.sql, turnCheckpoint(other, null, 0, "after", { gitDir: "/other.git" }));
    const repos = await checkpointReadRepos(t.sql, id);
    expect([...repos].sort((x, y) => x.gitDir.localeCompare(y.gitDir))).toEqual([
      { gitDir: "/repo.git", store: "shadow" },
      { gitDir: "/ws/.git", store: "workspace" },
    ]);
  });
});

describe("checkpointDeleteOfSession", () => {
  it("deletes every checkpoint of the session and none of another's", async () => {
    const id = await addSession(t.sql);
    const other = await addSession(t.sql);
    await checkpointInsert(t.sql, turnCheckpoint(id, null, 0, "before"));
    await checkpointInsert(t.sql, revertCheckpoint(id, 1));
    await checkpointInsert(t.sql, turnCheckpoint(other, null, 0, "before"));
    await checkpointDeleteOfSession(t.sql, id);
    const left = await t.sql`select session_id, name from checkpoints`;
    expect(left.map((r) => [r.sessionId, r.name])).toEqual([[other, "0/before"]]);
  });
});

describe("checkpointWithWorkspaceLock", () => {
  it("runs one holder of a workspace at a time, another workspace beside it, and answers what the work answered", async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding: () => void = () => {};
    const isHeld = new Promise<void>((resolve) => {
      holding = resolve;
    });
    const order: string[] = [];
    const first = checkpointWithWorkspaceLock(t.sql, "/ws/a", async () => {
      holding();
      await released;
      order.push("first");
      return 1;
    });
    await isHeld;
    expect(await checkpointWithWorkspaceLock(t.sql, "/ws/b", async () => "beside")).toBe("beside");
    const second = checkpointWithWorkspaceLock(t.sql, "/ws/a", async () => {
      order.push("second");
      return 2;
    });
    await someoneWaitsForALock(t.sql);
    expect(order).toEqual([]);
    release();
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    expect(order).toEqual(["first", "second"]);
  });

  it("lets the workspace go when the work throws", async () => {
    await expect(
      checkpointWithWorkspaceLock(t.sql, "/ws/c", async () => {
        throw new Error("checkpoint failed");
      }),
    ).rejects.toThrow("checkpoint failed");
    const [{ n }] = await t.sql<{ n: number }[]>`
      select count(*)::int as n from pg_locks
      where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`;
    expect(n).toBe(0);
    expect(await checkpointWithWorkspaceLock(t.sql, "/ws/c", async () => "again")).toBe("again");
  });
});
