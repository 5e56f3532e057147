/**
 * The worker of one instance: claims queued tasks, runs each turn on its session's agent, streams
 * the agent's events into the log, renews its leases, and settles each task exactly once with a
 * write fenced by owner and attempt.
 */
import type { Logger } from "pino";
import {
  type AgentDriver,
  AgentFailure,
  type AgentEvent,
  type AgentUsage,
  type TurnOutcome,
} from "../agents/driver.js";
import type { AgentRegistry, DriverName } from "../agents/registry.js";
import { storable, storableSink } from "../agents/storable-text.js";
import { isDatabaseUnavailable } from "../errors.js";
import { appendEvents, type OwnerFence } from "../sql/append-events.js";
import { lockGate } from "../sql/gate-lock.js";
import { pipelined } from "../db/pipeline.js";
import { lockSessionRow } from "../sql/lock-session.js";
import { notifierOf, notifyGate, notifySessions } from "../sql/notify.js";
import { renewLease, renewLeases } from "../sql/renew-leases.js";
import type { CursorFields } from "../sql/save-turn-state.js";
import { type Settlement, settleOwnedTask } from "../sql/settle-task.js";
import type { TaskRow } from "../sql/task-row.js";
import { preview } from "../stream/preview.js";
import { claimAndStart, type TaskRunner } from "./claim.js";
import { contextPercent, contextWindowOf, withContextSuffix } from "./context.js";
import type { ConversationPool } from "./conversation-pool.js";
import { secondsBetween } from "../metrics/reporter.js";
import type { Permissions } from "./permissions.js";
import type { Recovery } from "./recovery.js";
import type { Runtime } from "./runtime.js";
import type { SessionService } from "./sessions.js";
import { terminalEvent } from "./task-events.js";
import { UpstreamRecorder } from "./upstream-state.js";
import type { SessionRow } from "./views.js";

/** Why a running turn is being stopped before it ended by itself. */
type StopCause = "cancel" | "timeout" | "shutdown" | "lost";

/** How long an agent gets to stop after a cancel before it is killed. */
const CANCEL_ESCALATION_MS = 3000;

class RunningTurn {
  readonly controller = new AbortController();
  cause: StopCause | null = null;
  done: Promise<void> = Promise.resolve();
  /** When this process started the turn; a heartbeat sent earlier cannot know about it. */
  readonly startedLocallyAt = Date.now();
  constructor(readonly row: TaskRow) {}

  stop(cause: StopCause): void {
    if (this.cause) return;
    this.cause = cause;
    this.controller.abort(cause);
  }
}

export class Worker implements TaskRunner {
  private readonly turns = new Map<string, RunningTurn>();
  /** Tasks this boot owned on the last heartbeat without running them (see adoptUnknownLeases). */
  private unknownLeases = new Set<string>();
  private claiming = false;
  private claimPending = false;
  private claimRunning = false;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private beating = false;
  /** Set once the shutdown grace is over: settlement retries give up quickly. */
  private shuttingDown = false;
  /** Poked after the queue changed so positions get announced. */
  onQueueChanged: () => void = () => {};
  /** False after a failed heartbeat: the database is unreachable. */
  databaseReachable = true;
  /** Interactive approvals: where a turn's permission requests go (absent: drivers use their policy). */
  permissions: Permissions | null = null;

  constructor(
    private readonly rt: Runtime,
    private readonly sessions: SessionService,
    private readonly registry: AgentRegistry,
    private readonly drivers: Record<DriverName, AgentDriver>,
    private readonly pool: ConversationPool,
    private readonly recovery: Recovery,
  ) {
    rt.bus.on("cancel", (taskId) => this.turns.get(taskId)?.stop("cancel"));
    rt.bus.on("gate", () => this.requestClaim());
  }

  get log(): Logger {
    return this.rt.log;
  }

