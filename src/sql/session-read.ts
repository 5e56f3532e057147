import type { Queryable } from "../db/client.js";
import type { TaskRow } from "./task-row.js";
import { UNFINISHED, taskWithStatusSets } from "./task-status-sets.js";

/** A `sessions` row with its derived status (the domain's SessionRow has these fields). */
export type SessionRowWithStatus = Record<string, unknown> & { id: string; status: string; createdAt: Date };

/** Status is derived, never stored, so it cannot drift from the tasks. */
function statusColumn(q: Queryable) {
  return taskWithStatusSets(q)`case when s.archived_at is not null then 'archived'
    when exists (select 1 from tasks t where t.session_id = s.id and t.status in ${UNFINISHED})
    then 'busy' else 'idle' end as status`;
}

/**
 * One session with its status, if `tenant` may see it (null: any tenant, an admin or the gateway
 * itself). The tenant condition rides on the primary-key read, so a foreign id costs nothing more
 * than a missing one and answers the same (docs/tenants.md).
 */
export async function sessionRead<T>(q: Queryable, id: string, tenant: string | null): Promise<T | null> {
  const [row] = await q`select ${statusColumn(q)}, s.* from sessions s
    where s.id = ${id} and (${tenant}::text is null or s.tenant = ${tenant})`;
  return (row as T) ?? null;
}

/** Several sessions in one query (the sessions of turns claimed together); missing ones are absent. */
export async function sessionReadMany<T>(q: Queryable, ids: string[]): Promise<T[]> {
  const rows = await q`select ${statusColumn(q)}, s.* from sessions s where s.id = any(${ids}::uuid[])`;
  return rows as unknown as T[];
}

/** A session's most recent turns, newest first (tasks_session_idx). */
export async function sessionReadRecentTurns(
  q: Queryable,
  sessionId: string,
  limit: number,
): Promise<TaskRow[]> {
  return q<
    TaskRow[]
  >`select * from tasks where session_id = ${sessionId} order by turn_index desc limit ${limit}`;
}

export interface SessionListFilter {
  /** Only this tenant's sessions; null: every tenant's (an admin without a filter). */
  tenant: string | null;
  workspace: string | null;
  status: string | null;
  after: { createdAt: string; id: string } | null;
  limit: number;
}

/**
 * A page of sessions, newest first, keyset-paginated like tasks; the status filter applies to the
 * derived status, hence the subquery. The order is (creation time cut to the millisecond, id),
 * the cursor's precision (domain/page-cursor.ts), written in UTC exactly as the page indexes
 * (sessions_tenant_page_idx for a tenant, sessions_page_idx for all; db/schema.ts) so a page is a
 * walk of the index that stops after `limit` rows. Only the filters given are written into the
 * statement: as `($1 is null or s.tenant = $1)` they kept the planner from the index, and every
 * page read and sorted all the sessions (bench/results/notes.md, Growth). A tenant's cursor is
 * written twice, and both are needed. `(time, id) < (…)` starts the walk at the cursor: with only
 * `(tenant, time, id) < (…)` next to `tenant = $1` the btree starts from the equality on the first
 * column (the tenant's newest entry) and passes over every entry newer than the cursor, 90% of the
 * tenant for a deep page (the growth benchmark's seed at 10^5: 258 buffers, 1.6 ms, against 14
 * and 0.15 ms). `(tenant, time, id) < (…)` helps keep a generic plan on the tenant index: with
 * `(time, id)` alone it walked the all-tenants index and filtered by tenant (100000 sessions, a
 * tenant with 1%: 4938 rows read for 50), and so it did with the three-column one alone (the
 * seed at 10^5: 4821 buffers). Both together took the tenant index, started at the cursor, in
 * custom and generic plans, for evenly spread and skewed tenants alike.
 */
export async function sessionList<T>(q: Queryable, f: SessionListFilter): Promise<T[]> {
  const none = q``;
  const rows = await q`
    select * from (
      select ${statusColumn(q)}, s.* from sessions s
      where true
        ${f.tenant === null ? none : q`and s.tenant = ${f.tenant}`}
        ${f.workspace === null ? none : q`and s.workspace = ${f.workspace}`}
        ${
          f.after === null
            ? none
            : f.tenant === null
              ? q`and (date_trunc('milliseconds', (s.created_at at time zone 'UTC')), s.id)
                    < (date_trunc('milliseconds', (${f.after.createdAt}::timestamptz at time zone 'UTC')), ${f.after.id}::uuid)`
              : q`and (s.tenant, date_trunc('milliseconds', (s.created_at at time zone 'UTC')), s.id)
                    < (${f.tenant}, date_trunc('milliseconds', (${f.after.createdAt}::timestamptz at time zone 'UTC')), ${f.after.id}::uuid)
                  and (date_trunc('milliseconds', (s.created_at at time zone 'UTC')), s.id)
                    < (date_trunc('milliseconds', (${f.after.createdAt}::timestamptz at time zone 'UTC')), ${f.after.id}::uuid)`
        }
    ) x
    ${f.status === null ? none : q`where x.status = ${f.status}`}
    order by date_trunc('milliseconds', (x.created_at at time zone 'UTC')) desc, x.id desc
    limit ${f.limit}`;
  return rows as unknown as T[];
}

/** The heads of several sessions: the session feeds' polling backstop (stream/session-feeds.ts). */
export async function sessionReadHeads(
  q: Queryable,
  ids: string[],
): Promise<{ id: string; lastSeq: number }[]> {
  return q<
    { id: string; lastSeq: number }[]
  >`select id, last_seq from sessions where id = any(${ids}::uuid[])`;
}

/** What the recovery policy needs of an interrupted turn's session: was its conversation saved? */
export async function sessionReadSavedConversation(
  q: Queryable,
  sessionId: string,
): Promise<{
  agentSessionId: string | null;
  lastAssistantMessageId: string | null;
  archivedAt: Date | null;
} | null> {
  const [row] = await q<
    { agentSessionId: string | null; lastAssistantMessageId: string | null; archivedAt: Date | null }[]
  >`select agent_session_id, last_assistant_message_id, archived_at from sessions where id = ${sessionId}`;
  return row ?? null;
}
