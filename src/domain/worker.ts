/**
 * The worker of one instance: claims queued tasks (one claim in flight, one more queued), renews
 * its leases on a heartbeat, adopts tasks it claimed but never started, and hands each claimed
 * turn to its execution (domain/turn-run.ts). Drains at shutdown.
 */
import { SingleFlight } from "../lib/single-flight.js";
import { retrying, retryPolicies } from "../lib/retry.js";
import { taskAnyQueued, taskReadOwnedActive } from "../sql/task-read.js";
import type { AgentDriver } from "../agents/driver.js";
import type { AgentRegistry, DriverName } from "../agents/registry.js";
import { isDatabaseUnavailable } from "../errors.js";
import type { Service } from "../lib/service.js";
import { TimedLoop } from "../lib/timed-loop.js";
import type { Logger } from "pino";
import { secondsBetween } from "../metrics/reporter.js";
import { taskRenewLease, taskRenewLeases } from "../sql/task-lease.js";
import type { TaskRow } from "../sql/task-row.js";
import { type ClaimLimit, claimChange } from "./changes/claim.js";
import type { ConversationPool } from "./conversation-pool.js";
import type { CheckpointService } from "./checkpoints.js";
import type { Permissions } from "./permissions.js";
import type { Recovery } from "./recovery.js";
import type { Runtime } from "./runtime.js";
import type { SessionService } from "./sessions.js";
import { RunningTurn } from "./running-turn.js";
import { TurnExecution } from "./turn-run.js";
import type { SessionRow } from "./views.js";
import { within } from "../clock.js";

export class Worker implements ClaimLimit, Service {
  readonly name = "worker";
  /**
   * How long running turns may go on once `stop()` began: the shutdown grace, or
   * MOORING_DRAIN_TIMEOUT_MS when the instance drains (the gateway sets it).
   */
  graceMs: number;
  private readonly turns = new Map<string, RunningTurn>();
  /** Tasks this boot owned on the last heartbeat without running them (see adoptUnknownLeases). */
  private unknownLeases = new Set<string>();
  private claiming = false;
  /** One claim transaction in flight, one more queued (lib/single-flight.ts). */
  private readonly claims: SingleFlight;
  /** Lease renewal (and adoption of claimed tasks that never started), until drained. */
  private readonly heartbeats: TimedLoop;
  /** Runs each claimed turn to its settlement. */
  private readonly execution: TurnExecution;
  /** False after a failed heartbeat: the database is unreachable. */
  databaseReachable = true;

  constructor(
    private readonly rt: Runtime,
    private readonly sessions: SessionService,
    registry: AgentRegistry,
    drivers: Record<DriverName, AgentDriver>,
    pool: ConversationPool,
    recovery: Recovery,
    /** Interactive approvals: where a turn's permission requests go (absent: drivers use their policy). */
    permissions: Permissions | null = null,
    checkpoints: CheckpointService | null = null,
  ) {
    this.graceMs = rt.config.shutdownGraceMs;
    this.execution = new TurnExecution(rt, registry, drivers, pool, recovery, permissions, checkpoints);
    rt.bus.on("claimed", (rows) => this.startClaimed(rows));
    this.claims = new SingleFlight(
      () => this.claimOnce(),
      (err) => this.log.warn({ err: String(err) }, "claim failed; the poll will retry"),
    );
    this.heartbeats = new TimedLoop(rt.config.heartbeatMs, () => this.heartbeat(), undefined, rt.clock);
    rt.bus.on("cancel", (taskId) => this.turns.get(taskId)?.stop("cancel"));
    rt.bus.on("gate", () => this.requestClaim());
  }

  get log(): Logger {
    return this.rt.log;
  }

  /** Begin claiming work and renewing leases. */
  start(): void {
    this.claiming = true;
    this.heartbeats.start();
    this.requestClaim();
  }

  /**
   * Stop taking new work at once, give running turns `graceMs` (their leases still renewed), then
   * stop the rest, which settle interrupted.
   */
  async stop(): Promise<void> {
    this.claiming = false;
    const drained = await this.drain(this.graceMs);
    this.log.info(drained, "shutdown: running turns drained");
  }

