import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { connect, type Database } from "../../src/db/client.js";
import { applyMigrations } from "../../src/db/migrate.js";
import { eventAppend } from "../../src/sql/event-append.js";
import { taskSaveTurnState } from "../../src/sql/task-turn-state.js";
import { taskSettleOwned } from "../../src/sql/task-settle.js";
import type { TestDatabase } from "../support/db.js";
import { eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, logsWith, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSessions, submitPrompt } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-fencing-", procs, (d, w) => {
  db = d;
  workspace = w;
});

/** Make the task look taken over: a newer attempt by another boot, with an expired lease. */
async function forgeNewerOwner(taskId: string) {
  const [row] = await db.sql`
    update tasks set attempt = attempt + 1, owner_boot = ${randomUUID()}, owner_instance = 'forged',
      lease_expires_at = now() - interval '1 second', version = version + 1
    where id = ${taskId} and status = 'running'
    returning *`;
  expect(row).toBeDefined();
  return row;
}

/** The turn's opening write, the agent's conversation id on the session, has landed. */
async function conversationIdSaved(sessionId: string) {
  await eventually(async () => {
    const [s] = await db.sql`select agent_session_id from sessions where id = ${sessionId}`;
    return s.agentSessionId !== null;
  });
}

async function snapshot(taskId: string, sessionId: string) {
  const [task] = await db.sql`select * from tasks where id = ${taskId}`;
  const [session] = await db.sql`
    select last_seq, agent_session_id, turn_count, last_assistant_message_id, context_usage, version
    from sessions where id = ${sessionId}`;
  const [{ n }] = await db.sql`select count(*)::int as n from events where session_id = ${sessionId}`;
  return { task, session, events: n };
}

it("a stale owner's events, cursor, context usage and settlement change nothing, and it logs lost guard", async () => {
  // Slow heartbeat and sweep: the owner does not notice the takeover before the turn ends, so
  // every one of its writes meets the fence.
  const gw = await procs.spawn(
    gatewayEnv(db.url, {
      MOORING_INSTANCE_ID: "fencing-a",
      MOORING_LEASE_MS: "60000",
      MOORING_HEARTBEAT_MS: "30000",
      MOORING_SWEEP_MS: "60000",
    }),
  );
  await gw.waitReady();
  const [session] = await createSessions(gw.url, workspace, 1);
  const task = await submitPrompt(gw.url, session, "[sleep 1500] [deltas 3] [tool 100] [tokens 5000]");
  expect(task.status).toBe("running");
  // The agent saved its conversation id at the start of the turn; then the row is forged.
  await conversationIdSaved(session);
  await forgeNewerOwner(task.id);
  const forged = await snapshot(task.id, session);

  await eventually(
    async () => logsWith(gw, "lost guard: task was settled or taken over elsewhere").length === 1,
    15_000,
  );
  expect(
    logsWith(gw, "lost guard: events of a task this instance no longer owns were dropped").length,
  ).toBeGreaterThanOrEqual(1);
  expect(logsWith(gw, "lost guard: resume cursor not saved")).toHaveLength(1);
  expect(logsWith(gw, "lost guard: task was settled or taken over elsewhere")[0]).toMatchObject({
    taskId: task.id,
    attempt: 1,
    status: "completed",
  });

  // Let the process finish everything it might still write, then compare.
  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(0);
  const after = await snapshot(task.id, session);
  expect(after).toEqual(forged);
  expect(after.task).toMatchObject({ status: "running", attempt: 2, ownerInstance: "forged" });
  expect(after.session.lastAssistantMessageId).toBeNull();
  expect(after.session.contextUsage).toBeNull();
});

it("the owner's heartbeat notices the takeover, stops the turn and writes nothing", async () => {
  const gw = await procs.spawn(
    gatewayEnv(db.url, { MOORING_INSTANCE_ID: "fencing-b", MOORING_SWEEP_MS: "60000" }),
  );
  await gw.waitReady();
  const [session] = await createSessions(gw.url, workspace, 1);
  const task = await submitPrompt(gw.url, session, "[sleep 20000] [deltas 3]");
  expect(task.status).toBe("running");
  // Forge only once the turn's opening write (the agent's conversation id) has landed: a write
  // whose statement began before the forge commits after it (its snapshot predates the forge), which
  // is a write of the old lease, not a stale one, and would make the snapshots differ.
  await conversationIdSaved(session);
  await forgeNewerOwner(task.id);
  const forged = await snapshot(task.id, session);

  await eventually(async () => logsWith(gw, "lost guard: lease taken over; stopping the turn").length === 1);
  expect(logsWith(gw, "lost guard: lease taken over; stopping the turn")[0]).toMatchObject({
    taskId: task.id,
    attempt: 1,
  });
  gw.kill("SIGTERM");
  expect(await exitedWithOutput(gw)).toBe(0);
  // The stopped turn was not settled by its old owner, and it released nothing it no longer owns.
  expect(await snapshot(task.id, session)).toEqual(forged);
  expect(logsWith(gw, "turn settled")).toHaveLength(0);
});

