/** What a running turn's agent emits, recorded as client events (next to task-events.ts). */
import type { Logger } from "pino";
import type { AgentEvent, AgentUsage, TurnOutcome } from "../agents/driver.js";
import { storableSink } from "../agents/storable-text.js";
import type { EventType } from "../contract/events.js";
import type { OwnerFence } from "../sql/event-append.js";
import type { CursorFields } from "../sql/task-turn-state.js";
import type { TaskRow } from "../sql/task-row.js";
import { preview } from "../stream/preview.js";
import { contextPercent, contextWindowOf, withContextSuffix } from "./context.js";
import type { Permissions } from "./permissions.js";
import type { Runtime } from "./runtime.js";
import { UpstreamRecorder } from "./upstream-state.js";
import type { SessionRow } from "./views.js";
import type { Span } from "../tracing/tracer.js";

/** A traced turn's spans that its events end or mark (absent when tracing is off). */
export interface TurnTrace {
  /** The `mooring.turn` span: notices and resets become its span events. */
  turn: Span;
  /** `mooring.agent.start`, ended by the agent's first event. */
  agentStart: Span | null;
}

/**
 * The agent-event → client-event mapping of one running turn: what a driver emits
 * (agents/driver.ts, `AgentEvent`) becomes the events clients receive (docs/api.md, Streaming),
 * appended to the event log fenced by the turn's owner; it remembers what the turn's result needs
 * (final text, last usage, context percentage). Not to be confused with the session row's saved
 * state (sql/task-turn-state.ts): this lives only while the turn runs.
 */
export class TurnRecorder {
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
    private readonly trace: TurnTrace | null = null,
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
          ? (ask) => {
              const asking = permissions.ask({
                sessionId: this.session.id,
                taskId: this.row.id,
                fence: this.fence,
                ask,
                signal,
                log: this.log,
              });
              if (!this.trace) return asking;
              // The wait for a person's answer, the turn's slot held meanwhile.
              const span = this.rt.tracer.span("mooring.permission", this.trace.turn, {
                "mooring.task.id": this.row.id,
              });
              return asking.then(
                (answer) => {
                  span.end();
                  return answer;
                },
                (err) => {
                  span.fail("PERMISSION_FAILED");
                  span.end();
                  throw err;
                },
              );
            }
          : undefined,
    });
  }

  private append(type: EventType, data: unknown, payload?: unknown): void {
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
    if (this.trace) this.traced(this.trace, event);
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
        // A report of no tokens at all (a turn cut off before any model call, the simulated agent
        // without `[tokens N]`) says nothing of the context: the last known figure stays.
        if (this.contextTokens === 0) break;
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
        this.append("session.reset", {
          reason: event.reason,
          notice: event.notice,
          ...(event.carriedOver ? { carriedOver: event.carriedOver } : {}),
        });
        break;
      case "session.notice":
        this.append("session.notice", { message: event.message });
        break;
      case "upstream.state":
        this.upstream.record(event);
        break;
    }
  }

  /** The agent's first event ends its start; resets and notices are the turn's span events (no text). */
  private traced(trace: TurnTrace, event: AgentEvent): void {
    if (trace.agentStart) {
      if (event.type === "session.reset" && event.reason === "resume_failed") {
        trace.agentStart.set({ "mooring.agent.start": "fresh_fallback" });
        trace.turn.set({ "mooring.agent.start": "fresh_fallback" });
      }
      trace.agentStart.end();
      trace.agentStart = null;
    }
    if (event.type === "session.reset") {
      trace.turn.event("mooring.session.reset", { "mooring.reset.reason": event.reason });
      if (event.reason === "resume_failed") trace.turn.set({ "mooring.agent.start": "fresh_fallback" });
    } else if (event.type === "session.notice") {
      trace.turn.event("mooring.session.notice");
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
