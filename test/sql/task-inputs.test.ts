/**
 * Direct tests of src/sql/task-inputs.ts on a real database: a steer's lock of the running turn,
 * a retried steer's stored input found by its key, the reads of a turn's `turn.input` events (one
 * turn, and the safety poll of many), whether the owner still runs its task, and the close of a
 * turn's input. Each asserts its fence (owner boot and attempt, status, tenant, the task's own
 * events), so a wrong statement fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  taskCloseInput,
  taskFindInputByKey,
  taskFindInputs,
  taskLockForInput,
  taskReadInputs,
  taskReadRunningOfSession,
  taskStillRuns,
} from "../../src/sql/task-inputs.js";
import {
  addOwnedTask,
  addSession,
  addTask,
  rowIsFree,
  taskById,
  useSqlTestDatabase,
} from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

/** Appends an event to the session's log at its next seq (as the log does under the session lock); its seq. */
async function append(
  sessionId: string,
  taskId: string | null,
  type: string,
  data: unknown = {},
): Promise<number> {
  const [row] = await t.sql<{ seq: number }[]>`
    with head as (update sessions set last_seq = last_seq + 1 where id = ${sessionId} returning last_seq)
    insert into events (session_id, seq, task_id, type, data)
    select ${sessionId}, last_seq, ${taskId}, ${type}, ${JSON.stringify(data)}::text::jsonb from head
    returning seq`;
  return Number(row.seq);
}

const input = (sessionId: string, taskId: string, text: string, idempotencyKey?: string) =>
  append(sessionId, taskId, "turn.input", { text, ...(idempotencyKey ? { idempotencyKey } : {}) });

describe("taskLockForInput", () => {
  it("answers the turn's status and whether its input is closed, holding the task row", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "running");
    await t.sql.begin(async (tx) => {
      expect(await taskLockForInput(tx, row.id)).toEqual({ status: "running", inputClosed: false });
      expect(await rowIsFree(t.sql, "tasks", row.id)).toBe(false);
    });
    await taskCloseInput(t.sql, fence);
    expect(await t.sql.begin((tx) => taskLockForInput(tx, row.id))).toEqual({
      status: "running",
      inputClosed: true,
    });
    expect(await t.sql.begin((tx) => taskLockForInput(tx, randomUUID()))).toBeNull();
  });
});

describe("taskFindInputByKey", () => {
  it("finds the first stored input with the key, of the task or (null) of any of the session's", async () => {
    const s = await addSession(t.sql);
    const first = await addTask(t.sql, s, { status: "completed" });
    const second = await addTask(t.sql, s, { status: "running" });
    await input(s, first.id, "no key");
    const keyed = await input(s, first.id, "hello", "k");
    await input(s, second.id, "again", "k");
    await append(s, first.id, "agent.message", { text: "x", idempotencyKey: "m" });
    const found = await taskFindInputByKey(t.sql, s, first.id, "k");
    expect(found).toMatchObject({ seq: keyed, text: "hello", taskId: first.id });
    expect(found?.at).toBeInstanceOf(Date);
    expect(await taskFindInputByKey(t.sql, s, null, "k")).toMatchObject({ seq: keyed, taskId: first.id });
    expect(await taskFindInputByKey(t.sql, s, second.id, "k")).toMatchObject({
      text: "again",
      taskId: second.id,
    });
    expect(await taskFindInputByKey(t.sql, s, null, "m")).toBeNull();
    expect(await taskFindInputByKey(t.sql, s, null, "other")).toBeNull();
    expect(await taskFindInputByKey(t.sql, await addSession(t.sql), null, "k")).toBeNull();
  });
});

describe("taskReadRunningOfSession", () => {
  it("finds the session's running turn that takes input, for its tenant or null (any)", async () => {
    const s = await addSession(t.sql, { tenant: "a" });
    await addTask(t.sql, s, { status: "completed" });
    await addTask(t.sql, s, { status: "queued" });
    expect(await taskReadRunningOfSession(t.sql, s, null)).toBeNull();
    const running = await addTask(t.sql, s, { status: "running" });
    expect(await taskReadRunningOfSession(t.sql, s, "a")).toEqual({ id: running.id });
    expect(await taskReadRunningOfSession(t.sql, s, null)).toEqual({ id: running.id });
    expect(await taskReadRunningOfSession(t.sql, s, "b")).toBeNull();
    await t.sql`update tasks set input_closed_at = now() where id = ${running.id}`;
    expect(await taskReadRunningOfSession(t.sql, s, null)).toBeNull();
    const cancelling = await addSession(t.sql);
    await addTask(t.sql, cancelling, { status: "cancelling" });
    expect(await taskReadRunningOfSession(t.sql, cancelling, null)).toBeNull();
  });
});

