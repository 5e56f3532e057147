/**
 * Workspace checkpoints (docs/api.md, Workspace checkpoints; docs/architecture.md, Workspace
 * checkpoints): a commit of the whole working tree before and after every turn, the diff of a turn
 * or of several, and the revert to the checkpoint before a turn. The git plumbing is in
 * src/checkpoints/; the records in the `checkpoints` table (sql/checkpoint.ts). Every step that
 * touches a workspace holds its lock (one folder, one writer of checkpoints, across instances).
 *
 * A checkpoint never fails a turn: when git cannot take it, the turn runs without it and the log
 * says why.
 */
import { lstat } from "node:fs/promises";
import type { Logger } from "pino";
import { AgentFailure } from "../agents/driver.js";
import type { AgentEntry } from "../agents/registry.js";
import { changedFiles, type FileChange, patchesOf } from "../checkpoints/diff.js";
import { inScope, restoreFiles, workspacePath } from "../checkpoints/restore.js";
import {
  type CheckpointRepo,
  removeSessionRefs,
  repoFor,
  setRef,
  snapshot,
  type Snapshot,
} from "../checkpoints/snapshot.js";
import { errors, invalid } from "../errors.js";
import type { OwnerFence } from "../sql/event-append.js";
import {
  type CheckpointRow,
  checkpointDeleteOfSession,
  checkpointInsert,
  checkpointNextRevertIndex,
  checkpointRead,
  checkpointReadRepos,
  checkpointReadLatestOnRepo,
  checkpointReadLatestRevert,
  checkpointReadMissingAfters,
  checkpointReadOfTask,
  checkpointWithWorkspaceLock,
} from "../sql/checkpoint.js";
import type { TaskRow } from "../sql/task-row.js";
import { recordRevertIn } from "./changes/record-revert.js";
import type { Runtime } from "./runtime.js";
import type { SessionService } from "./sessions.js";
import type { TenantRoots } from "./tenant-roots.js";
import type { Tenant } from "./tenants.js";
import { visibleTenant } from "./tenants.js";
import type { SessionRow } from "./views.js";
import { resolveWorkspaceForSpawn } from "./workspace.js";
import { taskRead } from "../sql/task-read.js";
import { isUuid } from "./ids.js";

export interface DiffPage {
  limit?: number;
  cursor?: string;
}

const refName = (sessionId: string, name: string) => `refs/mooring/${sessionId}/${name}`;

/** Same-process callers queue here before taking the database lock (one pooled connection each). */
class LocalLocks {
  private readonly tails = new Map<string, Promise<unknown>>();
  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(work, work);
    const tail = next.catch(() => {});
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }
}

export class CheckpointService {
  private readonly locks = new LocalLocks();
  private readonly log: Logger;

  constructor(
    private readonly rt: Runtime,
    private readonly sessions: SessionService,
    private readonly workspaceRoots: readonly string[],
    private readonly tenantRoots: TenantRoots,
  ) {
    this.log = rt.log.child({ component: "checkpoints" });
  }

  /** Whether a turn of `session` on `entry` gets checkpoints (gateway, agent entry and session all say yes). */
  enabledFor(session: SessionRow, entry: AgentEntry | undefined): boolean {
    // A chained turn (driver `mooring`) runs in the upstream gateway's workspace, not in a folder here.
    if (entry?.driver === "mooring") return false;
    return this.rt.config.checkpoints && session.checkpoints !== false && entry?.checkpoints !== false;
  }

  private get limits() {
    return {
      maxFileBytes: this.rt.config.checkpointMaxFileBytes,
      maxFiles: this.rt.config.checkpointMaxFiles,
    };
  }

  private async workspaceOf(session: Pick<SessionRow, "workspace" | "tenant">): Promise<string> {
    return resolveWorkspaceForSpawn(
      session.workspace,
      this.workspaceRoots,
      await this.tenantRoots.of(session.tenant),
    );
  }
  /** The workspace for a client's request: one this instance cannot reach is a clear refusal, not a 500. */
  private async requestWorkspace(session: Pick<SessionRow, "workspace" | "tenant">): Promise<string> {
    try {
      return await this.workspaceOf(session);
    } catch (err) {
      if (err instanceof AgentFailure) {
        throw errors.invalidWorkspace(`the session's workspace is not available here: ${err.message}`);
      }
      throw err;
    }
  }

  /** Run `work` under the workspace's lock (this process's queue, then the database's advisory lock). */
  private locked<T>(workspace: string, work: () => Promise<T>): Promise<T> {
    return this.locks.run(workspace, () => checkpointWithWorkspaceLock(this.rt.db.sql, workspace, work));
  }