  /** Begin claiming work and renewing leases. */
  start(): void {
    this.claiming = true;
    this.beating = true;
    const beat = () => {
      void this.heartbeat().finally(() => {
        if (!this.beating) return;
        this.heartbeatTimer = setTimeout(beat, this.rt.config.heartbeatMs);
        this.heartbeatTimer.unref();
      });
    };
    this.heartbeatTimer = setTimeout(beat, this.rt.config.heartbeatMs);
    this.heartbeatTimer.unref();
    this.requestClaim();
  }

  /** Stop taking new work (shutdown phase one). Running turns go on. */
  stopClaiming(): void {
    this.claiming = false;
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
      const turn = new RunningTurn(row);
      this.turns.set(row.id, turn);
      turn.done = this.execute(turn, sessions).catch((err) => {
        this.log.error({ err, taskId: row.id }, "turn execution failed unexpectedly");
      });
    }
  }

  /**
   * The sessions of turns about to start. A database hiccup here (a pooled connection that died
   * while the database restarted answers its first query with an error) is not the agent's
   * failure: the read is retried for up to one lease, during which the heartbeat keeps the tasks ours.
   */
  private async readSessions(ids: string[]): Promise<Map<string, SessionRow>> {
    const giveUpAt = Date.now() + this.rt.config.leaseMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.sessions.rows(ids);
      } catch (err) {
        if (!isDatabaseUnavailable(err) || Date.now() >= giveUpAt) throw err;
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 1000)));
      }
    }
  }

  /** Coalesce claim requests: at most one claim transaction in flight, one more queued behind it. */
  requestClaim(): void {
    if (!this.claiming) return;
    if (this.claimRunning) {
      this.claimPending = true;
      return;
    }
    this.claimRunning = true;
    void this.claimOnce()
      .catch((err) => this.log.warn({ err: String(err) }, "claim failed; the poll will retry"))
      .finally(() => {
        this.claimRunning = false;
        if (this.claimPending) {
          this.claimPending = false;
          this.requestClaim();
        }
      });
  }

  private async claimOnce(): Promise<void> {
    const limit = this.claimLimit();
    if (limit <= 0) return;
    // Most claim requests (one after every turn, one per gate notification) find nothing queued:
    // a plain read answers that without taking the gate lock, which every submit needs too
    // (bench/results/history.md). Skipping is safe: whoever commits a queued task notifies the
    // gate after the commit, and the claim that notification triggers reads after it.
    const [{ queued }] = await this.rt.db.sql<{ queued: boolean }[]>`
      select exists (select 1 from tasks where status = 'queued') as queued`;
    if (!queued) return;
    // One pipelined transaction (db/pipeline.ts): the gate lock is held only while Postgres runs it.
    const [, claim] = await pipelined(this.rt.db.sql, (q) => [lockGate(q), claimAndStart(q, this.rt, limit)]);
    if (claim.rows.length === 0) return;
    notifierOf(this.rt.db).sessions(claim.heads, true);
    this.rt.eventLog.publish(claim.events);
    this.startClaimed(claim.rows);
    this.onQueueChanged();
  }

  /**
   * Renew every lease this boot holds in one statement. A task missing from the answer was taken
   * over by another instance: stop it without settling. A task marked `cancelling` elsewhere whose
   * notification was lost is stopped here.
   */
  async heartbeat(): Promise<void> {
    try {
      const sentAt = Date.now();
      const renewed = await renewLeases(this.rt.db.sql, this.rt.identity.bootId, this.rt.config.leaseMs);
      this.databaseReachable = true;
      const byId = new Map(renewed.map((r) => [r.id, r]));
      for (const [taskId, turn] of this.turns) {
        // A turn claimed while the renewal was in flight may be missing from its answer.
        if (turn.startedLocallyAt >= sentAt) continue;
        const lease = byId.get(taskId);
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
            renewLease(this.rt.db.sql, lease.id, this.rt.identity.bootId, this.rt.config.leaseMs),
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
    const rows = await this.rt.db.sql<TaskRow[]>`
      select * from tasks where id = any(${adopt}::uuid[]) and owner_boot = ${this.rt.identity.bootId}
        and status in ('running', 'cancelling')`;
    if (rows.length === 0) return;
    this.log.warn({ tasks: rows.map((r) => r.id) }, "adopting tasks this instance claimed but never started");
    this.startClaimed(rows.filter((r) => !this.turns.has(r.id)));
  }

  /** Shutdown: wait up to `graceMs` for running turns, then stop the rest (they settle interrupted). */
  async drain(graceMs: number): Promise<{ finished: number; interrupted: number }> {
    // Leases keep being renewed during the grace: the turns are still legitimately ours.
    const before = this.turns.size;
    const all = Promise.all([...this.turns.values()].map((t) => t.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    const remaining = [...this.turns.values()];
    // If the database is gone, settling cannot succeed: give up after a few attempts rather than
    // hold the shutdown; the leases then expire and another instance (or the next boot) settles.
    this.shuttingDown = true;
    this.rt.eventLog.stopRetrying();
    for (const turn of remaining) turn.stop("shutdown");
    await Promise.all(remaining.map((t) => t.done));
    this.beating = false;
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
    return { finished: before - remaining.length, interrupted: remaining.length };
  }

  private async execute(turn: RunningTurn, sessions: Promise<Map<string, SessionRow>>): Promise<void> {
    const { row } = turn;
    const fence: OwnerFence = { taskId: row.id, bootId: this.rt.identity.bootId, attempt: row.attempt };
    const log = this.log.child({ taskId: row.id, sessionId: row.sessionId, attempt: row.attempt });
    let session: SessionRow | null = null;
    let healthy = false;
    let tokens: number | null = null;
    try {
      session = (await sessions).get(row.sessionId) ?? null;
      if (!session) throw new Error(`session ${row.sessionId} not found`);
      const entry = this.registry.get(session.agent);
      if (!entry) {
        await this.settle(turn, fence, log, {
          status: "failed",
          error: {
            code: "AGENT_START_FAILED",
            message: `The agent "${session.agent}" is no longer registered.`,
          },
        });
        return;
      }
      const conversation = this.pool.acquire(session, entry, this.drivers[entry.driver]);
      const deadline = (row.deadlineAt?.getTime() ?? Date.now() + row.timeoutMs) - Date.now();
      const deadlineTimer = setTimeout(() => turn.stop("timeout"), Math.max(deadline, 0));
      const state = new TurnState(
        this.rt,
        session,
        row,
        fence,
        log,
        this.permissions,
        turn.controller.signal,
      );
      let outcome: TurnOutcome | null = null;
      let failure: unknown = null;
      try {
        outcome = await this.runWithEscalation(turn, () =>
          conversation.runTurn({
            prompt: row.prompt,
            sink: state.sink,
            signal: turn.controller.signal,
            turn: { taskId: row.id, attempt: row.attempt },
          }),
        );
      } catch (err) {
        failure = err;
      } finally {
        clearTimeout(deadlineTimer);
      }
      // A request the agent left unanswered (it crashed, or withdrew it) is resolved before the
      // settlement, so its event precedes the terminal one.
      await this.permissions?.endTurn(row.id);
      // The turn's session writes need no waiting for: its lane commits them before (or with)
      // the settlement queued after them, while the fence that guards them still holds.
      tokens = state.contextTokens;
      healthy = failure === null && outcome !== null && conversation.alive;
      if (outcome === null && failure === null) {
        // The agent ignored the stop request and was killed.
        this.pool.close(row.sessionId, "kill");
      }
      if (failure && !(failure instanceof AgentFailure)) {
        log.error({ err: String(failure) }, "agent crashed during the turn");
      }
      // The outcome and failure come from the agent: storable like its events (agents/storable-text.ts).
      await this.settle(
        turn,
        fence,
        log,
        storable(settlementFor(turn.cause, outcome, failure, state, session)),
      );
    } catch (err) {
      log.error({ err: String(err) }, "turn could not run");
      await this.settle(turn, fence, log, {
        status: "failed",
        error: { code: "AGENT_START_FAILED", message: "The agent could not be started for this turn." },
      }).catch(() => {});
    } finally {
      this.turns.delete(row.id);
      this.pool.release(row.sessionId, healthy, tokens);
      this.requestClaim();
    }
  }

  /**
   * Run the turn; once a stop was requested, give the agent CANCEL_ESCALATION_MS to stop by itself,
   * then kill it. Resolves null when it had to be killed.
   */
  private async runWithEscalation(
    turn: RunningTurn,
    run: () => Promise<TurnOutcome>,
  ): Promise<TurnOutcome | null> {
    const running = run();
    running.catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    const killed = new Promise<null>((resolve) => {
      const arm = () => {
        timer = setTimeout(() => resolve(null), CANCEL_ESCALATION_MS);
      };
      if (turn.controller.signal.aborted) arm();
      else turn.controller.signal.addEventListener("abort", arm, { once: true });
    });
    try {
      return await Promise.race([running, killed]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A settled turn's run time, for mooring_task_run_seconds. */
  private ran(row: TaskRow): void {
    const seconds = secondsBetween(row.startedAt, row.finishedAt);
    if (seconds !== null) this.rt.metrics.taskRan(seconds);
  }

  /**
   * The owner's fenced settlement with its terminal event. The common case rides in the event
   * log's next flush for the session (stream/event-lane.ts), after the turn's events; an
   * interruption that may queue a continuation (MOORING_RECOVERY=continue) needs the gate lock
   * and has a transaction of its own.
   */
  private async settle(
    turn: RunningTurn,
    fence: OwnerFence,
    log: Logger,
    settlement: Settlement,
  ): Promise<void> {
    if (turn.cause === "lost") return; // another instance owns the outcome now
    if (settlement.status === "interrupted" && this.recovery.needsGateLock) {
      await this.rt.eventLog.flush(turn.row.sessionId);
      return this.settleWithContinuation(turn, fence, log, settlement);
    }
    const outcome = await this.rt.eventLog.settle({ sessionId: turn.row.sessionId, fence, settlement });
    switch (outcome.kind) {
      case "settled":
        log.info({ status: outcome.row.status, code: outcome.row.error?.code }, "turn settled");
        this.ran(outcome.row);
        return;
      case "unconfirmed":
        log.info({ status: settlement.status }, "turn settled (the commit's answer was lost)");
        return;
      case "not-owner":
        log.warn(
          { status: settlement.status },
          "lost guard: task was settled or taken over elsewhere; nothing written",
        );
        return;
      case "gave-up":
        log.error("settling failed; giving up (the lease expires and the task is settled elsewhere)");
        return;
    }
  }

  /** An interruption with its continuation, admitted under the gate lock like any turn. */
  private async settleWithContinuation(
    turn: RunningTurn,
    fence: OwnerFence,
    log: Logger,
    settlement: Settlement,
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        const done = await this.rt.db.sql.begin(async (tx) => {
          await lockGate(tx);
          // Session row before task row, the order the event log's flush takes them in.
          await lockSessionRow(tx, turn.row.sessionId);
          const settled = await settleOwnedTask(tx, fence.taskId, fence, settlement);
          if (!settled) return null;
          const events = await appendEvents(tx, settled.sessionId, [terminalEvent(settled)]);
          const extra =
            settled.status === "interrupted" ? await this.recovery.afterInterrupted(tx, [settled]) : [];
          const all = [...events, ...extra];
          const heads = new Map<string, number>();
          for (const e of all) heads.set(e.sessionId, e.seq);
          await notifySessions(tx, heads);
          await notifyGate(tx);
          return { settled, events: all };
        });
        if (!done) {
          log.warn(
            { status: settlement.status },
            "lost guard: task was settled or taken over elsewhere; nothing written",
          );
          return;
        }
        this.rt.eventLog.publish(done.events);
        log.info({ status: done.settled.status, code: done.settled.error?.code }, "turn settled");
        this.ran(done.settled);
        return;
      } catch (err) {
        // The database is away: the lease keeps the task ours until it expires, so keep trying.
        const delay = Math.min(100 * 2 ** attempt, 2000);
        if (attempt > 30 || (this.shuttingDown && attempt >= 2)) {
          log.error(
            { err: String(err) },
            "settling failed; giving up (the lease expires and the task is settled elsewhere)",
          );
          return;
        }
        log.warn({ err: String(err), retryInMs: delay }, "settling failed; retrying");
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }
}

/** Per-turn bookkeeping: maps driver events to log events and remembers what the result needs. */
class TurnState {
  contextTokens: number | null = null;
  percent: number | null = null;
  lastUsage: AgentUsage | null = null;
  text = "";
  readonly sink;
  private readonly upstream: UpstreamRecorder;

  constructor(
    private readonly rt: Runtime,
    private readonly session: SessionRow,
    private readonly row: TaskRow,
    private readonly fence: OwnerFence,
    private readonly log: Logger,
    permissions: Permissions | null = null,
    signal?: AbortSignal,
  ) {
    this.upstream = new UpstreamRecorder(rt, fence, log, (type, data) => this.append(type, data));
    // The driver boundary: everything an agent emits or saves is made storable here, once, for
    // every driver (agents/storable-text.ts).
    this.sink = storableSink({
      emit: (event: AgentEvent) => this.emit(event),
      drained: () => this.rt.eventLog.drained(this.session.id),
      // Goes in with the next event flush (stream/event-log.ts), after the events emitted before
      // it. Never throws into the agent: while the database is away the write waits, as the
      // turn's events and its settlement do.
      saveCursor: async (cursor: CursorFields) => {
        this.track(
          this.rt.eventLog.writeSession({ sessionId: this.session.id, fence: this.fence, cursor }),
          "lost guard: resume cursor not saved (task no longer owned)",
        );
      },
      // The turn waits here, keeping its active slot and its run deadline (domain/permissions.ts).
      requestPermission:
        permissions && signal
          ? (ask) =>
              permissions.ask({
                sessionId: this.session.id,
                taskId: this.row.id,
                fence: this.fence,
                ask,
                signal,
                log: this.log,
              })
          : undefined,
    });
  }

  private append(type: string, data: unknown, payload?: unknown): void {
    this.rt.eventLog.append({
      sessionId: this.session.id,
      taskId: this.row.id,
      type,
      data,
      payload,
      fence: this.fence,
    });
  }

  private emit(event: AgentEvent): void {
    switch (event.type) {
      case "message.delta":
        this.append("message.delta", { text: event.text });
        break;
      case "message":
        this.text = event.text;
        this.append("message", { text: event.text });
        break;
      case "tool.call": {
        const input = preview(event.input);
        this.append(
          "tool.call",
          input.truncated
            ? {
                id: event.id,
                name: event.name,
                input: input.preview,
                inputBytes: input.bytes,
                truncated: true,
              }
            : { id: event.id, name: event.name, input: event.input },
          input.truncated ? { input: event.input } : undefined,
        );
        break;
      }
      case "tool.result": {
        const output = preview(event.output);
        this.append(
          "tool.result",
          {
            id: event.id,
            isError: event.isError,
            preview: output.preview,
            bytes: output.bytes,
            truncated: output.truncated,
          },
          output.truncated ? { output: event.output } : undefined,
        );
        break;
      }
      case "usage": {
        const window = contextWindowOf(event.usage, this.rt.config.contextWindow);
        const percent = contextPercent(event.usage, window);
        this.lastUsage = event.usage;
        this.percent = percent;
        this.contextTokens =
          event.usage.inputTokens + event.usage.cacheCreationInputTokens + event.usage.cacheReadInputTokens;
        this.append("usage", {
          inputTokens: event.usage.inputTokens,
          outputTokens: event.usage.outputTokens,
          cacheCreationInputTokens: event.usage.cacheCreationInputTokens,
          cacheReadInputTokens: event.usage.cacheReadInputTokens,
          contextWindow: window,
          contextPercent: percent,
          ...selfReported(event.usage),
        });
        const usage = { inputTokens: this.contextTokens, contextWindow: window, percent };
        this.log.info(
          { inputTokens: this.contextTokens, contextWindow: window, percent, model: event.usage.model },
          "context per turn",
        );
        this.track(
          this.rt.eventLog.writeSession({
            sessionId: this.session.id,
            fence: this.fence,
            contextUsage: usage,
          }),
          "lost guard: context usage not saved (task no longer owned)",
        );
        break;
      }
      case "session.reset":
        this.append("session.reset", { reason: event.reason, notice: event.notice });
        break;
      case "session.notice":
        this.append("session.notice", { message: event.message });
        break;
      case "upstream.state":
        this.upstream.record(event);
        break;
    }
  }

  /** A session write queued in the event log (stream/event-log.ts): say so if it was fenced out. */
  private track(written: Promise<boolean>, fencedOut: string): void {
    void written.then((ok) => {
      if (!ok) this.log.warn(fencedOut);
    });
  }

  resultFor(outcome: TurnOutcome) {
    const usage = outcome.usage ?? this.lastUsage;
    let percent = this.percent;
    if (usage && percent === null) {
      percent = contextPercent(usage, contextWindowOf(usage, this.rt.config.contextWindow));
    }
    let text = outcome.text || this.text;
    if (this.session.agentConfig.contextSuffix === true && percent !== null)
      text = withContextSuffix(text, percent);
    return {
      text,
      stopReason: outcome.stopReason,
      usage: usage
        ? {
            inputTokens: usage.inputTokens,
            outputTokens: usage.outputTokens,
            cacheCreationInputTokens: usage.cacheCreationInputTokens,
            cacheReadInputTokens: usage.cacheReadInputTokens,
          }
        : null,
      contextPercent: percent,
      ...selfReported(usage),
    };
  }
}

/** The agent's own context figure, only where it was asked for one (agentConfig.selfReportContext). */
function selfReported(usage: AgentUsage | null): { selfReportedPercent?: number | null } {
  return usage?.selfReportedPercent === undefined ? {} : { selfReportedPercent: usage.selfReportedPercent };
}

/** An error the database server itself returned, other than the ones saying it is going away. */
function answeredByServer(err: unknown): boolean {
  return (err as { name?: string })?.name === "PostgresError" && !isDatabaseUnavailable(err);
}

const stopMessages = {
  cancel: { status: "cancelled", code: "CANCELLED", message: "The turn was cancelled." },
  timeout: {
    status: "failed",
    code: "TURN_TIMEOUT",
    message: "The turn ran past its deadline and was stopped.",
  },
  shutdown: {
    status: "interrupted",
    code: "GATEWAY_RESTART",
    message: "The gateway shut down before the turn finished.",
  },
} as const;

function settlementFor(
  cause: StopCause | null,
  outcome: TurnOutcome | null,
  failure: unknown,
  state: TurnState,
  _session: SessionRow,
): Settlement {
  if (cause && cause !== "lost") {
    const stop = stopMessages[cause];
    // A turn the agent finished normally despite a late stop request still counts as finished.
    if (outcome && outcome.stopReason !== "cancelled" && cause !== "timeout") {
      return { status: "completed", result: state.resultFor(outcome) };
    }
    return {
      status: stop.status,
      result: outcome ? state.resultFor(outcome) : null,
      error: { code: stop.code, message: stop.message },
    };
  }
  if (outcome) return { status: "completed", result: state.resultFor(outcome) };
  if (failure instanceof AgentFailure) {
    if (failure.code === "CANCELLED") {
      return { status: "cancelled", error: { code: "CANCELLED", message: failure.message } };
    }
    return {
      status: "failed",
      error: {
        code: failure.code,
        message: failure.message,
        ...(failure.reason ? { reason: failure.reason } : {}),
      },
    };
  }
  return {
    status: "failed",
    error: { code: "AGENT_CRASHED", message: "The agent stopped unexpectedly during the turn." },
  };
}