it("the named SQL functions change 0 rows with a stale fence, and work with the current one", async () => {
  const database: Database = connect(db.url);
  try {
    await applyMigrations(database);
    const sql = database.sql;
    const [session] =
      await sql`insert into sessions (workspace, agent) values ('/tmp', 'simulated') returning id`;
    const currentBoot = randomUUID();
    const staleBoot = randomUUID();
    const [task] = await sql`
      insert into tasks (session_id, turn_index, status, prompt, timeout_ms, queue_deadline_at, attempt, owner_boot,
                         owner_instance, started_at, lease_expires_at)
      values (${session.id}, 0, 'running', 'p', 60000, now() + interval '1 minute', 2, ${currentBoot}, 'new',
              now(), now() - interval '1 second')
      returning *`;
    const before = await snapshot(task.id, session.id);
    const stale = [
      { taskId: task.id, bootId: staleBoot, attempt: 1 }, // the old owner
      { taskId: task.id, bootId: staleBoot, attempt: 2 }, // right attempt, wrong boot
      { taskId: task.id, bootId: currentBoot, attempt: 1 }, // right boot, older attempt
    ];
    for (const fence of stale) {
      expect(await taskSettleOwned(sql, fence, { status: "completed", result: null })).toBeNull();
      expect(
        await eventAppend(
          sql,
          session.id,
          [{ taskId: task.id, type: "message", data: { text: "late" } }],
          fence,
        ),
      ).toEqual([]);
      const cursor = {
        agentSessionId: "zombie",
        turnCount: 9,
        lastAssistantMessageId: "m",
        pastAgentSessionIds: [],
      };
      expect(await taskSaveTurnState(sql, session.id, { cursor }, fence)).toBe(false);
      expect(
        await taskSaveTurnState(
          sql,
          session.id,
          { contextUsage: { inputTokens: 1, contextWindow: 2, percent: 50 } },
          fence,
        ),
      ).toBe(false);
    }
    expect(await snapshot(task.id, session.id)).toEqual(before);

    // The current owner's writes go through (an expired lease alone does not fence the owner).
    const current = { taskId: task.id, bootId: currentBoot, attempt: 2 };
    const stored = await eventAppend(
      sql,
      session.id,
      [{ taskId: task.id, type: "message", data: { text: "ok" } }],
      current,
    );
    expect(stored.map((e) => e.seq)).toEqual([1]);
    expect(
      await taskSaveTurnState(
        sql,
        session.id,
        {
          cursor: {
            agentSessionId: "a",
            turnCount: 1,
            lastAssistantMessageId: "m1",
            pastAgentSessionIds: [],
          },
          contextUsage: { inputTokens: 10, contextWindow: 100, percent: 10 },
        },
        current,
      ),
    ).toBe(true);
    const [written] = await sql<{ agentSessionId: string; turnCount: number; contextUsage: unknown }[]>`
      select agent_session_id, turn_count, context_usage from sessions where id = ${session.id}`;
    expect(written).toEqual({
      agentSessionId: "a",
      turnCount: 1,
      contextUsage: { inputTokens: 10, contextWindow: 100, percent: 10 },
    });
    const settled = await taskSettleOwned(sql, current, { status: "completed", result: null });
    expect(settled?.row).toMatchObject({ status: "completed", version: task.version + 1 });
    expect(settled?.event).toMatchObject({
      type: "task.completed",
      taskId: task.id,
      seq: settled?.row.lastSeq,
    });
    // Once settled, even the former owner's writes are fenced: terminal states never change.
    expect(
      await taskSettleOwned(sql, current, {
        status: "failed",
        error: { code: "AGENT_ERROR", message: "x" },
      }),
    ).toBeNull();
    expect(
      await eventAppend(
        sql,
        session.id,
        [{ taskId: task.id, type: "message", data: { text: "after" } }],
        current,
      ),
    ).toEqual([]);
  } finally {
    await database.close();
  }
});
