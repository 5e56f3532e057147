/**
 * The contract between the turn pipeline and an agent.
 *
 * A driver turns one agent's own protocol (a simulated script, the Claude Code CLI's stream-json,
 * the Agent Client Protocol) into the normalized events of docs/api.md, Streaming. The pipeline owns
 * everything durable (tasks, the event log, the resume cursor in Postgres); a driver owns only the
 * agent process. One `AgentConversation` exists per mooring session at a time and runs one turn
 * at a time; the pipeline keeps it warm between turns and closes it when idle.
 */
import type { Logger } from "pino";
import type { CarriedOver, CarryOver } from "./carry-over.js";
import type { AgentEntry, DriverName } from "./registry.js";
import type { Clock } from "../clock.js";
import type { Rewind } from "../db/schema.js";

/** What the agent reported about how to continue its conversation later (docs/api.md, Restarts, resume and recovery). */
export interface ResumeCursor {
  /** The agent's own conversation id; null when no conversation was started yet. */
  agentSessionId: string | null;
  /** Turns sent to this conversation (written before the prompt is sent, so not proof of saving). */
  turnCount: number;
  /** Id of the last assistant message observed from the agent: the only proof the agent saved it. */
  lastAssistantMessageId: string | null;
  /** Conversation ids this session used before a fresh start replaced them. */
  pastAgentSessionIds: string[];
  /**
   * A fork's or a rollback's branch of the conversation, to make before the next prompt
   * (docs/api.md, Fork and rollback): branch `rewind.agentSessionId` at `rewind.messageId` where the
   * agent can, else start fresh with the carried history (`carryOver`) and a `session.reset` of
   * reason `fork` or `rollback`. A driver saves its cursor without it once applied; until then
   * every save carries it, so a turn that dies first applies it again. Absent or null: none.
   */
  rewind?: Rewind | null;
}

export type { Rewind };

export const emptyCursor = (): ResumeCursor => ({
  agentSessionId: null,
  turnCount: 0,
  lastAssistantMessageId: null,
  pastAgentSessionIds: [],
});

/**
 * Why a conversation started over: never saved, its resume failed, or a fork or rollback the agent
 * could not make itself (the carried history stands in for it).
 */
export type ResetReason = "unsaved" | "resume_failed" | "fork" | "rollback";

/** Token usage of a model call, as the agent reported it. */
export interface AgentUsage {
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  cacheReadInputTokens: number;
  /** Model id when known; a model id containing `[1m]` has a 1,000,000-token window. */
  model?: string;
  /**
   * The context window in tokens, when the agent reports it (ACP `usage_update.size`). Preferred
   * over the model id and the configured MOORING_CONTEXT_WINDOW.
   */
  contextWindow?: number;
  /**
   * The agent's own estimate of its context use in percent (Claude Code with
   * `agentConfig.selfReportContext`); null when it gave none. Absent when it was not asked.
   */
  selfReportedPercent?: number | null;
}

/**
 * A normalized event a driver emits while a turn runs. The pipeline assigns `seq`, makes previews
 * of large tool input/output and commits them to the event log before any client sees them.
 */
export type AgentEvent =
  | { type: "message.delta"; text: string }
  /** A complete assistant message; `messageId` proves the agent saved the conversation. */
  | { type: "message"; text: string; messageId?: string }
  | { type: "tool.call"; id: string; name: string; input: unknown }
  /** `output` is the full tool output; the pipeline stores it and streams a preview. */
  | { type: "tool.result"; id: string; isError: boolean; output: unknown }
  /** Usage of the last model call; the pipeline derives the context percentage from it. */
  | { type: "usage"; usage: AgentUsage }
  /** `carriedOver`: the recap the fresh conversation starts with (agents/carry-over.ts), when there is one. */
  | { type: "session.reset"; reason: ResetReason; notice: string; carriedOver?: CarriedOver }
  | { type: "session.notice"; message: string }
  /**
   * The `mooring` driver's upstream task (docs/agents.md, Chained gateways): its id once submitted,
   * and while it waits, where (`position` and `queueDeadlineAt` in the upstream queue, or `retryAt`
   * after the upstream gate refused it with 429). The pipeline shows the wait as `task.position`
   * events and under the Task's `upstream`; `waiting: null` once the upstream turn runs.
   */
  | {
      type: "upstream.state";
      upstreamTaskId: string | null;
      waiting: UpstreamWaiting | null;
      /** The upstream task ended, or its cancel was accepted: nothing is left to let go of. */
      released?: boolean;
    };

