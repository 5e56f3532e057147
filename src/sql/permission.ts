import type { Queryable } from "../db/client.js";
import type { OwnerFence } from "./event-append.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

export interface PermissionOption {
  optionId: string;
  name: string;
  kind: string;
}

export interface PermissionRow {
  id: string;
  taskId: string;
  sessionId: string;
  /** `input` whole, or (above the bound, or written before inputs were stored whole) a preview. */
  toolCall: {
    id: string;
    name: string;
    title: string;
    kind: string;
    input: unknown;
    inputBytes?: number;
    truncated?: boolean;
  };
  options: PermissionOption[];
  expiresAt: Date;
  createdAt: Date;
  resolvedAt: Date | null;
  optionId: string | null;
  resolvedBy: ResolvedBy | null;
  message: string | null;
  answers: Record<string, string> | null;
  answeredBy: string | null;
}

/** `gateway`: answered without asking anyone (an input too large to show whole). */
export type ResolvedBy = "client" | "timeout" | "cancel" | "restart" | "gateway";

/**
 * Records a request of a running turn, fenced like its events: a turn that no longer owns its task
 * (taken over, settled) writes nothing, so no request outlives the turn that could answer it.
 * Written before the `permission.requested` event is queued, so an answer to a request a client
 * saw always finds its row. With `resolved` it is written already answered, in the same statement,
 * so no client can answer it first (a request the gateway refuses unasked).
 */
export async function permissionInsert(
  q: Queryable,
  row: Pick<PermissionRow, "id" | "taskId" | "sessionId" | "toolCall" | "options" | "expiresAt">,
  fence: OwnerFence,
  resolved: { optionId: string | null; by: ResolvedBy; message: string } | null = null,
): Promise<boolean> {
  const by = resolved?.by ?? null;
  const inserted = await taskWithStatusSets(q)`
    insert into permission_requests (id, task_id, session_id, tool_call, options, expires_at,
                                     resolved_at, option_id, resolved_by, message)
    select ${row.id}, ${row.taskId}, ${row.sessionId}, ${JSON.stringify(row.toolCall)}::text::jsonb,
           ${JSON.stringify(row.options)}::text::jsonb, ${row.expiresAt},
           case when ${by}::text is not null then now() end, ${resolved?.optionId ?? null}, ${by},
           ${resolved?.message ?? null}
    where exists (select 1 from tasks where id = ${fence.taskId} and owner_boot = ${fence.bootId}
                    and attempt = ${fence.attempt} and status in ${ACTIVE})`;
  return inserted.count === 1;
}

/**
 * The answer, whoever gives it (a client on any instance, the deadline, a cancel): a conditional
 * update, so the first one wins in SQL however many instances answer at once. Returns the row
 * when this answer won, null when the request was already resolved (or does not exist).
 */
export async function permissionResolve(
  q: Queryable,
  requestId: string,
  answer: {
    optionId: string | null;
    by: ResolvedBy;
    message?: string | null;
    answers?: Record<string, string> | null;
    answeredBy?: string | null;
  },
): Promise<PermissionRow | null> {
  const [row] = await q<PermissionRow[]>`
    update permission_requests set resolved_at = now(), option_id = ${answer.optionId},
      resolved_by = ${answer.by}, message = ${answer.message ?? null},
      answers = ${answer.answers ? JSON.stringify(answer.answers) : null}::text::jsonb,
      answered_by = ${answer.answeredBy ?? null}
    where id = ${requestId} and resolved_at is null
    returning *`;
  return row ?? null;
}

export async function permissionRead(q: Queryable, requestId: string): Promise<PermissionRow | null> {
  const [row] = await q<PermissionRow[]>`select * from permission_requests where id = ${requestId}`;
  return row ?? null;
}

/** The waiting instance's poll: which of its requests were answered elsewhere (one statement for all). */
export async function permissionReadResolved(q: Queryable, ids: string[]): Promise<PermissionRow[]> {
  if (ids.length === 0) return [];
  return q<PermissionRow[]>`
    select * from permission_requests where id = any(${ids}::uuid[]) and resolved_at is not null`;
}

/** Pending requests of these tasks, for task snapshots (the partial index keeps it cheap). */
export async function permissionPendingOf(q: Queryable, taskIds: string[]): Promise<PermissionRow[]> {
  if (taskIds.length === 0) return [];
  return q<PermissionRow[]>`
    select * from permission_requests
    where task_id = any(${taskIds}::uuid[]) and resolved_at is null order by created_at, id`;
}

/**
 * Settling turns that nobody can finish any more (interrupted by a restart): their pending
 * requests are resolved with the reject option, in the settling transaction, so no request stays
 * pending after its task is terminal. One statement for all the tasks.
 */
export async function permissionResolvePendingOfTasks(
  q: Queryable,
  taskIds: string[],
  by: ResolvedBy,
): Promise<PermissionRow[]> {
  if (taskIds.length === 0) return [];
  return q<PermissionRow[]>`
    update permission_requests p set resolved_at = now(), resolved_by = ${by},
      option_id = (select o->>'optionId' from jsonb_array_elements(p.options) o
                   where o->>'kind' like 'reject%' limit 1)
    where task_id = any(${taskIds}::uuid[]) and resolved_at is null
    returning *`;
}

/** Active turns waiting for a person (gate figures): a waiting turn keeps its active slot. */
export async function permissionCountWaiting(q: Queryable): Promise<number> {
  const [row] = await taskWithStatusSets(q)<{ n: number }[]>`
    select count(distinct p.task_id)::int as n from permission_requests p
    join tasks t on t.id = p.task_id
    where p.resolved_at is null and t.status in ${ACTIVE}`;
  return row.n;
}
