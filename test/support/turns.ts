/**
 * The one create/submit/wait API of the tests: sessions, submits, waiting on a task (its end, a
 * status, a permission request), cancels, row counts. Every helper takes the gateway's base URL, so
 * one works for any instance; `headers` carry a token where one is required.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type postgres from "postgres";
import { type Answer, call, eventually } from "./gateway.js";

export const terminal = ["completed", "failed", "cancelled", "expired", "interrupted"];

export async function tempWorkspace(): Promise<string> {
  return mkdtemp(join(tmpdir(), "mooring-ws-"));
}

/**
 * Create a session from a whole body and insist it was created (201); returns the session.
 * `headers` carry a tenant's token or a request id.
 */
export async function createSessionWith(
  base: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<any> {
  const s = await call(base, "POST", "/v1/sessions", body, headers);
  if (s.status !== 201) throw new Error(`session not created: ${s.status} ${JSON.stringify(s.body)}`);
  return s.body;
}

/** A session of the simulated agent in `workspace`; returns its id. */
export async function createSession(
  base: string,
  workspace: string,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<string> {
  return (await createSessionWith(base, { workspace, agent: "simulated", ...extra }, headers)).id;
}

/** `n` sessions of the simulated agent in `workspace`, titled s0, s1, …; returns their ids. */
export async function createSessions(base: string, workspace: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await createSession(base, workspace, { title: `s${i}` }));
  return ids;
}

/** Submit a turn; the raw answer (for tests of refusals). */
export function submit(
  base: string,
  sessionId: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return call(base, "POST", `/v1/sessions/${sessionId}/turns`, body, headers);
}

/** Submit and insist it was accepted (202); returns the task snapshot. */
export async function submitOk(
  base: string,
  sessionId: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<any> {
  const t = await submit(base, sessionId, body, headers);
  if (t.status !== 202) throw new Error(`submit refused: ${t.status} ${JSON.stringify(t.body)}`);
  return t.body;
}

/** Submit a prompt and insist it was accepted (202); returns the task snapshot. */
export const submitPrompt = (
  base: string,
  sessionId: string,
  prompt: string,
  headers: Record<string, string> = {},
): Promise<any> => submitOk(base, sessionId, { prompt }, headers);

/**
 * Long-poll a task until `done(task)` holds (default: terminal). A 503 (a gateway starting or
 * restarting) is asked again after a moment; any other error status fails. `headers` carry a token
 * where the gateway requires one.
 */
export async function waitTask(
  base: string,
  taskId: string,
  done: (task: any) => boolean = (t) => terminal.includes(t.status),
  timeoutMs = 30_000,
  headers: Record<string, string> = {},
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  // The first look does not wait (a long-poll waits for a change, and the task may be there already).
  for (let wait = 0; ; wait = 5000) {
    const r = await call(base, "GET", `/v1/tasks/${taskId}?waitMs=${wait}`, undefined, headers);
    if (r.status === 503 && Date.now() <= deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    if (r.status !== 200) throw new Error(`GET task ${taskId}: ${r.status} ${JSON.stringify(r.body)}`);
    if (done(r.body)) return r.body;
    if (Date.now() > deadline) throw new Error(`task ${taskId} still ${r.body.status} after ${timeoutMs} ms`);
  }
}

/** Long-poll until the task is terminal (through a restart: 503s are asked again). */
export const waitTerminal = (base: string, taskId: string, timeoutMs = 60_000): Promise<any> =>
  waitTask(base, taskId, undefined, timeoutMs);

/** Submit a prompt and wait for the task's end; returns the final task. */
export async function runTurn(base: string, sessionId: string, prompt: string): Promise<any> {
  return waitTerminal(base, (await submitPrompt(base, sessionId, prompt)).id);
}

/** Long-poll until the task is in `status` or terminal (the caller asserts which). */
export const waitStatus = (base: string, taskId: string, status: string, timeoutMs?: number) =>
  waitTask(base, taskId, (t) => t.status === status || terminal.includes(t.status), timeoutMs);

/**
 * Poll until the task has a pending permission request; returns the first. (A pending request
 * changes no task state, so a long-poll would not wake for it.)
 */
export const waitPermission = (
  base: string,
  taskId: string,
  timeoutMs = 20_000,
  headers: Record<string, string> = {},
): Promise<any> =>
  eventually(
    async () =>
      (await call(base, "GET", `/v1/tasks/${taskId}`, undefined, headers)).body.pendingPermissions?.[0],
    timeoutMs,
  );

/** Rows in tasks and events (to prove a refused request wrote nothing). */
export async function counts(
  sql: postgres.Sql,
): Promise<{ tasks: number; events: number; turnIndexes: number }> {
  const [row] = await sql<{ tasks: number; events: number; turnIndexes: number }[]>`
    select (select count(*)::int from tasks) as tasks, (select count(*)::int from events) as events,
           (select coalesce(sum(next_turn_index), 0)::int from sessions) as turn_indexes`;
  return row;
}

/** Event types of one task, in seq order. */
export async function taskEventTypes(sql: postgres.Sql, taskId: string): Promise<string[]> {
  const rows = await sql<{ type: string }[]>`select type from events where task_id = ${taskId} order by seq`;
  return rows.map((r) => r.type);
}

/** Cancel a task and wait for it to end; returns the final task. */
export async function cancelTask(
  base: string,
  taskId: string,
  headers: Record<string, string> = {},
): Promise<any> {
  await call(base, "POST", `/v1/tasks/${taskId}/cancel`, undefined, headers);
  return waitTask(base, taskId, undefined, undefined, headers);
}

/** Cancel every open task and wait for each to end (so a failed test does not hold slots for the next). */
export async function cancelOpenTasks(base: string, sql: postgres.Sql, headers: Record<string, string> = {}): Promise<void> {
  const open = await sql<
    { id: string }[]
  >`select id from tasks where status in ('queued', 'running', 'cancelling')`;
  await Promise.all(open.map((t) => cancelTask(base, t.id, headers)));
}
