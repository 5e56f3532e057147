/**
 * A steer whose notification never reached the instance running the turn (committed elsewhere, its
 * `mooring_input` lost): the running instance's poll finds it while the turn runs, and a turn whose
 * agent ends before anything read it does not settle past it: the agent gets it as a follow-up
 * prompt in the same task. The steer is written here as the steer transaction writes it (the
 * session row's lock, a `turn.input` event), without a notification.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway.js";
import { eventAppend } from "../../src/sql/event-append.js";
import { sessionLock } from "../../src/sql/session-lock.js";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { startTestGateway } from "../support/gateway.js";
import { createSession, submitOk, tempWorkspace, waitTask } from "../support/turns.js";

let workspace: string;
beforeAll(async () => {
  workspace = await tempWorkspace();
});

async function steerUnheard(
  db: TestDatabase,
  sessionId: string,
  taskId: string,
  text: string,
): Promise<number> {
  return db.sql.begin(async (tx) => {
    await sessionLock(tx, sessionId);
    const [event] = await eventAppend(tx, sessionId, [{ taskId, type: "turn.input", data: { text } }]);
    return Number(event.seq);
  });
}

async function deltas(db: TestDatabase, taskId: string): Promise<{ seq: number; text: string }[]> {
  const rows = await db.sql<{ seq: string; text: string }[]>`
    select seq, data->>'text' as text from events where task_id = ${taskId} and type = 'message.delta'
    order by seq`;
  return rows.map((r) => ({ seq: Number(r.seq), text: r.text }));
}

describe("the poll stands in for a lost notification", () => {
  let db: TestDatabase;
  let gw: Gateway;
  beforeAll(async () => {
    db = await createTestDatabase();
    gw = await startTestGateway(db.url, { MOORING_POLL_MS: "100" });
  });
  afterAll(async () => {
    await gw?.stop();
    await db?.drop();
  });

  it("a turn waiting for input takes a steer nobody announced", async () => {
    const session = await createSession(gw.url, workspace);
    const task = await submitOk(gw.url, session, { prompt: "[input]" });
    expect((await waitTask(gw.url, task.id, (t) => t.status !== "queued")).status).toBe("running");
    const seq = await steerUnheard(db, session, task.id, "polled");
    const done = await waitTask(gw.url, task.id, undefined, 30_000);
    expect(done.status).toBe("completed");
    expect(done.result.text).toBe("steered polled ");
    const echoes = await deltas(db, task.id);
    expect(echoes.map((e) => e.text)).toEqual(["steered polled "]);
    expect(echoes[0].seq).toBeGreaterThan(seq);
  });
});

describe("the settlement does not pass unread input", () => {
  let db: TestDatabase;
  let gw: Gateway;
  beforeAll(async () => {
    db = await createTestDatabase();
    // No poll within the test: only the settlement's check can find the input.
    gw = await startTestGateway(db.url, { MOORING_POLL_MS: "600000" });
  });
  afterAll(async () => {
    await gw?.stop();
    await db?.drop();
  });

  it("input stored while the agent worked, never read, goes to it as a follow-up prompt in the same task", async () => {
    const session = await createSession(gw.url, workspace);
    const task = await submitOk(gw.url, session, { prompt: "[sleep 3000]" });
    expect((await waitTask(gw.url, task.id, (t) => t.status !== "queued")).status).toBe("running");
    const seq = await steerUnheard(db, session, task.id, "unread");
    const done = await waitTask(gw.url, task.id, undefined, 30_000);
    expect(done.status).toBe("completed");
    // Not echoed within the turn (nothing read it): answered as the follow-up prompt.
    expect(done.result.text).toBe("You said: unread");
    const echoes = await deltas(db, task.id);
    expect(echoes.map((e) => e.text)).toEqual(["You said: [sleep 3000]", "You said: unread"]);
    expect(echoes[1].seq).toBeGreaterThan(seq);
    const [input] = await db.sql<{ closed: boolean }[]>`
      select input_closed_at is not null as closed from tasks where id = ${task.id}`;
    expect(input.closed).toBe(true);
    const terminal = await db.sql<{ type: string }[]>`
      select type from events where task_id = ${task.id} order by seq desc limit 1`;
    expect(terminal[0].type).toBe("task.completed");
  });
});
