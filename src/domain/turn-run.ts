/**
 * One turn's execution on its session's agent: start (or reuse) the conversation, run the prompt
 * under the turn's deadline (a stop escalates to a kill when the agent ignores it,
 * domain/running-turn.ts), feed it steered input, take the workspace's checkpoints, and hand what
 * came of it to the settler (domain/turn-settler.ts), which settles the task exactly once. The
 * worker (domain/worker.ts) claims the turns and keeps their leases; this runs them.
 */
import { type AgentDriver, AgentFailure, type TurnOutcome } from "../agents/driver.js";
import type { AgentRegistry, DriverName } from "../agents/registry.js";
import { storable } from "../agents/storable-text.js";
import type { OwnerFence } from "../sql/event-append.js";
import type { ConversationPool } from "./conversation-pool.js";
import type { Permissions } from "./permissions.js";
import type { Recovery } from "./recovery.js";
import type { Runtime } from "./runtime.js";
import type { RunningTurn } from "./running-turn.js";
import { settlementFor, TurnSettler, type TurnToSettle } from "./turn-settler.js";
import { TurnRecorder } from "./turn-recorder.js";
import { TurnInputs } from "./turn-inputs.js";
import type { TurnInputEvent } from "../sql/task-inputs.js";
import type { SessionRow } from "./views.js";
import type { CheckpointService } from "./checkpoints.js";
import { traceIdOf } from "../tracing/trace-context.js";
import { noSpan } from "../tracing/tracer.js";
import type { TurnTrace } from "./turn-recorder.js";

export class TurnExecution {
  /** The running turns' steered input. */
  private readonly inputs: TurnInputs;
  /** Each turn's settlement, sent once. */
  private readonly settler: TurnSettler;

  constructor(
    private readonly rt: Runtime,
    private readonly registry: AgentRegistry,
    private readonly drivers: Record<DriverName, AgentDriver>,
    private readonly pool: ConversationPool,
    recovery: Recovery,
    /** Interactive approvals: where a turn's permission requests go (absent: drivers use their policy). */
    private readonly permissions: Permissions | null,
    /** Workspace checkpoints before and after each turn (absent: none). */
    private readonly checkpoints: CheckpointService | null = null,
  ) {
    this.inputs = new TurnInputs(rt);
    this.settler = new TurnSettler(rt, recovery);
  }

  /** Shutdown: the grace is over; settlements give up after a few attempts. */
  givingUp(): void {
    this.settler.givingUp();
  }

