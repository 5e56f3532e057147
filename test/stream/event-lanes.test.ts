/**
 * What rides in the event log's flushes (stream/event-lane.ts): a turn's events, its session writes
 * (resume cursor, context usage) and its settlement, across several lanes. The settlement's
 * terminal event comes after every event of the turn, even when the turn's events span several
 * flush transactions; the session row ends with the turn's cursor and usage.
 */
import { beforeAll, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";

const gt = useGateway({
  env: {
    MOORING_EVENT_FLUSH_LANES: "3",
    MOORING_EVENT_FLUSH_MAX: "16",
    MOORING_MAX_ACTIVE: "10",
  },
  workspace: true,
});

beforeAll(async () => {
  // A flush holds at most 256 events, and flushMax 16 makes a turn's events span many flushes;
  // 10 running, so none of the 6 turns waits in the queue (that would add task.position events).
});

it("settles after the last of 300 events, with the turn's cursor and usage on the session", async () => {
  const sessions = await Promise.all(Array.from({ length: 6 }, () => createSession(gt.url, gt.workspace)));
  const prompt = `${"[tool 5] ".repeat(150)}[tokens 1234]`;
  const tasks = await Promise.all(sessions.map((id) => submitOk(gt.url, id, { prompt })));
  const finals = await Promise.all(tasks.map((t) => waitTask(gt.url, t.id)));
  for (const t of finals) expect(t.status).toBe("completed");

  for (const [i, sessionId] of sessions.entries()) {
    const events = await gt.sql<{ seq: number; type: string }[]>`
      select seq, type from events where session_id = ${sessionId} order by seq`;
    // task.queued, task.started, 150 × (tool.call, tool.result), message.delta, message, usage, task.completed
    expect(events).toHaveLength(2 + 300 + 4);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, k) => k + 1));
    expect(events[events.length - 1].type).toBe("task.completed");
    expect(events.filter((e) => e.type === "task.completed")).toHaveLength(1);
    expect(finals[i].lastSeq).toBe(events.length);

    const [session] = await gt.sql<
      { agentSessionId: string; turnCount: number; lastAssistantMessageId: string; contextUsage: any }[]
    >`
      select agent_session_id, turn_count, last_assistant_message_id, context_usage from sessions where id = ${sessionId}`;
    expect(session.agentSessionId).toMatch(/^sim-/);
    expect(session.turnCount).toBe(1);
    expect(session.lastAssistantMessageId).toMatch(/^msg-/);
    expect(session.contextUsage).toMatchObject({ inputTokens: 1234 });
  }
});
