/**
 * The built-in simulated agent: deterministic, driven by directives in the prompt (see
 * directives.ts). It behaves like a real agent where it matters to the pipeline: it keeps a
 * conversation id, proves saving only through assistant messages, streams, calls tools, fails,
 * crashes, hangs and honours cancel.
 */
import { randomUUID } from "node:crypto";
import {
  type AgentConversation,
  type AgentDriver,
  AgentFailure,
  type AgentFailureCode,
  type OpenConversationOptions,
  type ResumeCursor,
  type RunTurnOptions,
  type TurnOutcome,
} from "../driver.js";
import { parseDirectives } from "./directives.js";

const failureCodes: AgentFailureCode[] = ["AGENT_START_FAILED", "AGENT_CRASHED", "AGENT_ERROR", "CONTEXT_TOO_LARGE"];

class SimulatedConversation implements AgentConversation {
  alive = true;
  private cursor: ResumeCursor;

  constructor(private readonly options: OpenConversationOptions) {
    this.cursor = { ...options.cursor, pastAgentSessionIds: [...options.cursor.pastAgentSessionIds] };
  }

  async runTurn({ prompt, sink, signal }: RunTurnOptions): Promise<TurnOutcome> {
    if (!this.alive) throw new AgentFailure("AGENT_CRASHED", "The simulated agent is no longer running.");
    this.cursor = {
      ...this.cursor,
      agentSessionId: this.cursor.agentSessionId ?? `sim-${randomUUID()}`,
      turnCount: this.cursor.turnCount + 1,
    };
    await sink.saveCursor(this.cursor);
    let inputTokens = 0;
    let text = "";
    let toolCalls = 0;
    for (const directive of parseDirectives(prompt)) {
      if (signal.aborted) return cancelled(text);
      switch (directive.kind) {
        case "sleep":
          if (!(await sleep(directive.ms, signal))) return cancelled(text);
          break;
        case "deltas":
          for (let i = 0; i < directive.count; i++) {
            const chunk = `chunk ${i + 1} `;
            text += chunk;
            sink.emit({ type: "message.delta", text: chunk });
          }
          break;
        case "tool": {
          const id = `tool-${++toolCalls}`;
          sink.emit({ type: "tool.call", id, name: "simulated_command", input: { command: `produce ${directive.bytes} bytes` } });
          sink.emit({ type: "tool.result", id, isError: false, output: "x".repeat(directive.bytes) });
          break;
        }
        case "tokens":
          inputTokens = directive.count;
          break;
        case "fail": {
          const code = failureCodes.includes(directive.code as AgentFailureCode)
            ? (directive.code as AgentFailureCode)
            : "AGENT_ERROR";
          throw new AgentFailure(code, `The simulated agent failed as asked (${directive.code}).`);
        }
        case "crash":
          this.alive = false;
          throw new Error("simulated agent process exited with code 1");
        case "hang":
          await sleep(Number.POSITIVE_INFINITY, signal);
          return cancelled(text);
        case "stubborn":
          await new Promise<void>(() => {}); // ignores cancel; only close("kill") ends it
      }
    }
    if (text === "") {
      text = `You said: ${prompt.slice(0, 200)}`;
      sink.emit({ type: "message.delta", text });
    }
    const messageId = `msg-${randomUUID()}`;
    sink.emit({ type: "message", text, messageId });
    this.cursor = { ...this.cursor, lastAssistantMessageId: messageId };
    await sink.saveCursor(this.cursor);
    const usage = {
      inputTokens,
      outputTokens: Math.ceil(text.length / 4),
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: 0,
    };
    sink.emit({ type: "usage", usage });
    return { text, stopReason: "end_turn", usage };
  }

  async close(): Promise<void> {
    this.alive = false;
  }
}

function cancelled(text: string): TurnOutcome {
  return { text, stopReason: "cancelled", usage: null };
}

/** Resolves true after `ms`, false as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = Number.isFinite(ms) ? setTimeout(() => done(true), ms) : null;
    const onAbort = () => done(false);
    const done = (value: boolean) => {
      if (timer) clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      resolve(value);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export const simulatedDriver: AgentDriver = {
  name: "simulated",
  validateConfig(_entry, config) {
    for (const [key, value] of Object.entries(config)) {
      if (key === "contextSuffix" && typeof value === "boolean") continue;
      return { ok: false, problem: `agentConfig.${key} is not allowed for the simulated agent` };
    }
    return { ok: true, config };
  },
  open: (options) => new SimulatedConversation(options),
};
