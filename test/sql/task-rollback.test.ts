/**
 * Direct tests of a session's turn history on a real database: what a rollback reads and marks
 * (task-rollback.ts) and the ended turns a recap carries over (task-recap-turns.ts). Each asserts
 * its status filter, its rolled-back filter, its order and its limit, so a wrong statement fails
 * here.
 */
import { describe, expect, it } from "vitest";
import type { Tx } from "../../src/db/client.js";
import type { Rewind } from "../../src/db/schema.js";
import type { TaskStatus } from "../../src/sql/task-row.js";
import { taskReadRecapTurns } from "../../src/sql/task-recap-turns.js";
import {
  taskHasOpenTurn,
  taskKeptTurnBefore,
  taskLastCompletedTurns,
  taskMarkRolledBack,
} from "../../src/sql/task-rollback.js";
import { addSession, addTask, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

/** A session whose turns 0, 1, ... have these statuses (and none of another session counts). */
async function history(...statuses: TaskStatus[]): Promise<string> {
  const s = await addSession(t.sql);
  for (const status of statuses) await addTask(t.sql, s, { status });
  const other = await addSession(t.sql);
  await addTask(t.sql, other, { status: "completed" });
  await addTask(t.sql, other, { status: "queued" });
  return s;
}

const inTx = <T>(fn: (tx: Tx) => Promise<T>) => t.sql.begin((tx) => fn(tx)) as Promise<T>;
const rollBack = (s: string, turn: number) =>
  t.sql`update tasks set rolled_back_at = now() where session_id = ${s} and turn_index = ${turn}`;

describe("taskHasOpenTurn", () => {
  it("is true while the session has a turn queued, running or cancelling", async () => {
    for (const [statuses, open] of [
      [["completed", "failed", "cancelled", "expired", "interrupted"], false],
      [["completed", "queued"], true],
      [["running"], true],
      [["cancelling"], true],
    ] as [TaskStatus[], boolean][]) {
      const s = await history(...statuses);
      expect(await inTx((tx) => taskHasOpenTurn(tx, s))).toBe(open);
    }
  });
});

describe("taskLastCompletedTurns", () => {
  it("answers the last n completed turns still in the conversation, newest first", async () => {
    const s = await history("completed", "completed", "failed", "completed", "completed", "running");
    await rollBack(s, 4);
    expect(await inTx((tx) => taskLastCompletedTurns(tx, s, 2))).toEqual([3, 1]);
    expect(await inTx((tx) => taskLastCompletedTurns(tx, s, 10))).toEqual([3, 1, 0]);
    const empty = await addSession(t.sql);
    expect(await inTx((tx) => taskLastCompletedTurns(tx, empty, 2))).toEqual([]);
  });
});

describe("taskKeptTurnBefore", () => {
  it("answers the newest completed turn before the one given still in the conversation, -1 for none", async () => {
    const s = await history("completed", "completed", "failed", "completed");
    await rollBack(s, 1);
    expect(await inTx((tx) => taskKeptTurnBefore(tx, s, 3))).toBe(0);
    expect(await inTx((tx) => taskKeptTurnBefore(tx, s, 4))).toBe(3);
    expect(await inTx((tx) => taskKeptTurnBefore(tx, s, 0))).toBe(-1);
  });
});

describe("taskMarkRolledBack", () => {
  it("marks every ended turn from the given one on, once, and stores the rewind on the session", async () => {
    const s = await history("completed", "completed", "cancelled", "completed", "queued");
    await rollBack(s, 3);
    const rewind: Rewind = { kind: "rollback", agentSessionId: "a", messageId: "m", turnIndex: 0 };
    expect(await inTx((tx) => taskMarkRolledBack(tx, s, 1, rewind))).toEqual([1, 2]);
    const rows = await t.sql`
      select turn_index, rolled_back_at is not null as rolled_back, version from tasks
      where session_id = ${s} order by turn_index`;
    expect(rows.map((r) => [r.turnIndex, r.rolledBack, r.version])).toEqual([
      [0, false, 0],
      [1, true, 1],
      [2, true, 1],
      [3, true, 0],
      [4, false, 0],
    ]);
    const [session] = await t.sql`select rewind from sessions where id = ${s}`;
    expect(session.rewind).toEqual(rewind);
    const [{ n }] = await t.sql`select count(*)::int as n from tasks where rolled_back_at is not null`;
    expect(n).toBe(3);
  });
});

describe("taskReadRecapTurns", () => {
  it("reads the ended turns that ran and were not rolled back, newest first, cut to the budget", async () => {
    const s = await history("completed", "failed", "completed", "expired", "completed", "running");
    await t.sql`update tasks set started_at = now(), prompt = 'prompt ' || turn_index,
      result = jsonb_build_object('text', 'a long reply ' || turn_index)
      where session_id = ${s} and status <> 'expired'`;
    await rollBack(s, 4);
    const turns = await taskReadRecapTurns(t.sql, s, 10, 8);
    expect(turns).toEqual([
      {
        turnIndex: 2,
        status: "completed",
        prompt: "prompt 2",
        reply: "a long r",
        promptChars: 8,
        replyChars: 14,
      },
      { turnIndex: 1, status: "failed", prompt: "prompt 1", reply: null, promptChars: 8, replyChars: 14 },
      {
        turnIndex: 0,
        status: "completed",
        prompt: "prompt 0",
        reply: "a long r",
        promptChars: 8,
        replyChars: 14,
      },
    ]);
    expect((await taskReadRecapTurns(t.sql, s, 2, 100)).map((r) => r.turnIndex)).toEqual([2, 1]);
  });
});
