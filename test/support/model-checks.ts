/**
 * The invariants the model-based test (test/process/model.test.ts) checks after every command, read from
 * the database rows (one statement per kind of row, so each is one consistent snapshot). Each
 * check returns what it found wrong, in words, so a failure explains itself.
 */
import type postgres from "postgres";

export const TERMINAL = ["completed", "failed", "cancelled", "expired", "interrupted"] as const;
const TERMINAL_EVENTS = TERMINAL.map((s) => `task.${s}`);

export interface TaskFacts {
  id: string;
  sessionId: string;
  status: string;
  attempt: number;
  idempotencyKey: string | null;
  error: { code?: string; reason?: string } | null;
  started: number;
  terminals: number;
  lastType: string | null;
  deltaText: string;
  messages: number;
}

/** Every task of `sessionIds` with the facts about its events. */
export async function readTaskFacts(sql: postgres.Sql, sessionIds: string[]): Promise<TaskFacts[]> {
  if (sessionIds.length === 0) return [];
  return sql<TaskFacts[]>`
    select t.id, t.session_id, t.status, t.attempt, t.idempotency_key, t.error,
      count(e.seq) filter (where e.type = 'task.started')::int as started,
      count(e.seq) filter (where e.type = any(${TERMINAL_EVENTS}::text[]))::int as terminals,
      (array_agg(e.type order by e.seq desc) filter (where e.seq is not null))[1] as last_type,
      coalesce(string_agg(e.data->>'text', '' order by e.seq) filter (where e.type = 'message.delta'), '') as delta_text,
      count(e.seq) filter (where e.type = 'message')::int as messages
    from tasks t left join events e on e.session_id = t.session_id and e.task_id = t.id
    where t.session_id = any(${sessionIds}::uuid[])
    group by t.id`;
}

/** Per task: at most one start (MOORING_RECOVERY=fail never runs a turn again), one terminal event, last. */
export function taskEventProblems(tasks: TaskFacts[]): string[] {
  const problems: string[] = [];
  for (const t of tasks) {
    const terminal = (TERMINAL as readonly string[]).includes(t.status);
    if (t.started > 1) problems.push(`task ${t.id}: ${t.started} task.started events (a turn ran twice)`);
    if (t.attempt > 1) problems.push(`task ${t.id}: attempt ${t.attempt} (a turn was claimed twice)`);
    if (t.terminals > 1) problems.push(`task ${t.id}: ${t.terminals} terminal events`);
    if (terminal && t.terminals !== 1) problems.push(`task ${t.id}: ${t.status} but ${t.terminals} terminal events`);
    if (!terminal && t.terminals !== 0) problems.push(`task ${t.id}: ${t.status} with a terminal event`);
    if (terminal && t.lastType !== `task.${t.status}`)
      problems.push(`task ${t.id}: ${t.status}, but its last event is ${t.lastType}`);
    if ((t.status === "running" || t.status === "cancelling") && t.started !== 1)
      problems.push(`task ${t.id}: ${t.status} with ${t.started} task.started events`);
    if (t.status === "queued" && t.started !== 0) problems.push(`task ${t.id}: queued after it started`);
  }
  return problems;
}

/** Each session's seqs are 1..n without gaps or repeats, n being the session's last_seq. */
export async function seqProblems(sql: postgres.Sql, sessionIds: string[]): Promise<string[]> {
  if (sessionIds.length === 0) return [];
  const rows = await sql<{ id: string; lastSeq: number; n: number; distinct: number; min: number | null; max: number | null }[]>`
    select s.id, s.last_seq, count(e.seq)::int as n, count(distinct e.seq)::int as distinct,
           min(e.seq)::int as min, max(e.seq)::int as max
    from sessions s left join events e on e.session_id = s.id
    where s.id = any(${sessionIds}::uuid[])
    group by s.id`;
  return rows
    .filter((r) => r.n !== r.distinct || r.n !== r.lastSeq || (r.n > 0 && (r.min !== 1 || r.max !== r.n)))
    .map((r) => `session ${r.id}: ${r.n} events (${r.distinct} distinct seqs, ${r.min}..${r.max}), last_seq ${r.lastSeq}`);
}

/** A session runs one turn at a time: between a task's start and its end no other task starts. */
export async function overlapProblems(sql: postgres.Sql, sessionIds: string[]): Promise<string[]> {
  if (sessionIds.length === 0) return [];
  const events = await sql<{ sessionId: string; seq: number; taskId: string | null; type: string }[]>`
    select session_id, seq, task_id, type from events
    where session_id = any(${sessionIds}::uuid[]) and (type = 'task.started' or type = any(${TERMINAL_EVENTS}::text[]))
    order by session_id, seq`;
  const problems: string[] = [];
  const running = new Map<string, string>();
  for (const e of events) {
    const current = running.get(e.sessionId);
    if (e.type === "task.started") {
      if (current) problems.push(`session ${e.sessionId}: task ${e.taskId} started (seq ${e.seq}) while ${current} ran`);
      running.set(e.sessionId, e.taskId ?? "?");
    } else if (current === e.taskId) {
      running.delete(e.sessionId);
    }
  }
  return problems;
}

/** One idempotency key of a session names one task. */
export async function idempotencyProblems(sql: postgres.Sql, sessionIds: string[]): Promise<string[]> {
  if (sessionIds.length === 0) return [];
  const rows = await sql<{ sessionId: string; idempotencyKey: string; n: number }[]>`
    select session_id, idempotency_key, count(*)::int as n from tasks
    where session_id = any(${sessionIds}::uuid[]) and idempotency_key is not null
    group by session_id, idempotency_key having count(*) > 1`;
  return rows.map((r) => `session ${r.sessionId}: key ${r.idempotencyKey} names ${r.n} tasks`);
}

/** The tasks waiting in the queue right now. */
export async function queuedTaskIds(sql: postgres.Sql): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`select id from tasks where status = 'queued'`;
  return rows.map((r) => r.id);
}