/** Where a chained turn waits on the upstream gateway. */
export interface UpstreamWaiting {
  position: number | null;
  queueDeadlineAt: string | null;
  /** After a 429 from the upstream gate: when the submit is tried again. */
  retryAt?: string;
}

/**
 * A permission request of the agent. `options` are offered to clients as they are;
 * option kinds follow ACP: `allow_once`, `allow_always`, `reject_once`, `reject_always`, and
 * `answer` for a question's reply. `kind` of the tool call: `question` for a question to the
 * person (answered with `answers`), else the agent's tool kind (`execute`, `edit`, `other`, ...).
 */
export interface PermissionAsk {
  toolCall: { id: string; name: string; title: string; kind: string; input: unknown };
  options: { optionId: string; name: string; kind: string }[];
}

/**
 * The answer: the option chosen (null only when none was offered that fits, e.g. no reject option
 * on a timeout), who decided, and a client's message and answers.
 */
export interface PermissionAnswer {
  optionId: string | null;
  /** `gateway`: refused without asking anyone (an input too large to show whole). */
  by: "client" | "timeout" | "cancel" | "restart" | "gateway";
  message?: string;
  answers?: Record<string, string>;
}

/** Where a running turn sends what it observes. */
export interface TurnSink {
  /** Queue an event for the event log. Never throws; ordering is preserved. */
  emit(event: AgentEvent): void;
  /**
   * Persist a new resume cursor (a guarded write: it changes nothing if this turn no longer owns
   * the task). Drivers call it as soon as the agent reports a conversation id or an assistant
   * message. It resolves once the write is queued in the event log, in order with the turn's
   * events: it commits with them in the next flush (milliseconds later), and always before the
   * turn settles, so a crash loses the cursor only together with the events around it.
   */
  saveCursor(cursor: ResumeCursor): Promise<void>;
  /**
   * Backpressure: resolves once the event log has few of this session's lane's events waiting for
   * a flush. A driver that can produce events faster than they commit (the simulated agent's
   * floods) awaits it between bursts, so its backlog never holds the lane other sessions share.
   */
  drained?(): Promise<void>;
  /**
   * Ask a person (interactive approvals). Resolves with the first answer: a client's, the
   * request's deadline (the reject option), or the turn's stop (cancel, deadline, restart). Never
   * rejects. Absent where nobody can be asked: the driver then applies its fixed policy.
   */
  requestPermission?(ask: PermissionAsk): Promise<PermissionAnswer>;
}

/** How a turn ended when it did not fail. */
export interface TurnOutcome {
  /** Final assistant text of the turn. */
  text: string;
  /** e.g. `end_turn`, `max_tokens`, `cancelled`, `refusal`. */
  stopReason: string;
  /** Usage of the last model call of the turn, when the agent reported it. */
  usage: AgentUsage | null;
}

/** Codes a driver may fail a turn with (a subset of docs/api.md, Routes and Errors terminal codes). */
export type AgentFailureCode =
  | "AGENT_START_FAILED"
  /** The workspace, resolved again at spawn, is outside every root (swapped for a symlink, say). */
  | "WORKSPACE_NOT_ALLOWED"
  | "AGENT_CRASHED"
  | "AGENT_ERROR"
  | "CONTEXT_TOO_LARGE"
  | "TURN_TIMEOUT"
  | "CANCELLED"
  /** `mooring` driver: the upstream gateway refused the token (401/403); never retried. */
  | "UPSTREAM_AUTH"
  /** `mooring` driver: no successful contact with the upstream for MOORING_UPSTREAM_SILENT_MS. */
  | "UPSTREAM_LOST"
  /** `mooring` driver: the upstream task ended other than completed; `reason` is `<status>/<code>`. */
  | "UPSTREAM_FAILED";

