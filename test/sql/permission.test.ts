/**
 * Direct tests of src/sql/permission.ts on a real database: a request recorded under its turn's
 * owner fence (or already answered), the first answer winning, the reads of answered and pending
 * requests, the settlement's rejection of a task's pending ones, and the count of turns waiting
 * for a person. A wrong statement fails here.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  permissionCountWaiting,
  permissionInsert,
  permissionPendingOf,
  permissionRead,
  permissionReadResolved,
  permissionResolve,
  permissionResolvePendingOfTasks,
  type PermissionRow,
} from "../../src/sql/permission.js";
import { addOwnedTask, useSqlTestDatabase } from "../support/sql-fixtures.js";

const t = useSqlTestDatabase();

const options = [
  { optionId: "allow", name: "Allow", kind: "allow_once" },
  { optionId: "deny", name: "Deny", kind: "reject_once" },
];
const toolCall = { id: "call-1", name: "Bash", title: "run", kind: "execute", input: { file_path: "/x" } };

const runningTurn = () => addOwnedTask(t.sql, "running");
type Turn = Awaited<ReturnType<typeof runningTurn>>;

const requestRow = (turn: Turn, over: Partial<PermissionRow> = {}) => ({
  id: randomUUID(),
  taskId: turn.row.id,
  sessionId: turn.row.sessionId,
  toolCall,
  options,
  expiresAt: new Date(Date.now() + 60_000),
  ...over,
});

/** A pending request of `turn`, recorded as its owner does. */
async function request(turn: Turn, opts = options): Promise<string> {
  const row = requestRow(turn, { options: opts });
  expect(await permissionInsert(t.sql, row, turn.fence)).toBe(true);
  return row.id;
}

describe("permissionInsert", () => {
  it("records a request only for the turn that owns its running task", async () => {
    const turn = await runningTurn();
    const id = await request(turn);
    expect(await permissionRead(t.sql, id)).toMatchObject({
      id,
      taskId: turn.row.id,
      sessionId: turn.row.sessionId,
      toolCall,
      options,
      resolvedAt: null,
    });
    expect(await permissionInsert(t.sql, requestRow(turn), { ...turn.fence, attempt: 1 })).toBe(false);
    expect(await permissionInsert(t.sql, requestRow(turn), { ...turn.fence, bootId: randomUUID() })).toBe(
      false,
    );
    await t.sql`update tasks set status = 'completed' where id = ${turn.row.id}`;
    expect(await permissionInsert(t.sql, requestRow(turn), turn.fence)).toBe(false);
    const [{ n }] = await t.sql`select count(*)::int as n from permission_requests`;
    expect(n).toBe(1);
  });

  it("writes a request the gateway refuses unasked already answered, so no client answers it", async () => {
    const turn = await runningTurn();
    const row = requestRow(turn);
    const refused = { optionId: "deny", by: "gateway" as const, message: "input too large to show" };
    expect(await permissionInsert(t.sql, row, turn.fence, refused)).toBe(true);
    const stored = await permissionRead(t.sql, row.id);
    expect(stored).toMatchObject({
      optionId: "deny",
      resolvedBy: "gateway",
      message: "input too large to show",
    });
    expect(stored?.resolvedAt).toBeInstanceOf(Date);
    expect(await permissionResolve(t.sql, row.id, { optionId: "allow", by: "client" })).toBeNull();
    expect(await permissionPendingOf(t.sql, [turn.row.id])).toEqual([]);
  });
});