  /** Take one checkpoint and record it (the caller holds the lock). */
  private async take(
    repo: CheckpointRepo,
    record: Omit<CheckpointRow, "commitSha" | "store" | "gitDir" | "skipped" | "createdAt">,
  ): Promise<Snapshot> {
    const snap = await snapshot(repo, this.limits, `mooring checkpoint ${record.sessionId} ${record.name}\n`);
    await setRef(repo, refName(record.sessionId, record.name), snap.commit);
    await checkpointInsert(this.rt.db.sql, {
      ...record,
      commitSha: snap.commit,
      store: repo.store,
      gitDir: repo.gitDir,
      skipped: snap.skipped,
    });
    if (snap.skipped.length > 0) {
      this.log.info(
        { sessionId: record.sessionId, checkpoint: record.name, skipped: snap.skipped.length },
        "checkpoint left files out (size or count limit)",
      );
    }
    return snap;
  }

  /** The "after" of turns whose instance died before taking it (the caller holds the lock). */
  private async reconcile(repo: CheckpointRepo, sessionId: string): Promise<void> {
    for (const missing of await checkpointReadMissingAfters(this.rt.db.sql, sessionId)) {
      await this.take(repo, {
        sessionId,
        name: `${missing.turnIndex}/after`,
        taskId: missing.taskId,
        turnIndex: missing.turnIndex,
        revertIndex: null,
        phase: "after",
        atReconcile: true,
      });
      this.log.info({ sessionId, taskId: missing.taskId }, 'checkpoint: missing "after" taken at reconcile');
    }
  }

  /** The checkpoint before a turn; never throws (a failure is logged and the turn runs without). */
  async beforeTurn(session: SessionRow, row: TaskRow, log: Logger): Promise<boolean> {
    try {
      const workspace = await this.workspaceOf(session);
      await this.locked(workspace, async () => {
        const repo = await repoFor(workspace, this.rt.config.dataDir);
        await this.reconcile(repo, session.id);
        const existing = await checkpointRead(this.rt.db.sql, session.id, `${row.turnIndex}/before`);
        // A retried attempt keeps the first "before": the workspace as it was before the turn at all.
        if (existing) return;
        await this.take(repo, {
          sessionId: session.id,
          name: `${row.turnIndex}/before`,
          taskId: row.id,
          turnIndex: row.turnIndex,
          revertIndex: null,
          phase: "before",
          atReconcile: false,
        });
      });
      return true;
    } catch (err) {
      log.warn({ err: String(err) }, "checkpoint before the turn not taken");
      return false;
    }
  }

  /**
   * The checkpoint after a turn and the turn's `turn.diff` event (fenced like the turn's other
   * events); never throws.
   */
  async afterTurn(session: SessionRow, row: TaskRow, fence: OwnerFence, log: Logger): Promise<void> {
    try {
      const workspace = await this.workspaceOf(session);
      const summary = await this.locked(workspace, async () => {
        const repo = await repoFor(workspace, this.rt.config.dataDir);
        const before = await checkpointRead(this.rt.db.sql, session.id, `${row.turnIndex}/before`);
        const after = await this.take(repo, {
          sessionId: session.id,
          name: `${row.turnIndex}/after`,
          taskId: row.id,
          turnIndex: row.turnIndex,
          revertIndex: null,
          phase: "after",
          atReconcile: false,
        });
        if (!before) return null;
        const files = await changedFiles(repo, before.commitSha, after.commit);
        return {
          files: files.length,
          additions: files.reduce((n, f) => n + f.additions, 0),
          deletions: files.reduce((n, f) => n + f.deletions, 0),
          ...(after.skipped.length > 0 ? { skipped: after.skipped.length } : {}),
        };
      });
      if (summary) {
        this.rt.eventLog.append({
          sessionId: session.id,
          taskId: row.id,
          type: "turn.diff",
          data: summary,
          fence,
        });
      }
    } catch (err) {
      log.warn({ err: String(err) }, "checkpoint after the turn not taken");
    }
  }

  /** `GET /v1/tasks/:id/diff`: the turn's before → after. */
  async diffTask(taskId: string, page: DiffPage, tenant: Tenant) {
    if (!isUuid(taskId)) throw errors.taskNotFound(taskId);
    const task = await taskRead(this.rt.db.sql, taskId, visibleTenant(tenant));
    if (!task) throw errors.taskNotFound(taskId);
    const session = await this.sessions.row(task.sessionId, tenant);
    let rows = await checkpointReadOfTask(this.rt.db.sql, taskId);
    const before = rows.find((r) => r.phase === "before");
    if (!before) throw errors.checkpointNotFound(`task ${taskId}`);
    if (!rows.some((r) => r.phase === "after")) {
      if (["queued", "running", "cancelling"].includes(task.status)) {
        throw errors.checkpointNotFound(`task ${taskId} yet: it is still running`);
      }
      // Its instance died mid-turn: this one, touching the session, takes the missing "after".
      const workspace = await this.requestWorkspace(session);
      await this.locked(workspace, async () =>
        this.reconcile(await repoFor(workspace, this.rt.config.dataDir), session.id),
      );
      rows = await checkpointReadOfTask(this.rt.db.sql, taskId);
    }
    const after = rows.find((r) => r.phase === "after");
    if (!after) throw errors.checkpointNotFound(`task ${taskId} (no "after")`);
    return this.diffBetween(session, taskId, before, after, page);
  }

