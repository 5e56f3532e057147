import type { Rewind } from "../db/schema.js";
import type { Queryable, Tx } from "../db/client.js";
import type { TaskRow } from "./task-row.js";
import { TERMINAL, taskWithStatusSets } from "./task-status-sets.js";

/** The turn a fork is taken at, with where the agent's conversation stood when it ended. */
export interface ForkPoint {
  turnIndex: number;
  lastSeq: number;
  rolledBack: boolean;
  status: string;
}

/**
 * The source's turn `atTurn` (null: its last completed turn that is not rolled back), when it has
 * ended: a running or queued turn is no fork point. tasks_session_idx answers both forms.
 */
export async function sessionReadForkPoint(
  q: Tx,
  sessionId: string,
  atTurn: number | null,
): Promise<ForkPoint | null> {
  const [row] = await taskWithStatusSets(q)<ForkPoint[]>`
    select turn_index, last_seq, rolled_back_at is not null as rolled_back, status from tasks
    where session_id = ${sessionId} and status in ${TERMINAL}
      and (case when ${atTurn}::int is null then status = 'completed' and rolled_back_at is null
           else turn_index = ${atTurn}::int end)
    order by turn_index desc limit 1`;
  return row ?? null;
}

/**
 * The agent conversation as it stood at the end of the newest kept turn that saved an assistant
 * message (a turn that failed may have left none): what a fork or a rollback branches from.
 * Rolled-back turns are not part of the conversation, so theirs never count.
 */
export async function sessionReadBranchPoint(
  q: Tx,
  sessionId: string,
  upToTurn: number,
): Promise<{ agentSessionId: string | null; messageId: string | null }> {
  const [row] = await q<{ agentSessionId: string | null; messageId: string | null }[]>`
    select agent_cursor->>'agentSessionId' as agent_session_id,
      agent_cursor->>'lastAssistantMessageId' as message_id
    from tasks
    where session_id = ${sessionId} and turn_index <= ${upToTurn} and rolled_back_at is null
      and agent_cursor->>'lastAssistantMessageId' is not null
    order by turn_index desc limit 1`;
  return row ?? { agentSessionId: null, messageId: null };
}

/**
 * Whether the source's agent conversation still stands where the fork point left it: no turn of
 * the source after the fork point (ended, running or queued, rolled back or not), no rewind of its
 * own pending, and its cursor on the branch's conversation. Only then does a fork of that whole
 * conversation (ACP `session/fork`, which cannot cut it at a message) hold the fork's history and
 * nothing more. tasks_session_idx answers the exists.
 */
export async function sessionIsAtSourceHead(
  q: Tx,
  sourceId: string,
  turnIndex: number,
  agentSessionId: string | null,
): Promise<boolean> {
  if (agentSessionId === null) return false;
  const [row] = await q<{ head: boolean }[]>`
    select s.rewind is null and s.agent_session_id = ${agentSessionId}
      and not exists (select 1 from tasks t where t.session_id = s.id and t.turn_index > ${turnIndex}) as head
    from sessions s where s.id = ${sourceId}`;
  return row?.head === true;
}

/**
 * Whether the source has a turn after the fork point (ended, running or queued, on any instance):
 * then its agent conversation may hold more than the fork's history, and a fork of it whole is no
 * longer right. Read when the fork's first turn starts, since the source may move on after the
 * fork was made; a running turn whose state is not saved yet counts. tasks_session_idx answers it.
 */
export async function sessionHasTurnAfter(
  q: Queryable,
  sourceId: string,
  turnIndex: number,
): Promise<boolean> {
  const [row] = await q<{ moved: boolean }[]>`
    select exists (select 1 from tasks where session_id = ${sourceId} and turn_index > ${turnIndex}) as moved`;
  return row?.moved === true;
}

export interface ForkToInsert {
  sourceId: string;
  title: string | null;
  metadata: Record<string, unknown>;
  idempotencyKey: string | null;
  point: ForkPoint;
  rewind: Rewind;
}

/**
 * The fork's session row: the source's tenant, group, workspace, agent and config; the rewind its
 * first turn applies; turn indexes going on after the fork point. Like a create, a key already
 * used in the tenant (sessions_tenant_idempotency_idx) inserts nothing and answers that session.
 */
export async function sessionInsertFork(q: Tx, f: ForkToInsert): Promise<{ id: string; created: boolean }> {
  const [inserted] = await q<{ id: string }[]>`
    insert into sessions (tenant, instance_group, workspace, agent, agent_config, title, metadata,
      idempotency_key, forked_from, rewind, turn_count, next_turn_index)
    select tenant, instance_group, workspace, agent, agent_config, ${f.title}, ${JSON.stringify(f.metadata)}::text::jsonb,
      ${f.idempotencyKey}, ${JSON.stringify({ sessionId: f.sourceId, turnIndex: f.point.turnIndex })}::text::jsonb,
      ${JSON.stringify(f.rewind)}::text::jsonb, ${f.point.turnIndex + 1}, ${f.point.turnIndex + 1}
    from sessions where id = ${f.sourceId}
    on conflict (tenant, idempotency_key) do nothing
    returning id`;
  if (inserted) return { id: inserted.id, created: true };
  const [existing] = await q<
    { id: string }[]
  >`select s.id from sessions s join sessions src on src.id = ${f.sourceId}
    where s.tenant = src.tenant and s.idempotency_key = ${f.idempotencyKey}`;
  return { id: existing.id, created: false };
}

