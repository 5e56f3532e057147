/**
 * Periodic settlement, safe to run on every instance at once: expired leases become
 * `interrupted` (GATEWAY_RESTART), overdue queued tasks become `expired`, and queued work is
 * claimed even if every notification was lost.
 */
import type { Service } from "../lib/service.js";
import { TimedLoop } from "../lib/timed-loop.js";
import { taskLockExpiredLeases, taskLockOwn, taskLockPreviousBoot } from "../sql/task-orphans.js";
import { eventWritePrune } from "../sql/event-writes.js";
import { eventPrune } from "../sql/event-prune.js";
import type { TaskRow } from "../sql/task-row.js";
import type { Recovery } from "./recovery.js";
import { SessionPurger } from "./purge.js";
import { expireQueuedIn } from "./changes/expire.js";
import { interruptOrphansIn, type Orphans } from "./changes/interrupt.js";
import type { Runtime } from "./runtime.js";

/** How often the retention sweep looks for archived sessions past retention (one batch a tick). */
const RETENTION_SWEEP_MS = 60_000;

export class Sweeper implements Service {
  readonly name = "sweeper";
  private readonly loops: TimedLoop[] = [];
  /** MOORING_ARCHIVED_RETENTION_DAYS and the tenants' archivedRetentionDays (domain/purge.ts). */
  readonly purger: SessionPurger;

  constructor(
    private readonly rt: Runtime,
    private readonly recovery: Recovery,
  ) {
    this.purger = new SessionPurger(rt);
  }

  start(): void {
    if (this.loops.length > 0) return;
    const { config } = this.rt;
    this.every(config.sweepMs, () => this.sweepLeases());
    if (config.eventRetention > 0) this.every(config.sweepMs, () => this.prune());
    // A batch a tick, one session per transaction: a backlog drains over several ticks.
    if (this.purger.enabled)
      this.every(Math.min(RETENTION_SWEEP_MS, config.sweepMs * 6), () => this.purger.sweep());
    this.every(60_000, () => eventWritePrune(this.rt.db.sql));
    this.every(config.pollMs, () => this.pollQueue());
  }

  /** Every loop stops; resolves once the runs in flight are over. */
  async stop(): Promise<void> {
    await Promise.all(this.loops.map((loop) => loop.stop()));
    this.loops.length = 0;
  }

  private every(ms: number, fn: () => Promise<unknown>): void {
    const loop = new TimedLoop(
      ms,
      fn,
      (err) => this.rt.log.warn({ err: String(err) }, "sweep failed; next tick retries"),
      this.rt.clock,
    );
    this.loops.push(loop);
    loop.start();
  }

  /** Startup: settle what this instance's previous boot left running, then any expired lease. */
  async reconcile(): Promise<{ previousBoot: number; expiredLeases: number; expiredQueued: number }> {
    const { instanceId, bootId } = this.rt.identity;
    const previous = await this.settleInterrupted(
      (tx) => taskLockPreviousBoot(tx, instanceId, bootId),
      "previous_boot",
    );
    const expired = await this.sweepLeases();
    const queued = await this.expireQueued();
    const counts = {
      previousBoot: previous.length,
      expiredLeases: expired.length,
      expiredQueued: queued.length,
    };
    this.rt.log.info(counts, "startup reconcile done");
    return counts;
  }

  async sweepLeases(): Promise<TaskRow[]> {
    const rows = await this.settleInterrupted(
      (tx) => taskLockExpiredLeases(tx, this.rt.identity.bootId, this.rt.config.instanceGroup),
      "lease_takeover",
    );
    if (rows.length > 0) {
      this.rt.log.warn(
        {
          count: rows.length,
          tasks: rows.map((r) => ({ id: r.id, owner: r.ownerInstance, attempt: r.attempt })),
        },
        "lease takeover: tasks of a stopped instance interrupted",
      );
    }
    return rows;
  }

  /** MOORING_EVENT_RETENTION: drop each session's events older than the last N. */
  private async prune(): Promise<void> {
    const deleted = await eventPrune(this.rt.db.sql, this.rt.config.eventRetention);
    if (deleted > 0) this.rt.log.info({ deleted }, "old events pruned");
  }

  /** Graceful shutdown: give up this boot's remaining tasks at once so others can take the slots. */
  async releaseOwnTasks(): Promise<TaskRow[]> {
    return this.settleInterrupted((tx) => taskLockOwn(tx, this.rt.identity.bootId), "released");
  }

  private async pollQueue(): Promise<void> {
    await this.expireQueued();
    // The backstop: try to claim even if every notification was lost (a wake-up, not a commit).
    this.rt.bus.emit("gate");
  }

  /** Queued tasks past their queue deadline become `expired`, with their terminal events. */
  async expireQueued(): Promise<TaskRow[]> {
    const rows = await this.rt.committer.transaction(expireQueuedIn);
    if (rows.length > 0) this.rt.log.info({ count: rows.length }, "queued tasks expired (queue timeout)");
    return rows;
  }

  /**
   * Settles what `orphans` finds interrupted; traced, each settled turn gets a `mooring.settle` span in its
   * own trace (from its stored context), saying why (`by`) and which instance did it.
   */
  private async settleInterrupted(
    orphans: Orphans,
    by: "previous_boot" | "lease_takeover" | "released",
  ): Promise<TaskRow[]> {
    const began = this.rt.tracer.on ? new Date() : null;
    const rows = await this.rt.committer.transaction((tx) => interruptOrphansIn(tx, this.recovery, orphans));
    if (began) {
      for (const row of rows.filter((r) => r.traceContext)) {
        this.rt.tracer
          .span(
            "mooring.settle",
            row.traceContext,
            {
              "mooring.task.id": row.id,
              "mooring.task.status": row.status,
              "mooring.settle.by": by,
              "mooring.instance.id": this.rt.identity.instanceId,
              "mooring.attempt": row.attempt,
              ...(row.error?.code ? { "mooring.error.code": row.error.code } : {}),
            },
            began,
          )
          .end();
      }
    }
    return rows;
  }
}