describe("taskReadInputs", () => {
  it("reads the task's inputs after the seq, oldest first, and the head of the log it scanned", async () => {
    const s = await addSession(t.sql);
    const task = await addTask(t.sql, s, { status: "running" });
    const other = await addTask(t.sql, s, { status: "completed" });
    const early = await input(s, task.id, "early");
    await append(s, task.id, "agent.message");
    const one = await input(s, task.id, "one");
    await input(s, other.id, "not mine");
    const two = await input(s, task.id, "two");
    const head = await append(s, null, "session.updated");

    const read = await taskReadInputs(t.sql, s, task.id, early);
    expect(read.head).toBe(head);
    expect(read.inputs.map((i) => [i.seq, i.text])).toEqual([
      [one, "one"],
      [two, "two"],
    ]);
    expect(read.inputs[0].at).toBeInstanceOf(Date);
    expect(await taskReadInputs(t.sql, s, task.id, head)).toEqual({ inputs: [], head });
    expect(await taskReadInputs(t.sql, s, task.id, two)).toEqual({ inputs: [], head });
  });
});

describe("taskFindInputs", () => {
  it("for each turn whose session's log grew past its seq, the head and whether the turn's own input is among the new events", async () => {
    const [s1, s2, s3] = [await addSession(t.sql), await addSession(t.sql), await addSession(t.sql)];
    const steered = await addTask(t.sql, s1, { status: "running" });
    const chatty = await addTask(t.sql, s2, { status: "running" });
    const quiet = await addTask(t.sql, s3, { status: "running" });
    const before = await input(s1, steered.id, "old");
    await append(s1, steered.id, "agent.message");
    const steer = await input(s1, steered.id, "new");
    const other = await addTask(t.sql, s2, { status: "queued" });
    const chattyFrom = await append(s2, chatty.id, "agent.message");
    const chattyHead = await input(s2, other.id, "not this turn's");
    const quietHead = await append(s3, quiet.id, "agent.message");

    const found = await taskFindInputs(t.sql, [
      { sessionId: s1, taskId: steered.id, afterSeq: before },
      { sessionId: s2, taskId: chatty.id, afterSeq: chattyFrom - 1 },
      { sessionId: s3, taskId: quiet.id, afterSeq: quietHead },
    ]);
    expect(found.sort((a, b) => a.head - b.head)).toEqual(
      [
        { taskId: steered.id, head: steer, input: true },
        { taskId: chatty.id, head: chattyHead, input: false },
      ].sort((a, b) => a.head - b.head),
    );
    expect(await taskFindInputs(t.sql, [])).toEqual([]);
  });
});

describe("taskStillRuns", () => {
  it("is true only for the owner's running task", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "running");
    expect(await taskStillRuns(t.sql, fence)).toBe(true);
    expect(await taskStillRuns(t.sql, { ...fence, attempt: fence.attempt + 1 })).toBe(false);
    expect(await taskStillRuns(t.sql, { ...fence, bootId: randomUUID() })).toBe(false);
    expect(await taskStillRuns(t.sql, { ...fence, taskId: randomUUID() })).toBe(false);
    await t.sql`update tasks set status = 'completed' where id = ${row.id}`;
    expect(await taskStillRuns(t.sql, fence)).toBe(false);
  });
});

describe("taskCloseInput", () => {
  it("closes the owner's turn to input once, keeping the first time; a stale owner changes nothing", async () => {
    const { row, fence } = await addOwnedTask(t.sql, "running");
    await taskCloseInput(t.sql, { ...fence, attempt: 1 });
    await taskCloseInput(t.sql, { ...fence, bootId: randomUUID() });
    expect((await taskById(t.sql, row.id)).inputClosedAt).toBeNull();
    await taskCloseInput(t.sql, fence);
    const closed = (await taskById(t.sql, row.id)).inputClosedAt;
    expect(closed).toBeInstanceOf(Date);
    await t.sql`update tasks set input_closed_at = input_closed_at - interval '1 minute' where id = ${row.id}`;
    const backdated = (await taskById(t.sql, row.id)).inputClosedAt;
    await taskCloseInput(t.sql, fence);
    expect((await taskById(t.sql, row.id)).inputClosedAt).toEqual(backdated);
  });
});