/** A failed turn. `message` is fit to show a person; diagnostics go to the log. */
export class AgentFailure extends Error {
  constructor(
    readonly code: AgentFailureCode,
    message: string,
    readonly reason?: string,
  ) {
    super(message);
    this.name = "AgentFailure";
  }
}

/** What a downstream gateway takes from an upstream one (driver `mooring`; MOORING_UPSTREAM_* in config.ts). */
export interface UpstreamLimits {
  maxMessageBytes: number;
  maxEventBytes: number;
  maxBodyBytes: number;
  pollMinMs: number;
}

/** Everything a driver needs to open a conversation for one mooring session. */
export interface OpenConversationOptions {
  /** mooring session id (for logs and per-session state). */
  sessionId: string;
  /** The session's workspace as stored (normalized when the session was created). */
  workspace: string;
  /**
   * The folder to run the agent in: the workspace resolved now and checked against the roots
   * (domain/workspace.ts). Drivers that run a process ask at every turn and right before every
   * spawn, and run it in the path returned. Rejects with AgentFailure (WORKSPACE_NOT_ALLOWED, or
   * AGENT_START_FAILED when the folder is gone).
   */
  resolveWorkspace(): Promise<string>;
  /** The agent process's environment: never the gateway's secrets (agents/agent-env.ts). */
  env: NodeJS.ProcessEnv;
  /** The registry entry the session names (launch settings chosen by the operator). */
  entry: AgentEntry;
  /** The session's client-chosen options, already validated against the driver's schema. */
  agentConfig: Record<string, unknown>;
  /** The resume cursor stored on the session. */
  cursor: ResumeCursor;
  /**
   * The recap of the session so far, from mooring's own log, within the session's
   * `agentConfig.carryOverChars` (domain/carry-over.ts): a driver that must start its agent's
   * conversation over sends it ahead of the first prompt there. Null when there is nothing to
   * carry or carry-over is off; never rejects. Absent: no recap (driver tests).
   */
  carryOver?: () => Promise<CarryOver | null>;
  /**
   * For a fork's pending rewind: whether its source has had a turn after the fork point since the
   * fork was made (domain/fork-source.ts, forkSourceMovedOn). A driver that can only branch the source's
   * conversation whole asks it just before doing so. Absent: not a fork, or no database (driver tests).
   */
  forkSourceMovedOn?: () => Promise<boolean>;
  /**
   * The session's transcript store (claude-code: the CLI's transcript file kept in Postgres, so
   * another host can resume it; domain/transcripts.ts). Absent: none (driver tests, store off).
   */
  transcripts?: TranscriptStore;
  /** Gateway-wide settings drivers need. */
  settings: {
    contextWindow: number;
    upstreamSilentMs?: number;
    upstreamLimits?: UpstreamLimits;
    /** The gateway's clock (src/clock.ts) for the waits a driver times itself; real time when absent. */
    clock?: Clock;
  };
  log: Logger;
}

/**
 * One session's stored agent transcripts, chunks keyed by their byte offset in the agent's file.
 * Every method may reject (the database away): callers log it and go on as without a store.
 */
export interface TranscriptStore {
  /** The most bytes one transcript may have and still be stored (MOORING_TRANSCRIPT_MAX_BYTES). */
  readonly maxBytes: number;
  /** Where the stored copy of `agentSessionId`'s transcript ends; 0 when none is stored. */
  end(agentSessionId: string): Promise<number>;
  /** Store `bytes` found at `offset` of the file; a chunk already stored there is kept. */
  append(agentSessionId: string, offset: number, bytes: Buffer): Promise<void>;
  /** The stored chunks in file order. */
  chunks(agentSessionId: string): Promise<{ byteOffset: number; bytes: Buffer }[]>;
  /** Forget every stored transcript of the session but `keep`'s (null: all). */
  forget(keep: string | null): Promise<void>;
}

