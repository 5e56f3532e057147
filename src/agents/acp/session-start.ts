/**
 * Opening the ACP session a conversation runs in: `initialize`, then `session/load` of the
 * session's saved agent session when the agent can load one, otherwise (or when loading fails)
 * `session/new` (docs/api.md, Restarts, resume and recovery, resume failure → one fresh start).
 */
import type { ClientConnection, InitializeResponse } from "@agentclientprotocol/sdk";
import type {
  ForkSessionRequest,
  ForkSessionResponse,
  SessionCapabilities as UnstableSessionCapabilities,
} from "@agentclientprotocol/sdk/unstable";
import type { Logger } from "pino";
import { type CarryOver, carriedOverField, noticeWithCarryOver } from "../carry-over.js";
import { AgentFailure, type ResetReason, type ResumeCursor, type TurnSink } from "../driver.js";
import { drainReceived, initializeRequest } from "./connection.js";
import { type McpServer, unsupportedTransports } from "./mcp-servers.js";
import { type AgentProcess, describeExit } from "./process.js";
import { EXIT_SETTLE_MS, StepFailure, step } from "./step.js";

export const RESUME_FAILED_NOTICE = "Session context was too large to resume — starting fresh.";
export const CANNOT_RESUME_NOTICE =
  "This agent cannot reload earlier conversations, so its previous context was lost — starting fresh.";

export const FORK_NOTICE = "This fork starts a fresh agent conversation.";
export const ROLLBACK_NOTICE = "After the rollback, this conversation starts a fresh agent conversation.";

/** Agents that boot slowly (npx, containers) still answer within this; a hung one does not. */
const START_STEP_TIMEOUT_MS = 60_000;

export interface StartContext {
  agentName: string;
  workspace: string;
  /** The session's `agentConfig.mcpServers`: sent with every session/new and session/load. */
  mcpServers: McpServer[];
  conn: ClientConnection;
  proc: AgentProcess;
  cursor: ResumeCursor;
  sink: TurnSink;
  signal: AbortSignal;
  log: Logger;
  /** The session's recap for a fresh start (OpenConversationOptions.carryOver). */
  carryOver?: () => Promise<CarryOver | null>;
  /** For a fork: whether its source moved past the fork point (OpenConversationOptions.forkSourceMovedOn). */
  forkSourceMovedOn?: () => Promise<boolean>;
}

export interface StartedSession {
  agentSessionId: string;
  /** The cursor to continue from: the given one, or a cleared one after a fresh start. */
  cursor: ResumeCursor;
  /** After a fresh start: the recap to send ahead of the first prompt. */
  recap?: CarryOver | null;
}

