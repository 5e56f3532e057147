/**
 * Retention: deleting archived sessions with everything that belongs to them (docs/operations.md,
 * Retention). Two ways in: the sweep (`MOORING_ARCHIVED_RETENTION_DAYS`, a tenant's
 * `archivedRetentionDays`) and `DELETE /v1/sessions/:id?purge=true`. Idle sessions are never
 * touched: only archived ones are ever found or locked.
 *
 * One session per transaction: its row lock, then one statement deleting its rows from every
 * table (sql/session-purge.ts). A crash anywhere leaves each session whole or gone, and a batch
 * never holds more than one session's locks, and only an archived session's, which no turn needs.
 */
import type { PurgeTrigger } from "../metrics/reporter.js";
import {
  sessionFindExpiredArchived,
  type PurgedRows,
  sessionPurgedRowTables,
  type RetentionRule,
} from "../sql/session-purge.js";
import { removeSessionRefs } from "../checkpoints/snapshot.js";
import { type PurgeFound, purgeSessionIn } from "./changes/purge.js";
import type { Runtime } from "./runtime.js";

/** Sessions one sweep tick purges at most (each in its own transaction). */
export const PURGE_BATCH = 50;
/** The longest a purge transaction waits for a lock before giving up (the next sweep retries). */
const LOCK_WAIT_MS = 2_000;
/** SQLSTATE of a lock not granted within lock_timeout. */
const LOCK_NOT_AVAILABLE = "55P03";

/**
 * What a purge did: `missing` (not archived, or already gone), `busy` (a turn of it is still
 * running or ending), `purged`, or `skipped` (another transaction holds its row right now; the
 * sweep does not wait, a request gave up after LOCK_WAIT_MS).
 */
export type PurgeOutcome = PurgeFound;

/** The retention rule of the configuration: the global figure and each tenant's own. */
export function retentionRule(config: Runtime["config"]): RetentionRule {
  return {
    defaultDays: config.archivedRetentionDays,
    tenants: config.tenants.flatMap((t) =>
      t.archivedRetentionDays === undefined ? [] : [{ name: t.name, days: t.archivedRetentionDays }],
    ),
  };
}

/** Whether any session can ever be past retention (the sweep runs only then). */
export function retentionEnabled(rule: RetentionRule): boolean {
  return rule.defaultDays > 0 || rule.tenants.some((t) => t.days > 0);
}

export class SessionPurger {
  private readonly rule: RetentionRule;

  constructor(private readonly rt: Runtime) {
    this.rule = retentionRule(rt.config);
  }

  get enabled(): boolean {
    return retentionEnabled(this.rule);
  }

  /**
   * One sweep batch: the oldest archived sessions past retention, at most `limit`, each purged in
   * a transaction of its own. Answers how many sessions were purged and their rows by table.
   */
  async sweep(limit = PURGE_BATCH): Promise<{ sessions: number; rows: PurgedRows }> {
    const due = await sessionFindExpiredArchived(this.rt.db.sql, this.rule, limit);
    const total = emptyRows();
    let sessions = 0;
    for (const sessionId of due) {
      const outcome = await this.purgeOne(sessionId, { wait: false, trigger: "retention" });
      if (outcome.status !== "purged") continue;
      sessions++;
      for (const [table, n] of Object.entries(outcome.rows)) total[table as keyof PurgedRows] += n;
    }
    if (sessions > 0) this.rt.log.info({ sessions, rows: total }, "archived sessions past retention purged");
    return { sessions, rows: total };
  }

  /**
   * Purge one archived session now, in its own transaction. `wait: false` passes over a session
   * whose row is locked (the sweep); `wait: true` waits for it, at most LOCK_WAIT_MS.
   */
  async purgeOne(
    sessionId: string,
    options: { wait: boolean; trigger: PurgeTrigger },
  ): Promise<PurgeOutcome> {
    let outcome: PurgeOutcome;
    let repos: { gitDir: string; store: string }[] = [];
    try {
      const lock = { wait: options.wait, lockWaitMs: LOCK_WAIT_MS };
      const purged = await this.rt.committer.transaction((tx) => purgeSessionIn(tx, sessionId, lock));
      outcome = purged.found;
      repos = purged.repos;
    } catch (err) {
      // lock_timeout: a row of it stayed locked past LOCK_WAIT_MS; nothing was deleted (rolled back).
      if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) return { status: "skipped" };
      throw err;
    }
    if (outcome.status === "purged") {
      // Its checkpoint refs, on this host (another host's stay: they hold only its own files).
      await removeSessionRefs(repos, sessionId).catch((err) =>
        this.rt.log.warn({ sessionId, err: String(err) }, "checkpoint refs of a purged session not removed"),
      );
      const byTable = Object.entries(outcome.rows).map(([key, n]) => [
        sessionPurgedRowTables[key as keyof PurgedRows],
        n,
      ]);
      this.rt.metrics.sessionPurged(options.trigger, Object.fromEntries(byTable));
      this.rt.log.info({ sessionId, trigger: options.trigger, rows: outcome.rows }, "session purged");
    }
    return outcome;
  }
}

function emptyRows(): PurgedRows {
  return {
    sessions: 0,
    tasks: 0,
    events: 0,
    permissionRequests: 0,
    transcriptChunks: 0,
    webhookDeliveries: 0,
    checkpoints: 0,
  };
}
