import type { Queryable } from "../db/client.js";
import type { TaskRow, TaskStatus } from "./task-row.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

/**
 * One task by id (primary key), if `tenant` may see it (null, the default: any tenant, for the
 * gateway's own reads and an admin). A foreign id finds no row, like a missing one (docs/tenants.md).
 */
export async function taskRead(
  q: Queryable,
  taskId: string,
  tenant: string | null = null,
): Promise<TaskRow | null> {
  const [row] = await q<TaskRow[]>`
    select * from tasks where id = ${taskId} and (${tenant}::text is null or tenant = ${tenant})`;
  return row ?? null;
}

/** Whole rows of several tasks (primary key); missing ones are absent. */
export async function taskReadMany(q: Queryable, ids: string[]): Promise<TaskRow[]> {
  return q<TaskRow[]>`select * from tasks where id = any(${ids}::uuid[])`;
}

/**
 * Only the status of several tasks: a long-poll pass reads this for every watched task and whole
 * rows (prompt, result: large) only for the tasks that answer a waiter (domain/task-watch.ts).
 */
export async function taskReadStatuses(
  q: Queryable,
  ids: string[],
): Promise<{ id: string; status: TaskStatus }[]> {
  return q<{ id: string; status: TaskStatus }[]>`select id, status from tasks where id = any(${ids}::uuid[])`;
}

/**
 * Whether anything is queued for `group`: most claim requests find nothing, and this plain read
 * (the partial index tasks_queued_idx) answers that without taking the gate lock every submit needs
 * too. Asked for the claimant's instance group, so another group's backlog does not send this
 * instance into a claim that cannot take any of it.
 */
export async function taskAnyQueued(q: Queryable, group = "default"): Promise<boolean> {
  const [{ queued }] = await q<{ queued: boolean }[]>`
    select exists (select 1 from tasks where status = 'queued' and instance_group = ${group}) as queued`;
  return queued;
}

/**
 * Tasks among `ids` this boot still owns and runs (lease adoption, domain/worker.ts). Owned by this
 * boot means claimed by it, so of its own instance group already: no group condition is needed.
 */
export async function taskReadOwnedActive(q: Queryable, ids: string[], bootId: string): Promise<TaskRow[]> {
  return taskWithStatusSets(q)<TaskRow[]>`
    select * from tasks where id = any(${ids}::uuid[]) and owner_boot = ${bootId}
      and status in ${ACTIVE}`;
}

export interface TaskListFilter {
  /** Only this tenant's tasks; null: every tenant's (an admin without a filter). */
  tenant: string | null;
  sessionId: string | null;
  status: TaskStatus | null;
  after: { createdAt: string; id: string } | null;
  /** Rows to read: one more than the page, to know whether there is a next one. */
  limit: number;
}

/**
 * A page of tasks, newest first, keyset-paginated on (created_at to the millisecond, id): the
 * cursor carries a millisecond timestamp (tasks_created_idx serves the order; a tenant's page,
 * tasks_tenant_created_idx).
 */
export async function taskList(q: Queryable, f: TaskListFilter): Promise<TaskRow[]> {
  return q<TaskRow[]>`
    select * from tasks
    where (${f.tenant}::text is null or tenant = ${f.tenant})
      and (${f.sessionId}::uuid is null or session_id = ${f.sessionId}::uuid)
      and (${f.status}::text is null or status = ${f.status})
      and (${f.after ? f.after.createdAt : null}::timestamptz is null
           or (date_trunc('milliseconds', created_at), id) < (${f.after ? f.after.createdAt : null}::timestamptz, ${f.after ? f.after.id : null}::uuid))
    order by date_trunc('milliseconds', created_at) desc, id desc
    limit ${f.limit}`;
}
