/**
 * The checkpoints table (db/schema.ts): what commits a session's turns and reverts left under
 * hidden refs, and the workspace lock that keeps two sessions on one folder from interleaving them.
 */
import type { Queryable, Sql } from "../db/client.js";

export interface CheckpointRow {
  sessionId: string;
  name: string;
  taskId: string | null;
  turnIndex: number | null;
  revertIndex: number | null;
  phase: "before" | "after";
  commitSha: string;
  store: "workspace" | "shadow";
  gitDir: string;
  atReconcile: boolean;
  skipped: { path: string; reason: string }[];
  createdAt: Date;
}

export type NewCheckpoint = Omit<CheckpointRow, "createdAt">;

/**
 * Record a checkpoint. A repeat of a name (a turn's retried attempt) keeps the first "before",
 * which is what the workspace was before the turn began at all, and takes the latest "after".
 */
export async function checkpointInsert(q: Queryable, c: NewCheckpoint): Promise<void> {
  await q`insert into checkpoints (session_id, name, task_id, turn_index, revert_index, phase, commit_sha,
      store, git_dir, at_reconcile, skipped)
    values (${c.sessionId}, ${c.name}, ${c.taskId}, ${c.turnIndex}, ${c.revertIndex}, ${c.phase}, ${c.commitSha},
      ${c.store}, ${c.gitDir}, ${c.atReconcile}, ${JSON.stringify(c.skipped)}::text::jsonb)
    on conflict (session_id, name) do update set
      commit_sha = case when checkpoints.phase = 'before' then checkpoints.commit_sha else excluded.commit_sha end,
      at_reconcile = case when checkpoints.phase = 'before' then checkpoints.at_reconcile else excluded.at_reconcile end,
      skipped = case when checkpoints.phase = 'before' then checkpoints.skipped else excluded.skipped end,
      created_at = case when checkpoints.phase = 'before' then checkpoints.created_at else now() end`;
}

/** A task's two checkpoints (either may be missing). */
export function checkpointReadOfTask(q: Queryable, taskId: string): Promise<CheckpointRow[]> {
  return q<CheckpointRow[]>`select * from checkpoints where task_id = ${taskId} order by phase desc`;
}

/** One checkpoint by its name. */
export async function checkpointRead(
  q: Queryable,
  sessionId: string,
  name: string,
): Promise<CheckpointRow | null> {
  const [row] = await q<
    CheckpointRow[]
  >`select * from checkpoints where session_id = ${sessionId} and name = ${name}`;
  return row ?? null;
}

/** The newest checkpoint taken on `gitDir` by any session (two sessions on one folder share it). */
export async function checkpointReadLatestOnRepo(
  q: Queryable,
  gitDir: string,
): Promise<CheckpointRow | null> {
  const [row] = await q<CheckpointRow[]>`select * from checkpoints where git_dir = ${gitDir}
    order by created_at desc, phase asc limit 1`;
  return row ?? null;
}

/**
 * Turns of the session that have a "before" but no "after" and are no longer running: their
 * instance died mid-turn (kill -9), so the next one to touch the session takes the "after".
 */
export function checkpointReadMissingAfters(
  q: Queryable,
  sessionId: string,
): Promise<{ taskId: string; turnIndex: number }[]> {
  return q<{ taskId: string; turnIndex: number }[]>`select b.task_id, b.turn_index from checkpoints b
    join tasks t on t.id = b.task_id
    where b.session_id = ${sessionId} and b.phase = 'before'
      and t.status not in ('queued', 'running', 'cancelling')
      and not exists (select 1 from checkpoints a where a.session_id = b.session_id
        and a.name = b.turn_index || '/after')
    order by b.turn_index`;
}

/** The next revert number of a session. */
export async function checkpointNextRevertIndex(q: Queryable, sessionId: string): Promise<number> {
  const [row] = await q<{ n: number }[]>`select coalesce(max(revert_index), 0) + 1 as n from checkpoints
    where session_id = ${sessionId}`;
  return row?.n ?? 1;
}

/** The session's newest revert (for an unrevert), or null. */
export async function checkpointReadLatestRevert(q: Queryable, sessionId: string): Promise<number | null> {
  const [row] = await q<{ n: number | null }[]>`select max(revert_index) as n from checkpoints
    where session_id = ${sessionId}`;
  return row?.n ?? null;
}

/** Every repository the session's checkpoints live in (for garbage collection). */
export function checkpointReadRepos(
  q: Queryable,
  sessionId: string,
): Promise<{ gitDir: string; store: string }[]> {
  return q<{ gitDir: string; store: string }[]>`select distinct git_dir, store from checkpoints
    where session_id = ${sessionId}`;
}

export async function checkpointDeleteOfSession(q: Queryable, sessionId: string): Promise<void> {
  await q`delete from checkpoints where session_id = ${sessionId}`;
}

/**
 * Run `work` holding the workspace's lock, across instances: a transaction-scoped advisory lock
 * keyed on the path, held on one pooled connection for as long as `work` runs (a checkpoint takes
 * a fraction of a second to a few seconds). Two sessions on one folder never interleave their
 * checkpoints, diffs of the live tree or reverts.
 */
export function checkpointWithWorkspaceLock<T>(
  sql: Sql,
  workspace: string,
  work: () => Promise<T>,
): Promise<T> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${`mooring:workspace:${workspace}`}, 0))`;
    return work();
  }) as Promise<T>;
}