describe("permissionResolve", () => {
  it("lets the first answer win and keeps what it said", async () => {
    const id = await request(await runningTurn());
    const answer = { optionId: "allow", message: "ok", answers: { which_file: "a" }, answeredBy: "alice" };
    const won = await permissionResolve(t.sql, id, { ...answer, by: "client" });
    expect(won).toMatchObject({ ...answer, resolvedBy: "client" });
    expect(won?.resolvedAt).toBeInstanceOf(Date);
    expect(await permissionResolve(t.sql, id, { optionId: "deny", by: "timeout" })).toBeNull();
    expect((await permissionRead(t.sql, id))?.optionId).toBe("allow");
    expect(await permissionResolve(t.sql, randomUUID(), { optionId: null, by: "cancel" })).toBeNull();
  });

  it("lets exactly one of many concurrent answers win", async () => {
    const id = await request(await runningTurn());
    const answers = await Promise.all(
      ["allow", "deny", "allow", "deny"].map((optionId, i) =>
        permissionResolve(t.sql, id, { optionId, by: "client", answeredBy: `client-${i}` }),
      ),
    );
    const won = answers.filter((a) => a !== null);
    expect(won).toHaveLength(1);
    expect(await permissionRead(t.sql, id)).toMatchObject({
      optionId: won[0]?.optionId,
      answeredBy: won[0]?.answeredBy,
    });
  });
});

describe("permissionRead", () => {
  it("reads a request by id, null for a missing one", async () => {
    const turn = await runningTurn();
    const id = await request(turn);
    expect((await permissionRead(t.sql, id))?.taskId).toBe(turn.row.id);
    expect(await permissionRead(t.sql, randomUUID())).toBeNull();
  });
});

describe("permissionReadResolved / permissionPendingOf", () => {
  it("reads which of the asked requests were answered, and the pending ones of tasks in order", async () => {
    const turn = await runningTurn();
    const [a, b, c] = [await request(turn), await request(turn), await request(turn)];
    const elsewhere = await request(await runningTurn());
    await permissionResolve(t.sql, b, { optionId: "allow", by: "client" });
    await permissionResolve(t.sql, elsewhere, { optionId: "allow", by: "client" });
    expect((await permissionReadResolved(t.sql, [a, b, c])).map((r) => r.id)).toEqual([b]);
    expect(await permissionReadResolved(t.sql, [])).toEqual([]);
    // The older request gets the larger id: the order is by time first, not by id.
    const [older, newer] = [a, c].sort().reverse();
    await t.sql`update permission_requests set created_at = created_at - interval '1 minute' where id = ${older}`;
    expect((await permissionPendingOf(t.sql, [turn.row.id])).map((r) => r.id)).toEqual([older, newer]);
    expect(await permissionPendingOf(t.sql, [])).toEqual([]);
  });
});

describe("permissionResolvePendingOfTasks", () => {
  it("resolves the pending requests of settled tasks with their reject option, leaves answered ones", async () => {
    const turn = await runningTurn();
    const pending = await request(turn);
    const noReject = await request(turn, [options[0]]);
    const answered = await request(turn);
    await permissionResolve(t.sql, answered, { optionId: "allow", by: "client" });
    const other = await request(await runningTurn());

    const resolved = await permissionResolvePendingOfTasks(t.sql, [turn.row.id], "restart");
    expect(new Map(resolved.map((r) => [r.id, [r.optionId, r.resolvedBy]]))).toEqual(
      new Map([
        [pending, ["deny", "restart"]],
        [noReject, [null, "restart"]],
      ]),
    );
    expect(await permissionRead(t.sql, answered)).toMatchObject({ optionId: "allow", resolvedBy: "client" });
    expect((await permissionRead(t.sql, other))?.resolvedAt).toBeNull();
    expect(await permissionResolvePendingOfTasks(t.sql, [], "restart")).toEqual([]);
  });
});

describe("permissionCountWaiting", () => {
  it("counts active turns waiting for a person, each once", async () => {
    expect(await permissionCountWaiting(t.sql)).toBe(0);
    const waiting = await runningTurn();
    await request(waiting);
    await request(waiting);
    const answered = await runningTurn();
    await permissionResolve(t.sql, await request(answered), { optionId: "allow", by: "client" });
    const settled = await runningTurn();
    await request(settled);
    await t.sql`update tasks set status = 'failed' where id = ${settled.row.id}`;
    expect(await permissionCountWaiting(t.sql)).toBe(1);
  });
});
