import type { Queryable, Tx } from "../db/client.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

/**
 * Every table that holds rows of a session, and so every table a purge empties of it. A table
 * added later that references a session (by `session_id`, or through its tasks) belongs here and
 * in `sessionPurge` below; test/sql/session-purge.test.ts fails when the schema has a
 * `session_id` column in a table this list does not name.
 * The git refs of a session's checkpoints are not rows: the purge removes them after its commit
 * (domain/purge.ts).
 */
export const sessionTables = [
  "sessions",
  "tasks",
  "events",
  "permission_requests",
  "transcript_chunks",
  "webhook_deliveries",
  "checkpoints",
] as const;
export type SessionTable = (typeof sessionTables)[number];

/** Rows a purge deleted, by table, keyed as the pool reads columns (camelCase: `permissionRequests`). */
export interface PurgedRows {
  sessions: number;
  tasks: number;
  events: number;
  permissionRequests: number;
  transcriptChunks: number;
  webhookDeliveries: number;
  checkpoints: number;
}

/** Each count's table, for the metric's `table` label. */
export const sessionPurgedRowTables: Record<keyof PurgedRows, SessionTable> = {
  sessions: "sessions",
  tasks: "tasks",
  events: "events",
  permissionRequests: "permission_requests",
  transcriptChunks: "transcript_chunks",
  webhookDeliveries: "webhook_deliveries",
  checkpoints: "checkpoints",
};

/** How long archived sessions are kept: the default, and each tenant's own figure (0: forever). */
export interface RetentionRule {
  defaultDays: number;
  tenants: { name: string; days: number }[];
}

/**
 * Archived sessions past their retention, oldest archive first, at most `limit`. A tenant's own
 * figure replaces the default (0 keeps its sessions); sessions never archived are never found.
 * A session with a turn still running or ending (`cancelling` after the archive) is left for a
 * later sweep: deleting it would pull the rows from under its owner's flushes.
 *
 * The tenants' figures travel as one JSON document (a recordset), so the statement text is the
 * same for any number of tenants; the partial index on `archived_at` (archived rows only) keeps
 * the scan to archived sessions, in the order the limit wants.
 */
export async function sessionFindExpiredArchived(
  q: Queryable,
  rule: RetentionRule,
  limit: number,
): Promise<string[]> {
  const doc = JSON.stringify(rule.tenants);
  const rows = await taskWithStatusSets(q)<{ id: string }[]>`
    select s.id from sessions s
    left join jsonb_to_recordset(${doc}::text::jsonb) as t(name text, days int) on t.name = s.tenant
    where s.archived_at is not null
      and coalesce(t.days, ${rule.defaultDays}::int) > 0
      and s.archived_at < now() - make_interval(days => coalesce(t.days, ${rule.defaultDays}::int))
      and not exists (select 1 from tasks a where a.session_id = s.id and a.status in ${ACTIVE})
    order by s.archived_at
    limit ${limit}`;
  return rows.map((r) => r.id);
}

/**
 * Takes the row lock of an archived session about to be purged, in a transaction of its own.
 * `wait: false` (the sweep): SKIP LOCKED, so a session some writer holds right now is passed over
 * rather than waited for, and the sweep never queues behind a turn. The session row is the first
 * lock of every writer (sql/session-lock.ts), so holding it keeps new tasks, events and
 * permission rows out until the delete commits. Answers what it found: `missing` (gone, or not
 * archived any more: never purged), `busy` (a turn of it is still active or ending), or `locked`.
 */
export async function sessionLockArchivedForPurge(
  tx: Tx,
  sessionId: string,
  wait: boolean,
): Promise<"locked" | "missing" | "busy" | "skipped"> {
  const rows = wait
    ? await tx<{ id: string }[]>`
        select id from sessions where id = ${sessionId} and archived_at is not null for update`
    : await tx<{ id: string }[]>`
        select id from sessions where id = ${sessionId} and archived_at is not null for update skip locked`;
  if (rows.length === 0) {
    if (wait) return "missing";
    const [exists] = await tx<{ n: number }[]>`
      select count(*)::int as n from sessions where id = ${sessionId} and archived_at is not null`;
    return exists.n > 0 ? "skipped" : "missing";
  }
  const [active] = await taskWithStatusSets(tx)<{ n: number }[]>`
    select count(*)::int as n from tasks where session_id = ${sessionId} and status in ${ACTIVE}`;
  return active.n > 0 ? "busy" : "locked";
}

/**
 * Deletes one session and every row of it, in one statement, and counts them by table. The
 * caller holds the session row lock (`sessionLockArchivedForPurge`) in the same transaction, so either
 * all of it is gone at the commit or none of it (a crash in between rolls back: no half-deleted
 * session is ever visible).
 *
 * Data-modifying CTEs share one snapshot and the foreign keys (tasks and transcript chunks on the
 * session, permission rows on their task) are checked at the statement's end, when the children
 * are already gone. Permission rows are found through their tasks (`permission_requests_task_idx`),
 * webhook deliveries by `webhook_deliveries_session_idx`, the rest by their primary keys.
 */
export async function sessionPurge(tx: Tx, sessionId: string): Promise<PurgedRows> {
  const [row] = await tx<PurgedRows[]>`
    with permission_rows as (
      delete from permission_requests
      where task_id in (select id from tasks where session_id = ${sessionId})
      returning 1
    ), delivery_rows as (
      delete from webhook_deliveries where session_id = ${sessionId} returning 1
    ), event_rows as (
      delete from events where session_id = ${sessionId} returning 1
    ), transcript_rows as (
      delete from transcript_chunks where session_id = ${sessionId} returning 1
    ), checkpoint_rows as (
      delete from checkpoints where session_id = ${sessionId} returning 1
    ), task_rows as (
      delete from tasks where session_id = ${sessionId} returning 1
    ), session_rows as (
      delete from sessions where id = ${sessionId} returning 1
    )
    select (select count(*)::int from session_rows) as sessions,
           (select count(*)::int from task_rows) as tasks,
           (select count(*)::int from event_rows) as events,
           (select count(*)::int from permission_rows) as permission_requests,
           (select count(*)::int from transcript_rows) as transcript_chunks,
           (select count(*)::int from delivery_rows) as webhook_deliveries,
           (select count(*)::int from checkpoint_rows) as checkpoints`;
  return row;
}

/**
 * A purge transaction never waits long for a lock: a session row another transaction holds (the
 * sweep skips it anyway) or a delivery row being recorded makes it give up and try later.
 */
export async function sessionLimitLockWait(tx: Tx, ms: number): Promise<void> {
  await tx.unsafe(`set local lock_timeout = ${Math.max(1, Math.floor(ms))}`);
}