export async function startAgentSession(ctx: StartContext): Promise<StartedSession> {
  const { conn, proc, signal } = ctx;
  const ask = <T>(request: Promise<T>) => step(request, proc, { signal, timeoutMs: START_STEP_TIMEOUT_MS });

  const init = await ask(conn.agent.request("initialize", initializeRequest)).catch(async (err) => {
    throw await startFailure(ctx, "initialize", err);
  });
  // Never dropped silently: an agent that cannot take a server's transport does not start.
  const unsupported = unsupportedTransports(ctx.mcpServers, init.agentCapabilities?.mcpCapabilities);
  if (unsupported.length > 0) {
    throw new AgentFailure(
      "AGENT_START_FAILED",
      `The agent "${ctx.agentName}" does not accept ${unsupported.join(" or ")} MCP servers (agentConfig.mcpServers).`,
    );
  }
  const canLoad = init.agentCapabilities?.loadSession === true;
  const rewind = ctx.cursor.rewind;
  // A fork at the source's newest agent state, of an agent that can fork (docs/acp.md, Fork and
  // rollback): `session/fork` copies that conversation whole. It cannot cut one at a message, so a
  // fork at an earlier turn, a fork whose source has moved on since, or a rollback, takes the
  // recap below.
  if (
    rewind?.kind === "fork" &&
    rewind.atSourceHead === true &&
    rewind.agentSessionId &&
    canFork(init.agentCapabilities) &&
    !(await sourceMovedOn(ctx))
  ) {
    const forked = await nativeFork(ctx, ask, rewind.agentSessionId);
    if (forked) return forked;
  }
  // A fork or rollback (docs/api.md, Fork and rollback): a fresh session with the carried history
  // (the session's own log, rolled-back turns left out) stands in for the branch.
  if (rewind) {
    ctx.log.info(
      { agentSessionId: ctx.cursor.agentSessionId, kind: rewind.kind },
      "fork or rollback: starting fresh with the carried history",
    );
    return freshStart(ctx, ask, rewind.kind === "fork" ? FORK_NOTICE : ROLLBACK_NOTICE, rewind.kind);
  }
  const previous = ctx.cursor.agentSessionId;
  if (previous === null) return { agentSessionId: await newSession(ctx, ask), cursor: ctx.cursor };

  if (!canLoad) {
    ctx.log.warn(
      { agentSessionId: previous, cwd: ctx.workspace },
      "agent cannot load sessions; starting fresh",
    );
    return freshStart(ctx, ask, CANNOT_RESUME_NOTICE);
  }

  ctx.log.info({ agentSessionId: previous, cwd: ctx.workspace }, "resuming agent session");
  try {
    await ask(
      conn.agent.request("session/load", {
        sessionId: previous,
        cwd: ctx.workspace,
        mcpServers: ctx.mcpServers,
      }),
    );
  } catch (err) {
    // Only the agent's own "cannot load that" justifies dropping the conversation; a cancelled
    // turn (shutdown) or a dead agent keeps the cursor for the next attempt.
    if (!(err instanceof StepFailure) || err.kind !== "error")
      throw await startFailure(ctx, "session/load", err);
    ctx.log.error(
      {
        agentSessionId: previous,
        err: err.message,
        code: (err.cause as { code?: unknown })?.code,
        cwd: ctx.workspace,
      },
      "agent session resume failed; starting fresh",
    );
    return freshStart(ctx, ask, RESUME_FAILED_NOTICE);
  }
  // The agent replays its history as session/update before answering; let it pass unrecorded.
  await drainReceived();
  ctx.log.info({ agentSessionId: previous }, "agent session resumed");
  return { agentSessionId: previous, cursor: ctx.cursor };
}

type Ask = <T>(request: Promise<T>) => Promise<T>;

/**
 * Asked last, just before `session/fork`, so that a source turn started while this agent was
 * starting still counts. A failed read counts as moved on: the recap is always right, a whole
 * copy only while the source still ends at the fork point.
 */
async function sourceMovedOn(ctx: StartContext): Promise<boolean> {
  if (!ctx.forkSourceMovedOn) return false;
  const moved = await ctx.forkSourceMovedOn().catch((err: unknown) => {
    ctx.log.warn(
      { err: err instanceof Error ? err.message : String(err) },
      "could not check the fork's source; starting fresh with the carried history",
    );
    return true;
  });
  if (moved) ctx.log.info("the fork's source moved past the fork point; not forking its agent session");
  return moved;
}

/** ACP's `sessionCapabilities.fork` (unstable in the SDK's schema, so read off the raw answer). */
function canFork(capabilities: InitializeResponse["agentCapabilities"]): boolean {
  const session = capabilities?.sessionCapabilities as UnstableSessionCapabilities | null | undefined;
  return session?.fork !== undefined && session.fork !== null;
}

/**
 * `session/fork` of the source's agent conversation: the fork's own, holding the source's history,
 * with no recap and no `session.reset`. Null when the agent answered with an error (it could not
 * fork that conversation): the caller starts fresh with the carried history instead.
 */