  claimLimit(): number {
    return this.claiming ? this.rt.config.maxActive : 0;
  }

  get runningCount(): number {
    return this.turns.size;
  }

  startClaimed(rows: TaskRow[]): void {
    const starting = rows.filter((row) => !this.turns.has(row.id));
    if (starting.length === 0) return;
    // One read for the sessions of every turn claimed together (a claim starts many under load).
    const sessions = this.readSessions([...new Set(starting.map((row) => row.sessionId))]);
    sessions.catch(() => {}); // each turn handles the failure
    for (const row of starting) {
      const waited = secondsBetween(row.createdAt, row.startedAt);
      if (waited !== null) this.rt.metrics.taskStarted(waited);
      // A task with no stored context (admitted before tracing was on) gets no trace of its claim.
      if (this.rt.tracer.on && row.traceContext) this.traceClaim(row, waited);
      const turn = new RunningTurn(row);
      this.turns.set(row.id, turn);
      turn.done = this.execution
        .execute(turn, sessions)
        .catch((err) => {
          this.log.error({ err, taskId: row.id }, "turn execution failed unexpectedly");
        })
        .finally(() => {
          this.turns.delete(row.id);
          this.requestClaim();
        });
    }
  }

  /**
   * The claim in the turn's trace: from the claim's commit time (the database's clock) to this
   * instance taking the turn in hand, with the wait in the queue.
   */
  private traceClaim(row: TaskRow, waited: number | null): void {
    const now = new Date();
    const start = row.startedAt && row.startedAt < now ? row.startedAt : now;
    this.rt.tracer
      .span(
        "mooring.claim",
        row.traceContext,
        {
          "mooring.task.id": row.id,
          "mooring.instance.id": this.rt.identity.instanceId,
          "mooring.instance.group": this.rt.config.instanceGroup,
          "mooring.attempt": row.attempt,
          "mooring.claim.takeover": row.attempt > 1,
          ...(waited !== null ? { "mooring.claim.queue_wait_ms": Math.round(waited * 1000) } : {}),
        },
        start,
      )
      .end(now);
  }

  /**
   * The sessions of turns about to start. A database hiccup here (a pooled connection that died
   * while the database restarted answers its first query with an error) is not the agent's
   * failure: the read is retried for up to one lease, during which the heartbeat keeps the tasks ours.
   */
  private async readSessions(ids: string[]): Promise<Map<string, SessionRow>> {
    const clock = this.rt.clock;
    const giveUpAt = clock.now() + this.rt.config.leaseMs;
    return retrying(retryPolicies.read, () => this.sessions.rows(ids), {
      retryable: (err) => isDatabaseUnavailable(err) && clock.now() < giveUpAt,
      clock,
    });
  }

  /** Coalesce claim requests: at most one claim transaction in flight, one more queued behind it. */
  requestClaim(): void {
    if (this.claiming) this.claims.request();
  }

  private async claimOnce(): Promise<void> {
    const limit = this.claimLimit();
    if (limit <= 0) return;
    // Most claim requests (one after every turn, one per gate notification) find nothing queued:
    // a plain read answers that without taking the gate lock, which every submit needs too
    // (bench/results/history.md). Skipping is safe: whoever commits a queued task notifies the
    // gate after the commit, and the claim that notification triggers reads after it.
    if (!(await taskAnyQueued(this.rt.db.sql, this.rt.config.instanceGroup))) return;
    await this.rt.committer.commit(claimChange(this.rt, limit));
  }