/**
 * The carried history, copied (docs/api.md, Fork and rollback): the source's ended turns up to the
 * fork point (those that ended by then: `last_seq <= cut`) get new ids in the fork, and the events
 * up to the cut that belong to them or to no turn go along renumbered gap-free after the fork's
 * `session.forked` (seq 1). Events of turns left out (queued or running at the fork point) are not
 * copied, nor the source's own `session.forked`. One statement, so it reads one snapshot of the
 * source; the fork's `last_seq` and each copied turn's seq range are set from what went in.
 * Answers how many turns and events were carried.
 */
export async function sessionCopyForkHistory(
  q: Tx,
  forkId: string,
  sourceId: string,
  point: ForkPoint,
): Promise<{ turns: number; events: number }> {
  // Copies are history, not news: the webhook outbox trigger skips them (migrations/0015).
  await q`select set_config('mooring.copying', 'on', true)`;
  const [row] = await taskWithStatusSets(q)<{ turns: number; events: number }[]>`
    with src as (
      select t.*, gen_random_uuid() as new_id from tasks t
      where t.session_id = ${sourceId} and t.turn_index <= ${point.turnIndex} and t.status in ${TERMINAL}
        and t.last_seq is not null and t.last_seq <= ${point.lastSeq}
    ), evs as (
      select e.type, e.at, e.data, e.payload, src.new_id, 1 + row_number() over (order by e.seq) as new_seq
      from events e left join src on src.id = e.task_id
      where e.session_id = ${sourceId} and e.seq <= ${point.lastSeq} and e.type <> 'session.forked'
        and (e.task_id is null or src.id is not null)
    ), seqs as (
      select new_id, min(new_seq) as first_seq, max(new_seq) as last_seq from evs where new_id is not null group by new_id
    ), turns as (
      insert into tasks (id, session_id, tenant, instance_group, turn_index, status, prompt, jumps_queue,
        load_class, timeout_ms, created_at, queue_deadline_at, started_at, deadline_at, finished_at, attempt,
        result, error, first_seq, last_seq, continues_task_id, agent_cursor, rolled_back_at)
      select src.new_id, ${forkId}, src.tenant, src.instance_group, src.turn_index, src.status, src.prompt,
        src.jumps_queue, src.load_class, src.timeout_ms, src.created_at, src.queue_deadline_at, src.started_at,
        src.deadline_at, src.finished_at, src.attempt, src.result, src.error, seqs.first_seq, seqs.last_seq,
        null, src.agent_cursor, src.rolled_back_at
      from src left join seqs on seqs.new_id = src.new_id
      returning id
    ), copied as (
      insert into events (session_id, seq, task_id, type, at, data, payload)
      select ${forkId}, new_seq, new_id, type, at, data, payload from evs
      returning seq
    )
    select (select count(*) from turns)::int as turns, (select count(*) from copied)::int as events`;
  await q`select set_config('mooring.copying', 'off', true)`;
  return row;
}

/**
 * The fork's first event, `session.forked`, at seq 1 (the copied history follows it), and the
 * fork's `last_seq` past everything carried.
 */
export async function sessionInsertForkedEvent(
  q: Tx,
  forkId: string,
  data: { sessionId: string; turnIndex: number; carriedTurns: number },
  carriedEvents: number,
): Promise<{ seq: number; at: Date }> {
  await q`update sessions set last_seq = ${1 + carriedEvents} where id = ${forkId}`;
  const [row] = await q<{ seq: number; at: Date }[]>`
    insert into events (session_id, seq, task_id, type, data)
    values (${forkId}, 1, null, 'session.forked', ${JSON.stringify(data)}::text::jsonb)
    returning seq, at`;
  return row;
}

/**
 * The source's stored transcript of the conversation the fork branches from (claude-code's
 * transcript store), copied under the fork, so any host can resume it for the fork's first turn.
 */
export async function sessionCopyTranscript(
  q: Tx,
  forkId: string,
  sourceId: string,
  agentSessionId: string,
): Promise<void> {
  await q`insert into transcript_chunks (session_id, agent_session_id, byte_offset, bytes)
    select ${forkId}, agent_session_id, byte_offset, bytes from transcript_chunks
    where session_id = ${sourceId} and agent_session_id = ${agentSessionId}
    on conflict do nothing`;
}

/** The tasks of a session as a fork copied them (tests, views): all of them, in turn order. */
export async function sessionReadTurns(q: Tx, sessionId: string): Promise<TaskRow[]> {
  return q<TaskRow[]>`select * from tasks where session_id = ${sessionId} order by turn_index`;
}