  /** `GET /v1/sessions/:id/diff`: from the "before" of `fromTurn` to the "after" of `toTurn`. */
  async diffSession(
    sessionId: string,
    query: DiffPage & { fromTurn?: number; toTurn?: number },
    tenant: Tenant,
  ) {
    const session = await this.sessions.row(sessionId, tenant);
    const fromTurn = query.fromTurn ?? 0;
    const toTurn = query.toTurn ?? session.nextTurnIndex - 1;
    if (toTurn < fromTurn) throw invalid("toTurn must not be before fromTurn", "toTurn");
    const before = await checkpointRead(this.rt.db.sql, sessionId, `${fromTurn}/before`);
    if (!before) throw errors.checkpointNotFound(`turn ${fromTurn} of session ${sessionId}`);
    const after = await checkpointRead(this.rt.db.sql, sessionId, `${toTurn}/after`);
    if (!after) throw errors.checkpointNotFound(`the end of turn ${toTurn} of session ${sessionId}`);
    return this.diffBetween(session, null, before, after, query);
  }

  private async diffBetween(
    session: SessionRow,
    taskId: string | null,
    from: CheckpointRow,
    to: CheckpointRow,
    page: DiffPage,
  ) {
    const repo = this.repoOfRow(from);
    // The repository lives on the host of the session's instance group.
    if (!(await lstat(repo.gitDir).catch(() => null))) {
      throw errors.checkpointNotFound(
        `session ${session.id} on this instance (its repository is on another host)`,
      );
    }
    const all = await changedFiles(repo, from.commitSha, to.commitSha);
    const offset = decodeOffset(page.cursor);
    const limit = page.limit ?? 200;
    const budget = this.rt.config.listPageBytes;
    const slice = all.slice(offset, offset + limit);
    const patches = await patchesOf(repo, from.commitSha, to.commitSha, slice, budget);
    const items: (FileChange & { truncated: boolean })[] = [];
    let bytes = 0;
    for (let i = 0; i < slice.length; i++) {
      const file = {
        ...(slice[i] as Omit<FileChange, "patch">),
        ...(patches[i] as { patch: string; truncated: boolean }),
      };
      const size = Buffer.byteLength(file.patch) + Buffer.byteLength(file.path) + 200;
      if (i > 0 && bytes + size > budget) break;
      bytes += size;
      items.push(file);
    }
    const next = offset + items.length;
    const skipped = [...new Map([...from.skipped, ...to.skipped].map((s) => [s.path, s])).values()];
    return {
      sessionId: session.id,
      taskId,
      fromTurn: from.turnIndex ?? 0,
      toTurn: to.turnIndex ?? 0,
      from: refView(from),
      to: refView(to),
      files: all.length,
      additions: all.reduce((n, f) => n + f.additions, 0),
      deletions: all.reduce((n, f) => n + f.deletions, 0),
      skipped,
      items,
      nextCursor: next < all.length ? String(next) : null,
    };
  }

  private repoOfRow(row: CheckpointRow): CheckpointRepo {
    // Filters are not needed to read commits (diff-tree never runs them); the settings are empty.
    return { gitDir: row.gitDir, workTree: row.gitDir, store: row.store, settings: [] };
  }

