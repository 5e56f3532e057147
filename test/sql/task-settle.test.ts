/**
 * Direct tests of the owner's writes of a running turn on a real database: its settlement with the
 * terminal event (task-settle.ts) and its resume cursor and context usage (task-turn-state.ts).
 * Each asserts the owner fence (boot, attempt, an active status) and, for the settlement, the
 * steered input it must not settle past, so a wrong statement fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { taskSettleOwned, taskTerminalEvent } from "../../src/sql/task-settle.js";
import { type CursorFields, taskSaveTurnState } from "../../src/sql/task-turn-state.js";
import { addOwnedTask, taskById, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

const result = {
  text: "done",
  stopReason: "end_turn",
  usage: null,
  contextPercent: null,
};

const sessionOf = async (id: string) => {
  const [row] = await t.sql`select * from sessions where id = ${id}`;
  return row;
};
const eventsOf = (sessionId: string) =>
  t.sql`select seq, task_id, type, data from events where session_id = ${sessionId} order by seq`;

describe("taskSettleOwned", () => {
  it("settles the owner's task with its terminal event at the session's next seq, in one statement", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "running");
    await t.sql`update sessions set last_seq = 7, agent_session_id = 'agent-1', last_assistant_message_id = 'm-9'
      where id = ${row.sessionId}`;
    const settled = await taskSettleOwned(t.sql, fence, { status: "completed", result });
    expect(settled?.row).toMatchObject({
      id: row.id,
      status: "completed",
      result,
      error: null,
      leaseExpiresAt: null,
      firstSeq: 8,
      lastSeq: 8,
      version: row.version + 1,
      agentCursor: { agentSessionId: "agent-1", lastAssistantMessageId: "m-9" },
    });
    expect(settled?.row.finishedAt).toBeInstanceOf(Date);
    const expected = taskTerminalEvent({ id: row.id, status: "completed", result });
    expect(settled?.event).toMatchObject({
      sessionId: row.sessionId,
      seq: 8,
      taskId: row.id,
      type: "task.completed",
    });
    expect(settled?.event.data).toEqual(expected.data);
    expect(await eventsOf(row.sessionId)).toEqual([
      { seq: 8, taskId: row.id, type: "task.completed", data: expected.data },
    ]);
    expect((await sessionOf(row.sessionId)).lastSeq).toBe(8);
  });

  it("writes nothing and takes no seq for a stale owner or a settled task", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "cancelling");
    const error = { code: "AGENT_FAILED", message: "x" };
    expect(await taskSettleOwned(t.sql, { ...fence, attempt: 1 }, { status: "failed", error })).toBeNull();
    expect(
      await taskSettleOwned(t.sql, { ...fence, bootId: randomUUID() }, { status: "failed", error }),
    ).toBeNull();
    expect(await taskById(t.sql, row.id)).toMatchObject({ status: "cancelling", version: row.version });
    expect((await sessionOf(row.sessionId)).lastSeq).toBe(0);
    const cancelled = await taskSettleOwned(t.sql, fence, { status: "cancelled" });
    expect(cancelled?.row).toMatchObject({ status: "cancelled", result: null, error: null });
    expect(await taskSettleOwned(t.sql, fence, { status: "failed", error })).toBeNull();
    expect((await eventsOf(row.sessionId)).map((e) => e.type)).toEqual(["task.cancelled"]);
  });

  it("answers input-pending, writing nothing, while a turn.input of the task lies past what the turn read", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "running");
    const add = async (taskId: string, type: string) => {
      await t.sql`
        with head as (update sessions set last_seq = last_seq + 1 where id = ${row.sessionId} returning last_seq)
        insert into events (session_id, seq, task_id, type, data) select ${row.sessionId}, last_seq, ${taskId}, ${type}, '{}' from head`;
    };
    await add(row.id, "turn.input");
    await add(randomUUID(), "turn.input");
    await add(row.id, "agent.message");
    const input = { sessionId: row.sessionId, after: 1 };
    expect(await taskSettleOwned(t.sql, fence, { status: "completed", result }, { ...input, after: 0 })).toBe(
      "input-pending",
    );
    expect((await taskById(t.sql, row.id)).status).toBe("running");
    expect((await sessionOf(row.sessionId)).lastSeq).toBe(3);
    const settled = await taskSettleOwned(t.sql, fence, { status: "completed", result }, input);
    expect(settled).toMatchObject({ row: { status: "completed", lastSeq: 4 }, event: { seq: 4 } });
  });
});

describe("taskSaveTurnState", () => {
  const cursor: CursorFields = {
    agentSessionId: "agent-2",
    turnCount: 3,
    lastAssistantMessageId: "m-3",
    pastAgentSessionIds: ["agent-1"],
  };
  const usage = { inputTokens: 1000, contextWindow: 200_000, percent: 0.5 };

  it("writes the owner's cursor and usage, the usage alone leaving the cursor as it is", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "running");
    const rewind = { kind: "rollback" as const, agentSessionId: "agent-1", messageId: "m-1", turnIndex: 0 };
    await t.sql`update sessions set rewind = ${JSON.stringify(rewind)}::text::jsonb, title = 'kept' where id = ${row.sessionId}`;
    const before = await sessionOf(row.sessionId);
    expect(await taskSaveTurnState(t.sql, row.sessionId, { cursor }, fence)).toBe(true);
    expect(await sessionOf(row.sessionId)).toMatchObject({
      ...cursor,
      rewind: null,
      contextUsage: null,
      title: "kept",
      version: before.version + 1,
    });
    expect(await taskSaveTurnState(t.sql, row.sessionId, { contextUsage: usage }, fence)).toBe(true);
    expect(await sessionOf(row.sessionId)).toMatchObject({ ...cursor, contextUsage: usage });
    expect(await taskSaveTurnState(t.sql, row.sessionId, { cursor: { ...cursor, rewind } }, fence)).toBe(
      true,
    );
    expect(await sessionOf(row.sessionId)).toMatchObject({ rewind, contextUsage: usage });
  });

  it("changes nothing for a stale owner or a settled turn", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "cancelling");
    expect(await taskSaveTurnState(t.sql, row.sessionId, { cursor }, { ...fence, attempt: 1 })).toBe(false);
    expect(
      await taskSaveTurnState(t.sql, row.sessionId, { cursor }, { ...fence, bootId: randomUUID() }),
    ).toBe(false);
    await t.sql`update tasks set status = 'completed' where id = ${row.id}`;
    expect(await taskSaveTurnState(t.sql, row.sessionId, { contextUsage: usage }, fence)).toBe(false);
    expect(await sessionOf(row.sessionId)).toMatchObject({
      agentSessionId: null,
      turnCount: 0,
      contextUsage: null,
    });
  });
});
