/**
 * One downstream session's conversation with an upstream mooring gateway (docs/agents.md, Chained
 * gateways). No process: the first turn creates the upstream session (its id is the resume
 * cursor's `agentSessionId`), each turn is submitted upstream with the idempotency key
 * `<downstream task id>:<attempt>` and followed with the client SDK, which resumes across dropped
 * connections and upstream restarts without losing or repeating an event.
 */
import { type CarryOver, carriedOverField, noticeWithCarryOver } from "../carry-over.js";
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { AbortError, TaskLostError } from "../../client/errors.js";
import type { MooringClient } from "../../client/client.js";
import type { Run } from "../../client/run.js";
import { isResyncItem, type Session, type Task } from "../../client/types.js";
import {
  AgentFailure,
  type AgentConversation,
  type OpenConversationOptions,
  type ResumeCursor,
  type RunTurnOptions,
  type TurnOutcome,
  type TurnSink,
  type UpstreamLimits,
} from "../driver.js";
import { mapWorkspace, type UpstreamEntry } from "./entry.js";
import { relayEvent } from "./events.js";
import { upstreamLimitDefaults } from "../../config.js";
import { callUpstream, refusalFailure, SilenceWatch, upstreamClient } from "./link.js";
import { eventFits, LinkGuard } from "./limits.js";
import { type Clock, realClock } from "../../clock.js";

/** How long a cancel may take upstream before the downstream turn ends anyway. */
const CANCEL_WAIT_MS = 2_000;

/** Upstream answers meaning its session of this conversation is gone (its database lost, or archived there). */
const sessionGone = new Set(["SESSION_NOT_FOUND", "SESSION_ARCHIVED"]);

export const upstreamGoneNotice =
  "The upstream gateway no longer has this conversation, so its context was lost. This message starts a fresh conversation.";

type Link = Parameters<typeof callUpstream>[1];

export class UpstreamConversation implements AgentConversation {
  private readonly entry: UpstreamEntry;
  private readonly client: MooringClient;
  private readonly log: Logger;
  private readonly silentMs: number;
  private readonly clock: Clock;
  private readonly limits: UpstreamLimits;
  /** The running turn's bounds (limits.ts); the client's socket and fetch report to it. */
  private guard = new LinkGuard();
  private cursor: ResumeCursor;
  private closed = false;

  constructor(private readonly options: OpenConversationOptions) {
    if (!options.entry.upstream) throw new Error(`agent ${options.entry.name} has no upstream`);
    this.entry = options.entry.upstream;
    this.limits = options.settings.upstreamLimits ?? upstreamLimitDefaults;
    this.client = upstreamClient(this.entry, this.limits, () => this.guard);
    this.cursor = structuredClone(options.cursor);
    this.silentMs = options.settings.upstreamSilentMs ?? 600_000;
    this.clock = options.settings.clock ?? realClock;
    this.log = options.log.child({
      sessionId: options.sessionId,
      agent: options.entry.name,
      upstream: this.entry.url,
    });
  }