async function nativeFork(
  ctx: StartContext,
  ask: Ask,
  sourceAgentSessionId: string,
): Promise<StartedSession | null> {
  let forked: ForkSessionResponse;
  try {
    forked = await ask(
      ctx.conn.agent.request<ForkSessionResponse, ForkSessionRequest>("session/fork", {
        sessionId: sourceAgentSessionId,
        cwd: ctx.workspace,
        mcpServers: ctx.mcpServers,
      }),
    );
  } catch (err) {
    if (!(err instanceof StepFailure) || err.kind !== "error")
      throw await startFailure(ctx, "session/fork", err);
    ctx.log.warn(
      {
        fromAgentSessionId: sourceAgentSessionId,
        err: err.message,
        code: (err.cause as { code?: unknown })?.code,
      },
      "agent session fork failed; starting fresh with the carried history",
    );
    return null;
  }
  await drainReceived();
  const old = ctx.cursor;
  const cursor: ResumeCursor = {
    agentSessionId: forked.sessionId,
    turnCount: old.turnCount,
    lastAssistantMessageId: old.rewind?.messageId ?? null,
    pastAgentSessionIds: old.agentSessionId
      ? [...old.pastAgentSessionIds, old.agentSessionId]
      : old.pastAgentSessionIds,
  };
  // Saved without the rewind: the branch is made (a turn that dies now resumes the fork's own).
  await ctx.sink.saveCursor(cursor);
  ctx.log.info(
    { fromAgentSessionId: sourceAgentSessionId, agentSessionId: forked.sessionId, cwd: ctx.workspace },
    "agent session forked",
  );
  return { agentSessionId: forked.sessionId, cursor };
}

async function freshStart(
  ctx: StartContext,
  ask: Ask,
  notice: string,
  reason: ResetReason = "resume_failed",
): Promise<StartedSession> {
  const old = ctx.cursor;
  // The turn count carries over (as with claude-code): it counts the session's turns, and a
  // client would not expect it to drop because the agent's conversation was replaced.
  const cleared: ResumeCursor = {
    agentSessionId: null,
    turnCount: old.turnCount,
    lastAssistantMessageId: null,
    pastAgentSessionIds: old.agentSessionId
      ? [...old.pastAgentSessionIds, old.agentSessionId]
      : old.pastAgentSessionIds,
  };
  // The old conversation is known to be unusable: forget it even if the fresh start fails too.
  await ctx.sink.saveCursor(cleared);
  const agentSessionId = await newSession(ctx, ask);
  const recap = (await ctx.carryOver?.()) ?? null;
  ctx.log.warn(
    {
      oldAgentSessionId: old.agentSessionId,
      newAgentSessionId: agentSessionId,
      agentSessionId,
      cwd: ctx.workspace,
      carriedOverTurns: recap?.turns ?? 0,
      carriedOverChars: recap?.chars ?? 0,
    },
    "fresh agent session started",
  );
  ctx.sink.emit({
    type: "session.reset",
    reason,
    notice: noticeWithCarryOver(notice, recap),
    ...carriedOverField(recap),
  });
  return { agentSessionId, cursor: cleared, recap };
}

async function newSession(ctx: StartContext, ask: Ask): Promise<string> {
  try {
    const created = await ask(
      ctx.conn.agent.request("session/new", { cwd: ctx.workspace, mcpServers: ctx.mcpServers }),
    );
    await drainReceived();
    return created.sessionId;
  } catch (err) {
    throw await startFailure(ctx, "session/new", err);
  }
}

async function startFailure(ctx: StartContext, what: string, err: unknown): Promise<AgentFailure> {
  if (err instanceof StepFailure && err.kind === "aborted") {
    return new AgentFailure("CANCELLED", "The turn was cancelled while the agent was starting.");
  }
  const exit =
    err instanceof StepFailure && err.kind === "broken" ? await ctx.proc.waitForExit(EXIT_SETTLE_MS) : null;
  const why = exit
    ? describeExit(exit)
    : `${what} failed: ${err instanceof Error ? err.message : String(err)}`;
  ctx.log.error(
    { step: what, err: err instanceof Error ? err.message : String(err), stderr: ctx.proc.stderrTail() },
    "agent failed to start",
  );
  return new AgentFailure("AGENT_START_FAILED", `The agent "${ctx.agentName}" could not start: ${why}.`);
}