/**
 * Input a client adds to the running turn (steer; docs/api.md, Steering a running turn), stored
 * before the driver is handed it. A driver that can give the agent input mid-turn calls `take`
 * once, early in `runTurn`: `deliver` gets every input in order, exactly once (those that came
 * before `take` at once). The driver calls the returned `release` when its agent can take no more
 * for this turn (before `runTurn` settles); input that comes later is kept by the pipeline and sent
 * to the agent as a follow-up prompt within the same turn.
 */
export interface TurnInput {
  take(deliver: (text: string) => void): () => void;
}

/** Options of one turn. */
export interface RunTurnOptions {
  prompt: string;
  sink: TurnSink;
  /**
   * Aborted when the turn must stop (cancel, deadline, shutdown). The driver should stop the agent
   * gracefully and settle the returned promise promptly; the pipeline calls `close("kill")` if it
   * does not within a few seconds.
   */
  signal: AbortSignal;
  /** The task this turn runs for (its id and attempt): a chained turn's idempotency key upstream. */
  turn?: { taskId: string; attempt: number };
  /** Steered input for this turn (drivers with `steer: true`); absent in driver tests without it. */
  input?: TurnInput;
}

/** One live conversation with an agent, possibly backed by a warm process. */
export interface AgentConversation {
  /**
   * Run one turn. Resolves with the outcome; rejects with `AgentFailure` (any other error is
   * treated as `AGENT_CRASHED`). When `signal` aborted, resolve with stopReason `cancelled` or
   * reject with `AgentFailure("CANCELLED")`.
   */
  runTurn(options: RunTurnOptions): Promise<TurnOutcome>;
  /**
   * Stop the agent. `graceful` lets it save (idle reap, shutdown); `kill` is the last resort of a
   * cancel escalation. Idempotent; never throws.
   */
  close(mode: "graceful" | "kill"): Promise<void>;
  /** False once the underlying process died; the pipeline then opens a new conversation. */
  readonly alive: boolean;
}

/** A driver's verdict on a client's `agentConfig`; `field` (default `agentConfig`) is what the error names. */
export type ConfigValidation =
  | { ok: true; config: Record<string, unknown> }
  | { ok: false; problem: string; field?: string };

/** The gateway's rules a config is also held to (MOORING_AGENT_ENV_DENY: names no agent env may carry). */
export interface ConfigRules {
  agentEnvDeny?: readonly string[];
}

/** A kind of agent (`simulated`, `claude-code`, `acp`). */
export interface AgentDriver {
  readonly name: DriverName;
  /**
   * Validate a client's `agentConfig` for a session on `entry`. Returns the cleaned config or a
   * human-readable problem naming the offending field. Clients may only choose what the driver and
   * the entry allow; they can never name a program to run.
   */
  validateConfig(entry: AgentEntry, config: Record<string, unknown>, rules?: ConfigRules): ConfigValidation;
  /** Open a conversation. Must not block on the agent; starting the process may happen lazily in runTurn. */
  open(options: OpenConversationOptions): AgentConversation;
  /**
   * True when its agent takes input while a turn runs (`RunTurnOptions.input`). A steer of a turn
   * of any other driver answers STEER_NOT_SUPPORTED.
   */
  readonly steer?: boolean;
  /**
   * A turn of this driver ended `interrupted` without the driver seeing it end (its gateway was
   * killed): let go of whatever it left running elsewhere (the `mooring` driver cancels the
   * upstream task). Resolves true when done, false to be asked again later (unreachable).
   */
  abandon?(entry: AgentEntry, ref: string, log: Logger): Promise<boolean>;
}