  get alive(): boolean {
    return !this.closed;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  async runTurn({ prompt, sink, signal, turn }: RunTurnOptions): Promise<TurnOutcome> {
    if (this.closed) throw new AgentFailure("AGENT_CRASHED", "The upstream conversation was already closed.");
    const watch = new SilenceWatch(this.silentMs, this.clock);
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    const guard = new LinkGuard(() => stop.abort());
    this.guard = guard;
    if (signal.aborted) stop.abort();
    else signal.addEventListener("abort", onAbort, { once: true });
    let upstreamTaskId: string | null = null;
    try {
      const link: Link = {
        signal: stop.signal,
        guard,
        watch,
        entry: this.entry,
        onBusy: (retryAt) =>
          sink.emit({
            type: "upstream.state",
            upstreamTaskId: null,
            waiting: { position: null, queueDeadlineAt: null, retryAt: retryAt.toISOString() },
          }),
      };
      // A fork or rollback: a new upstream session with the carried history stands in for the branch.
      const rewound = await this.applyRewind(sink);
      let sessionId = await this.upstreamSession(link, sink);
      this.cursor.turnCount += 1;
      await sink.saveCursor(structuredClone(this.cursor));
      const key = `${turn?.taskId ?? randomUUID()}:${turn?.attempt ?? 0}`;
      let task: Task;
      try {
        task = await this.submit(sessionId, rewound ? `${rewound.text}\n\n${prompt}` : prompt, key, link);
      } catch (err) {
        if (!(err instanceof AgentFailure && sessionGone.has(err.reason ?? ""))) throw err;
        const recap = (await this.options.carryOver?.()) ?? null;
        sessionId = await this.startOver(err.reason as string, link, sink, recap);
        // The upstream takes one prompt string: the recap goes first, marked as such by its own text.
        task = await this.submit(sessionId, recap ? `${recap.text}\n\n${prompt}` : prompt, key, link);
      }
      upstreamTaskId = task.id;
      this.log.info({ upstreamTaskId: task.id, upstreamSessionId: sessionId }, "upstream turn submitted");
      sink.emit({ type: "upstream.state", upstreamTaskId: task.id, waiting: null });
      const done = await this.follow(task, sink, watch, stop.signal);
      return this.conclude(done, sink);
    } catch (err) {
      if (signal.aborted) return this.stopped(upstreamTaskId, sink);
      if (guard.failure) {
        this.log.warn({ reason: guard.failure.reason, upstreamTaskId }, "upstream exceeded a bound; turn failed");
        // Nothing more is read from it; its turn is let go of now (else by the orphan round).
        if (upstreamTaskId) await this.cancelUpstream(upstreamTaskId, sink);
        throw guard.failure;
      }
      if (err instanceof AgentFailure) {
        this.log.warn({ code: err.code, reason: err.reason, upstreamTaskId }, "upstream turn failed");
      }
      throw err;
    } finally {
      signal.removeEventListener("abort", onAbort);
      stop.abort();
    }
  }

  private submit(sessionId: string, prompt: string, idempotencyKey: string, link: Link): Promise<Task> {
    return callUpstream(
      (attemptSignal) =>
        this.client.http
          .once<Task>("POST", `/v1/sessions/${sessionId}/turns`, {
            body: { prompt, idempotencyKey },
            signal: attemptSignal,
          })
          .then((a) => a.body),
      link,
    );
  }

  /**
   * A pending fork or rollback (docs/api.md, Fork and rollback): the upstream session is left, a
   * new one is made for this conversation, and its first prompt carries the recap. Answers the
   * recap (null: none to carry, or no rewind).
   */
  private async applyRewind(sink: TurnSink): Promise<CarryOver | null> {
    const rewind = this.cursor.rewind;
    if (!rewind) return null;
    const old = this.cursor.agentSessionId;
    if (old && !this.cursor.pastAgentSessionIds.includes(old)) this.cursor.pastAgentSessionIds.push(old);
    this.cursor.agentSessionId = null;
    this.cursor.lastAssistantMessageId = null;
    this.cursor.rewind = null;
    const recap = (await this.options.carryOver?.()) ?? null;
    const what = rewind.kind === "fork" ? "This fork" : "After the rollback, this conversation";
    sink.emit({
      type: "session.reset",
      reason: rewind.kind,
      notice: noticeWithCarryOver(`${what} starts a fresh upstream session.`, recap),
      ...carriedOverField(recap),
    });
    return recap;
  }

  /** The upstream lost this conversation's session: say so, and go on in a new one. */
  private async startOver(
    code: string,
    link: Link,
    sink: TurnSink,
    recap: CarryOver | null,
  ): Promise<string> {
    const old = this.cursor.agentSessionId;
    this.log.warn({ upstreamSessionId: old, code }, "upstream session gone; starting a fresh one");
    if (old && !this.cursor.pastAgentSessionIds.includes(old)) this.cursor.pastAgentSessionIds.push(old);
    this.cursor.agentSessionId = null;
    this.cursor.lastAssistantMessageId = null;
    sink.emit({
      type: "session.reset",
      reason: "resume_failed",
      notice: noticeWithCarryOver(upstreamGoneNotice, recap),
      ...carriedOverField(recap),
    });
    return this.upstreamSession(link, sink);
  }

  /** The upstream session of this conversation, created on the first turn (idempotently). */
  private async upstreamSession(link: Link, sink: TurnSink): Promise<string> {
    if (this.cursor.agentSessionId) return this.cursor.agentSessionId;
    const workspace = mapWorkspace(this.options.workspace, this.entry.workspaceMap);
    const session = await callUpstream(
      (attemptSignal) =>
        this.client.http
          .once<Session>("POST", "/v1/sessions", {
            body: {
              workspace,
              agent: this.entry.agent,
              agentConfig: this.entry.agentConfig,
              // One upstream session per downstream session (and fresh start), however often this is retried.
              idempotencyKey: `mooring:${this.options.sessionId}:${this.cursor.pastAgentSessionIds.length}`,
            },
            signal: attemptSignal,
          })
          .then((a) => a.body),
      link,
    );
    this.cursor.agentSessionId = session.id;
    this.log.info({ upstreamSessionId: session.id, workspace }, "upstream session created");
    await sink.saveCursor(structuredClone(this.cursor));
    return session.id;
  }

  /** Relays the upstream task's events until its end; fails UPSTREAM_LOST after too long a silence. */
  private async follow(task: Task, sink: TurnSink, watch: SilenceWatch, signal: AbortSignal): Promise<Task> {
    const lost = new AbortController();
    const run: Run = this.client.tasks.follow(task.id, { signal: AbortSignal.any([signal, lost.signal]) });
    // Heard as each event is taken, before it is buffered: one too large stops the follower.
    run.on("event", (event) => eventFits(event, this.limits, this.guard));
    let saidPolling = false;
    run.on("state", (change) => {
      if (change.state === "restart") return watch.contact();
      if (change.state === "polling" && !saidPolling) {
        saidPolling = true;
        this.log.warn({ upstreamTaskId: task.id, why: change.reason }, "following the upstream turn by polling");
      }
      watch.setConnected(
        change.state === "streaming" || change.state === "polling" || change.state === "settling",
      );
    });
    const check = this.clock.setInterval(
      () => {
        if (watch.remainingMs() <= 0) lost.abort();
      },
      Math.min(1_000, Math.max(50, this.silentMs / 4)),
    );
    try {
      for await (const item of run) {
        watch.contact();
        if (this.guard.failure) throw new AbortError();
        if (isResyncItem(item)) continue;
        const relayed = relayEvent(item, run.task ?? task);
        if (relayed) sink.emit(relayed);
      }
      return await run.done();
    } catch (err) {
      if (lost.signal.aborted && !signal.aborted) throw watch.lostFailure();
      if (err instanceof TaskLostError) throw watch.lostFailure();
      if (err instanceof AbortError) throw err;
      throw refusalFailure(err) ?? err;
    } finally {
      this.clock.clearInterval(check);
    }
  }

  private conclude(task: Task, sink: TurnSink): TurnOutcome {
    sink.emit({ type: "upstream.state", upstreamTaskId: task.id, waiting: null, released: true });
    if (task.status === "completed" && task.result) {
      // The upstream completed the turn: its conversation holds it (the proof the pool looks for).
      this.cursor.lastAssistantMessageId = task.id;
      void sink.saveCursor(structuredClone(this.cursor));
      const usage = task.result.usage as Record<string, number> | null;
      return {
        text: task.result.text,
        stopReason: task.result.stopReason,
        usage: usage
          ? {
              inputTokens: usage.inputTokens ?? 0,
              outputTokens: usage.outputTokens ?? 0,
              cacheCreationInputTokens: usage.cacheCreationInputTokens ?? 0,
              cacheReadInputTokens: usage.cacheReadInputTokens ?? 0,
              // Carried on when the upstream agent was asked for its own figure (selfReportContext).
              ...("selfReportedPercent" in task.result
                ? { selfReportedPercent: task.result.selfReportedPercent ?? null }
                : {}),
            }
          : null,
      };
    }
    const code = task.error?.code ?? "UNKNOWN";
    throw new AgentFailure(
      "UPSTREAM_FAILED",
      `The upstream gateway's turn ended ${task.status} (${code})${task.error?.message ? `: ${task.error.message}` : "."}`,
      `${task.status}/${code}`,
    );
  }

  /** The downstream turn was stopped (cancel, deadline, shutdown): cancel the upstream turn too. */
  private async stopped(upstreamTaskId: string | null, sink: TurnSink): Promise<TurnOutcome> {
    if (upstreamTaskId) await this.cancelUpstream(upstreamTaskId, sink);
    return { text: "", stopReason: "cancelled", usage: null };
  }

  private async cancelUpstream(upstreamTaskId: string, sink: TurnSink): Promise<void> {
    try {
      await this.client.http.once("POST", `/v1/tasks/${upstreamTaskId}/cancel`, {
        timeoutMs: CANCEL_WAIT_MS,
      });
      this.log.info({ upstreamTaskId }, "upstream turn cancelled");
      sink.emit({ type: "upstream.state", upstreamTaskId, waiting: null, released: true });
    } catch (err) {
      // Left unreleased: the orphan round cancels it later (domain/upstream-orphans.ts).
      this.log.warn({ upstreamTaskId, err: String(err) }, "could not cancel the upstream turn yet");
    }
  }
}
