
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, logsWith, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSessions, submitPrompt, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-recovery-", procs, (d, w) => {
  db = d;
  workspace = w;
});

const UNSAVED =
  "The server restarted before this conversation was saved, so its context was lost. Send your message again to continue.";

it("saved conversation: a continuation is queued and runs; unsaved: session.reset and nothing queued", async () => {
  const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: "recovery-a", MOORING_RECOVERY: "continue" });
  const first = await procs.spawn(env);
  await first.waitReady();
  const [saved, unsaved] = await createSessions(first.url, workspace, 2);

  // The saved session completes a turn first, so the agent's cursor has an assistant message.
  const warmup = await submitPrompt(first.url, saved, "hello");
  expect((await waitTerminal(first.url, warmup.id)).status).toBe("completed");
  const [cursor] =
    await db.sql`select agent_session_id, last_assistant_message_id from sessions where id = ${saved}`;
  expect(cursor.agentSessionId).not.toBeNull();
  expect(cursor.lastAssistantMessageId).not.toBeNull();

  const savedTurn = await submitPrompt(first.url, saved, "[sleep 5000] [deltas 2]");
  const unsavedTurn = await submitPrompt(first.url, unsaved, "[sleep 5000] [deltas 2]");
  // Both are running and the agent reported its conversation id (turn count written before the prompt).
  await eventually(async () => {
    const rows = await db.sql`
      select s.id from sessions s join tasks t on t.session_id = s.id
      where t.id = any(${[savedTurn.id, unsavedTurn.id]}::uuid[]) and t.status = 'running'
        and s.agent_session_id is not null and s.turn_count > 0`;
    return rows.length === 2;
  });
  const [unsavedCursor] = await db.sql`select last_assistant_message_id from sessions where id = ${unsaved}`;
  expect(unsavedCursor.lastAssistantMessageId).toBeNull();

  first.kill("SIGKILL");
  await exitedWithOutput(first);
  const second = await procs.spawn(env);
  await second.waitReady();

  // Saved: interrupted, and a continuation linked to it is queued on the same session and completes.
  const interrupted = await waitTerminal(second.url, savedTurn.id);
  expect(interrupted).toMatchObject({ status: "interrupted", error: { code: "GATEWAY_RESTART" } });
  const list = (await call(second.url, "GET", `/v1/tasks?sessionId=${saved}`)).body.items;
  const continuation = list.find((t: any) => t.continuesTaskId === savedTurn.id);
  expect(continuation).toMatchObject({ sessionId: saved, prompt: "Continue where you left off." });
  expect(list).toHaveLength(3);
  const done = await waitTerminal(second.url, continuation.id);
  expect(done).toMatchObject({ status: "completed", attempt: 1 });
  expect(done.result.text).toContain("Continue where you left off.");
  const savedEvents = await db.sql`
    select type, task_id, data from events where session_id = ${saved} and seq > ${interrupted.firstSeq} order by seq`;
  const types = savedEvents.map((e) => e.type);
  expect(types.indexOf("task.interrupted")).toBeLessThan(types.indexOf("task.queued"));
  expect(savedEvents.find((e) => e.type === "task.queued")!.data).toMatchObject({
    continuesTaskId: savedTurn.id,
  });
  expect(types).not.toContain("session.reset");
  await eventually(async () => logsWith(second, "recovery: continuation queued").length === 1);

  // Unsaved: interrupted, a session.reset with the spec's notice, and no new task.
  expect(await waitTerminal(second.url, unsavedTurn.id)).toMatchObject({
    status: "interrupted",
    error: { code: "GATEWAY_RESTART" },
  });
  const resets = await db.sql`
    select task_id, data from events where session_id = ${unsaved} and type = 'session.reset'`;
  expect(resets).toEqual([{ taskId: unsavedTurn.id, data: { reason: "unsaved", notice: UNSAVED } }]);
  const unsavedTasks = await db.sql`select id from tasks where session_id = ${unsaved}`;
  expect(unsavedTasks.map((t) => t.id)).toEqual([unsavedTurn.id]);
  await eventually(async () => logsWith(second, "recovery: conversation was not saved; reset").length === 1);

  // The session.reset reaches a client replaying the session's events.
  const sse = await fetch(`${second.url}/v1/sessions/${unsaved}/events?afterSeq=0`, {
    signal: AbortSignal.timeout(3000),
  }).catch(() => null);
  expect(sse?.status).toBe(200);
  const reader = sse!.body!.getReader();
  let text = "";
  while (!text.includes("session.reset")) {
    const { value, done: end } = await reader.read();
    if (end) break;
    text += new TextDecoder().decode(value);
  }
  await reader.cancel().catch(() => {});
  expect(text).toContain(UNSAVED);
}, 90_000);

it("graceful shutdown with continue: the turn interrupted after the grace gets a continuation another instance runs at once", async () => {
  const timers = {
    MOORING_RECOVERY: "continue",
    MOORING_SHUTDOWN_GRACE_MS: "500",
    MOORING_LEASE_MS: "30000",
  };
  const a = await procs.spawn(gatewayEnv(db.url, { ...timers, MOORING_INSTANCE_ID: "recovery-drain-a" }));
  const b = await procs.spawn(gatewayEnv(db.url, { ...timers, MOORING_INSTANCE_ID: "recovery-drain-b" }));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const bootB = (await call(b.url, "GET", "/readyz")).body.bootId;
  const [session] = await createSessions(a.url, workspace, 1);
  const warmup = await submitPrompt(a.url, session, "hello");
  expect((await waitTerminal(a.url, warmup.id)).status).toBe("completed");
  const long = await submitPrompt(a.url, session, "[sleep 30000]");
  expect(long.status).toBe("running");

  a.kill("SIGTERM");
  expect(await exitedWithOutput(a)).toBe(0);
  expect(await waitTerminal(b.url, long.id)).toMatchObject({
    status: "interrupted",
    error: { code: "GATEWAY_RESTART" },
  });
  expect(logsWith(a, "recovery: continuation queued")).toHaveLength(1);
  const [continuation] = await db.sql`select id from tasks where continues_task_id = ${long.id}`;
  const done = await waitTerminal(b.url, continuation.id);
  expect(done).toMatchObject({
    status: "completed",
    sessionId: session,
    prompt: "Continue where you left off.",
  });
  const [row] = await db.sql`select owner_boot from tasks where id = ${continuation.id}`;
  expect(row.ownerBoot).toBe(bootB);
  // Picked up without waiting for a lease to expire (the lease is 30 s here).
  expect(
    new Date(done.startedAt).getTime() - new Date((await waitTerminal(b.url, long.id)).finishedAt).getTime(),
  ).toBeLessThan(3000);
}, 60_000);