  /** Run one claimed turn to its settlement (never throws: a failure settles the turn). */
  async execute(turn: RunningTurn, sessions: Promise<Map<string, SessionRow>>): Promise<void> {
    const { row } = turn;
    const fence: OwnerFence = { taskId: row.id, bootId: this.rt.identity.bootId, attempt: row.attempt };
    // The turn's log lines carry its trace id: from a line to the trace (docs/operations.md, Tracing).
    const traceId = traceIdOf(row.traceContext);
    const log = this.rt.log.child({
      taskId: row.id,
      sessionId: row.sessionId,
      tenant: row.tenant,
      attempt: row.attempt,
      ...(traceId ? { traceId } : {}),
    });
    const { tracer } = this.rt;
    const span = tracer.on
      ? tracer.span("mooring.turn", row.traceContext, {
          "mooring.task.id": row.id,
          "mooring.session.id": row.sessionId,
          "mooring.tenant": row.tenant,
          "mooring.attempt": row.attempt,
          "mooring.instance.id": this.rt.identity.instanceId,
        })
      : noSpan;
    if (tracer.on) this.rt.eventLog.traceTurn(row.id, span);
    const toSettle: TurnToSettle = { turn, fence, log, span };
    let session: SessionRow | null = null;
    let healthy = false;
    let tokens: number | null = null;
    try {
      session = (await sessions).get(row.sessionId) ?? null;
      if (!session) throw new Error(`session ${row.sessionId} not found`);
      const entry = this.registry.get(session.agent);
      if (!entry) {
        await this.settler.settle(toSettle, {
          status: "failed",
          error: {
            code: "AGENT_START_FAILED",
            message: `The agent "${session.agent}" is no longer registered.`,
          },
        });
        return;
      }
      // The workspace as it is before the agent starts (docs/api.md, Workspace checkpoints).
      const checkpointed =
        this.checkpoints?.enabledFor(session, entry) === true &&
        (await this.checkpoints.beforeTurn(session, row, log));
      // Traced: the agent's start, until its first event (resume, new, warm; fresh_fallback when a
      // resume failed and the agent started a fresh conversation).
      const trace: TurnTrace | null = tracer.on
        ? {
            turn: span,
            agentStart: tracer.span("mooring.agent.start", span, { "mooring.agent": session.agent }),
          }
        : null;
      const conversation = this.pool.acquire(
        session,
        entry,
        this.drivers[entry.driver],
        trace
          ? (how) => {
              trace.agentStart?.set({ "mooring.agent.start": how });
              span.set({ "mooring.agent.start": how, "mooring.agent": session!.agent });
            }
          : undefined,
      );
      // deadline_at was set by the database at admission; the timer runs on the gateway's clock.
      const armDeadline = () => {
        const now = this.rt.clock.now();
        const deadline = (row.deadlineAt?.getTime() ?? now + row.timeoutMs) - now;
        return this.rt.clock.setTimeout(() => turn.stop("timeout"), Math.max(deadline, 0));
      };
      let deadlineTimer = armDeadline();
      const recorder = new TurnRecorder(
        this.rt,
        session,
        row,
        fence,
        log,
        this.permissions,
        turn.controller.signal,
        trace,
      );
      let outcome: TurnOutcome | null = null;
      let failure: unknown = null;
      // Steered input (domain/turn-inputs.ts), for drivers whose agent takes it mid-turn.
      const input = this.drivers[entry.driver].steer
        ? this.inputs.feed(row.sessionId, row.id, fence, row.firstSeq, log)
        : null;
      const run = (prompt: string) =>
        turn.runEscalating(this.rt.clock, () =>
          conversation.runTurn({
            prompt,
            sink: recorder.sink,
            signal: turn.controller.signal,
            turn: { taskId: row.id, attempt: row.attempt },
            ...(input ? { input } : {}),
          }),
        );
      // A turn its agent ended by itself can take late input as a follow-up prompt.
      const followable = () =>
        outcome !== null && outcome.stopReason !== "cancelled" && !turn.cause && conversation.alive;
      // Input that came too late for the agent's turn goes to it as a follow-up prompt, in this turn;
      // the input is closed by then (later steers answer TASK_NOT_RUNNING), so this happens once.
      const followUp = async (rest: TurnInputEvent[]) => {
        if (rest.length === 0 || !followable()) return;
        log.info({ inputs: rest.length }, "steered input after the agent's turn: sent as a follow-up prompt");
        outcome = await run(rest.map((e) => e.text).join("\n\n"));
      };
      try {
        outcome = await run(row.prompt);
        // Input the feed holds, or a turn whose checkpoint comes before its settlement: the input
        // is closed here. Otherwise the settlement closes it (sql/task-settle.ts).
        if (input && ((await input.finish()) || checkpointed)) await followUp(await input.close());
      } catch (err) {
        failure = err;
      } finally {
        input?.stopListening();
        this.rt.clock.clearTimeout(deadlineTimer);
        // An agent that ended without a single event: its start ends with the turn.
        trace?.agentStart?.end();
      }
      const settleTurn = async (inputAfter: number | null): Promise<boolean> => {
        // A request the agent left unanswered (it crashed, or withdrew it) is resolved before the
        // settlement, so its event precedes the terminal one.
        await this.permissions?.endTurn(row.id);
        // The workspace as the agent left it (stopped, failed or done), with the turn's turn.diff event.
        if (checkpointed && this.checkpoints && turn.cause !== "lost") {
          await this.checkpoints.afterTurn(session!, row, fence, log);
        }
        // The turn's session writes need no waiting for: its lane commits them before (or with)
        // the settlement queued after them, while the fence that guards them still holds.
        tokens = recorder.contextTokens;
        healthy = failure === null && outcome !== null && conversation.alive;
        if (outcome === null && failure === null) {
          // The agent ignored the stop request and was killed.
          this.pool.close(row.sessionId, "kill");
        }
        if (failure && !(failure instanceof AgentFailure)) {
          log.error({ err: String(failure) }, "agent crashed during the turn");
        }
        // The outcome and failure come from the agent: storable like its events (agents/storable-text.ts).
        const settlement = storable(settlementFor(turn.cause, outcome, failure, recorder));
        return this.settler.settle(toSettle, settlement, inputAfter);
      };
      const readUpTo = input && failure === null && followable() ? input.readUpTo : null;
      const inputPending = await settleTurn(readUpTo);
      if (inputPending && input) {
        // Input the feed had not heard of (its hint lost or still on its way): the agent takes it
        // before the turn settles.
        deadlineTimer = armDeadline();
        try {
          await followUp(await input.close());
        } catch (err) {
          failure = err;
        } finally {
          this.rt.clock.clearTimeout(deadlineTimer);
        }
        await settleTurn(null);
      }
    } catch (err) {
      log.error({ err: String(err) }, "turn could not run");
      await this.settler
        .settle(toSettle, {
          status: "failed",
          error: { code: "AGENT_START_FAILED", message: "The agent could not be started for this turn." },
        })
        .catch(() => {});
    } finally {
      this.pool.release(row.sessionId, healthy, tokens);
      if (tracer.on) {
        if (turn.cause) span.set({ "mooring.stop.cause": turn.cause });
        this.rt.eventLog.untraceTurn(row.id);
        span.end();
      }
    }
  }
}