  /** `POST /v1/sessions/:id/revert`. */
  async revert(
    sessionId: string,
    body: { toTurn?: number; unrevert?: boolean; paths?: string[]; force?: boolean },
    tenant: Tenant,
  ) {
    const session = await this.sessions.row(sessionId, tenant);
    if (session.archivedAt) throw errors.sessionArchived(sessionId);
    if ((body.toTurn === undefined) === (body.unrevert !== true)) {
      throw invalid("send either toTurn or unrevert: true", "toTurn");
    }
    const scopes = body.paths?.map((p) => {
      const clean = workspacePath(p);
      if (clean === null)
        throw invalid(
          `path ${JSON.stringify(p.slice(0, 200))} is not a relative path inside the workspace`,
          "paths",
        );
      return clean;
    });
    const workspace = await this.requestWorkspace(session);
    return this.locked(workspace, async () => {
      const fresh = await this.sessions.row(sessionId, tenant);
      if (fresh.status !== "idle") throw errors.sessionNotIdle(sessionId);
      const repo = await repoFor(workspace, this.rt.config.dataDir);
      await this.reconcile(repo, sessionId);
      let target: CheckpointRow | null;
      if (body.unrevert) {
        const last = await checkpointReadLatestRevert(this.rt.db.sql, sessionId);
        target =
          last === null ? null : await checkpointRead(this.rt.db.sql, sessionId, `revert-${last}/before`);
        if (!target) throw errors.checkpointNotFound(`a revert of session ${sessionId} to undo`);
      } else {
        target = await checkpointRead(this.rt.db.sql, sessionId, `${body.toTurn}/before`);
        if (!target) throw errors.checkpointNotFound(`turn ${body.toTurn} of session ${sessionId}`);
      }
      const n = await checkpointNextRevertIndex(this.rt.db.sql, sessionId);
      const now = await snapshot(repo, this.limits, `mooring checkpoint ${sessionId} revert-${n}/before\n`);
      const toChange = (await changedFiles(repo, now.commit, target.commitSha)).filter((f) =>
        inScope(f.path, scopes),
      );
      // What the user changed since the newest checkpoint of this folder (any session's).
      const last = await checkpointReadLatestOnRepo(this.rt.db.sql, repo.gitDir);
      if (last && !body.force) {
        const touched = new Set((await changedFiles(repo, last.commitSha, now.commit)).map((f) => f.path));
        const conflicts = toChange.filter((f) => touched.has(f.path)).map((f) => f.path);
        if (conflicts.length > 0) throw errors.workspaceConflict(conflicts);
      }
      await setRef(repo, refName(sessionId, `revert-${n}/before`), now.commit);
      const beforeRow = {
        sessionId,
        name: `revert-${n}/before`,
        taskId: null,
        turnIndex: null,
        revertIndex: n,
        phase: "before" as const,
        commitSha: now.commit,
        store: repo.store,
        gitDir: repo.gitDir,
        atReconcile: false,
        skipped: now.skipped,
      };
      await checkpointInsert(this.rt.db.sql, beforeRow);
      // changedFiles(now → target): "deleted" files are in the tree now only, the rest are written.
      const written = toChange.filter((f) => f.status !== "deleted").map((f) => f.path);
      const deleted = toChange.filter((f) => f.status === "deleted").map((f) => f.path);
      await restoreFiles(repo, target.commitSha, written, deleted);
      await this.take(repo, {
        sessionId,
        name: `revert-${n}/after`,
        taskId: null,
        turnIndex: null,
        revertIndex: n,
        phase: "after",
        atReconcile: false,
      });
      const afterRow = await checkpointRead(this.rt.db.sql, sessionId, `revert-${n}/after`);
      const reverted = {
        revert: n,
        toTurn: body.toTurn ?? null,
        unrevert: body.unrevert === true,
        restored: written.length,
        removed: deleted.length,
        paths: scopes ?? null,
        force: body.force === true,
      };
      await this.rt.committer.transaction((tx) => recordRevertIn(tx, sessionId, reverted));
      this.log.info(
        { sessionId, revert: n, restored: written.length, removed: deleted.length },
        "workspace reverted",
      );
      const createdAt = new Date();
      return {
        sessionId,
        revert: n,
        toTurn: body.toTurn ?? null,
        unrevert: body.unrevert === true,
        restored: written,
        removed: deleted,
        before: refView({ ...beforeRow, createdAt }),
        after: refView(afterRow ?? { ...beforeRow, createdAt }),
      };
    });
  }

  /**
   * Garbage collection with the session: its refs deleted (git's own gc then frees the commits)
   * and its rows. Never throws; a repository that is gone is skipped.
   */
  async collect(sessionId: string): Promise<void> {
    try {
      const repos = await checkpointReadRepos(this.rt.db.sql, sessionId);
      if (repos.length === 0) return;
      // Another instance's host may hold a repository: its rows stay for that instance to collect.
      if ((await removeSessionRefs(repos, sessionId)).elsewhere > 0) return;
      await checkpointDeleteOfSession(this.rt.db.sql, sessionId);
    } catch (err) {
      this.log.warn({ sessionId, err: String(err) }, "checkpoints not collected");
    }
  }
}

function refView(row: CheckpointRow) {
  return {
    name: row.name,
    commit: row.commitSha,
    atReconcile: row.atReconcile,
    createdAt: new Date(row.createdAt).toISOString(),
  };
}

function decodeOffset(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  if (!/^\d{1,9}$/.test(cursor)) throw invalid("cursor is not one this route gave", "cursor");
  return Number(cursor);
}