  /**
   * Renew every lease this boot holds in one statement. A task missing from the answer was taken
   * over by another instance: stop it without settling. A task marked `cancelling` elsewhere whose
   * notification was lost is stopped here.
   */
  async heartbeat(): Promise<void> {
    try {
      const sentAt = Date.now();
      const renewed = await taskRenewLeases(this.rt.db.sql, this.rt.identity.bootId, this.rt.config.leaseMs);
      this.databaseReachable = true;
      const byId = new Map(renewed.map((r) => [r.id, r]));
      for (const [taskId, turn] of this.turns) {
        // A turn claimed while the renewal was in flight may be missing from its answer.
        if (turn.startedLocallyAt >= sentAt) continue;
        const lease = byId.get(taskId);
        // A turn whose settlement is being written: its own commit took the task out of the answer.
        if (!lease && turn.settling) continue;
        if (!lease || lease.attempt !== turn.row.attempt) {
          // A stopped turn may still be finishing (flushing, settling): say it once.
          if (turn.cause !== "lost") {
            this.log.warn(
              { taskId, attempt: turn.row.attempt },
              "lost guard: lease taken over; stopping the turn",
            );
          }
          turn.stop("lost");
        } else if (lease.status === "cancelling") {
          turn.stop("cancel");
        }
      }
      // Leases skipped because a flush held their row: renewed each on its own, waiting for its row
      // (in parallel: each statement locks only its own row).
      await Promise.all(
        renewed
          .filter((lease) => !lease.renewed && this.turns.has(lease.id))
          .map((lease) =>
            taskRenewLease(this.rt.db.sql, lease.id, this.rt.identity.bootId, this.rt.config.leaseMs),
          ),
      );
      await this.adoptUnknownLeases(renewed);
    } catch (err) {
      if (answeredByServer(err)) {
        // The database answered (e.g. a deadlock or a statement timeout): it is reachable, and
        // the next beat renews. Turning readiness off here made every request 503 under load.
        this.log.warn({ err: String(err) }, "heartbeat failed; the next beat retries");
        return;
      }
      if (this.databaseReachable)
        this.log.error({ err: String(err) }, "heartbeat failed: database unreachable");
      this.databaseReachable = false;
    }
  }

  /**
   * A claim whose commit answer was lost leaves tasks this boot owns that it never started; the
   * heartbeat would renew their leases forever. A task seen owned-but-unknown on two beats in a
   * row (one beat can race a claim that is just being started) is started now.
   */
  private async adoptUnknownLeases(renewed: { id: string }[]): Promise<void> {
    const unknown = renewed.filter((r) => !this.turns.has(r.id)).map((r) => r.id);
    const adopt = unknown.filter((id) => this.unknownLeases.has(id));
    this.unknownLeases = new Set(unknown);
    if (adopt.length === 0 || !this.claiming) return;
    const rows = await taskReadOwnedActive(this.rt.db.sql, adopt, this.rt.identity.bootId);
    if (rows.length === 0) return;
    this.log.warn({ tasks: rows.map((r) => r.id) }, "adopting tasks this instance claimed but never started");
    this.startClaimed(rows.filter((r) => !this.turns.has(r.id)));
  }

  /** Wait up to `graceMs` for running turns, then stop the rest (they settle interrupted). */
  private async drain(graceMs: number): Promise<{ finished: number; interrupted: number }> {
    // Leases keep being renewed during the grace: the turns are still legitimately ours.
    const before = this.turns.size;
    const all = Promise.all([...this.turns.values()].map((t) => t.done));
    await within(this.rt.clock, graceMs, all, null);
    const remaining = [...this.turns.values()];
    // If the database is gone, settling cannot succeed: give up after a few attempts rather than
    // hold the shutdown; the leases then expire and another instance (or the next boot) settles.
    // Here and not in the service list: only from the grace's end on (EventLog.stopRetrying).
    this.execution.givingUp();
    this.rt.eventLog.stopRetrying();
    for (const turn of remaining) turn.stop("shutdown");
    await Promise.all(remaining.map((t) => t.done));
    await this.heartbeats.stop();
    return { finished: before - remaining.length, interrupted: remaining.length };
  }
}

/** An error the database server itself returned, other than the ones saying it is going away. */
function answeredByServer(err: unknown): boolean {
  return (err as { name?: string })?.name === "PostgresError" && !isDatabaseUnavailable(err);
}
