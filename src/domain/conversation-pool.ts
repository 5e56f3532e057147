/**
 * Warm agent conversations, one per session on this instance. A conversation stays open between
 * turns so the next turn skips the agent's start-up, and is reaped after MOORING_AGENT_IDLE_MS
 * without a turn (never during one); the next turn then resumes it from the session's cursor.
 *
 * A warm conversation is only reused while the session's stored cursor is still the one it last
 * saved: when another instance ran a turn of the session in between, its process knows nothing of
 * that turn (and two processes must never write one conversation), so it is closed and the turn
 * resumes from the stored cursor instead.
 */
import { type MetricsReporter, noMetrics } from "../metrics/reporter.js";
import type { Logger } from "pino";
import type {
  AgentConversation,
  AgentDriver,
  ResumeCursor,
  RunTurnOptions,
  TranscriptStore,
  UpstreamLimits,
} from "../agents/driver.js";
import { agentEnvironment } from "../agents/agent-env.js";
import { type CarryOver, carryOverCharsOf } from "../agents/carry-over.js";
import type { AgentEntry } from "../agents/registry.js";
import { storable } from "../agents/storable-text.js";
import type { SessionRow } from "./views.js";
import { resolveWorkspaceForSpawn } from "./workspace.js";
import type { Service } from "../lib/service.js";
import { type Clock, type ClockTimer, realClock } from "../clock.js";

/** What every agent launch is held to (MOORING_WORKSPACE_ROOTS normalized, MOORING_AGENT_ENV_DENY). */
export interface LaunchPolicy {
  workspaceRoots: readonly string[];
  /** The normalized roots of a session's tenant (domain/tenant-roots.ts); absent: none of their own. */
  tenantRoots?: (tenant: string) => Promise<readonly string[]>;
  agentEnvDeny: readonly string[];
  /**
   * The recap of a session from its log within `budget` characters (domain/carry-over.ts), for a
   * driver whose agent must start over; absent: no recap.
   */
  recap?: (sessionId: string, budget: number, log: Logger) => Promise<CarryOver | null>;
  /**
   * Whether a fork's source had a turn after the fork point (domain/fork-source.ts, forkSourceMovedOn),
   * for the fork's first turn; absent: never asked.
   */
  forkSourceMovedOn?: (forkedFrom: { sessionId: string; turnIndex: number }) => Promise<boolean>;
  /** A session's transcript store (domain/transcripts.ts); absent: none. */
  transcripts?: (sessionId: string) => TranscriptStore;
  /** MOORING_UPSTREAM_SILENT_MS, for chained turns (driver `mooring`). */
  upstreamSilentMs?: number;
  /** MOORING_UPSTREAM_MAX_* and MOORING_UPSTREAM_POLL_MIN_MS, for chained turns. */
  upstreamLimits?: UpstreamLimits;
  /** The gateway's clock: the idle reap and the drivers' own waits run on it. */
  clock?: Clock;
}

/** The cursor fields that identify where a conversation stands. */
type CursorMark = Pick<ResumeCursor, "agentSessionId" | "turnCount" | "lastAssistantMessageId">;

interface Warm {
  conversation: AgentConversation;
  /** What the pool hands out: the conversation, with its cursor saves observed. */
  handle: AgentConversation;
  /** The cursor this conversation saved last (or was opened with). */
  cursor: CursorMark;
  agent: string;
  workspace: string;
  busy: boolean;
  idleSince: number;
  idleTimer: ClockTimer | null;
  tokens: number | null;
  /** The session was archived while a turn ran: close when that turn ends. */
  closeWhenReleased: boolean;
}

export class ConversationPool implements Service {
  readonly name = "conversation pool";
  private readonly warm = new Map<string, Warm>();

  constructor(
    private readonly idleMs: number,
    private readonly contextWindow: number,
    private readonly log: Logger,
    private readonly launch: LaunchPolicy,
    private readonly metrics: Pick<MetricsReporter, "agentSpawned"> = noMetrics,
  ) {}

  private get clock(): Clock {
    return this.launch.clock ?? realClock;
  }

  /** The session's warm conversation, or a new one opened from its stored cursor. */
  acquire(
    session: SessionRow,
    entry: AgentEntry,
    driver: AgentDriver,
    /** Told how the conversation starts: warm (reused), resume (from the stored cursor) or new. */
    started?: (how: "warm" | "resume" | "new") => void,
  ): AgentConversation {
    const existing = this.warm.get(session.id);
    const usable =
      existing?.conversation.alive === true && !existing.busy && existing.agent === session.agent;
    // A pending rewind (fork, rollback) changes the conversation: a warm agent would not know it.
    if (existing && usable && sameCursor(existing.cursor, session) && !session.rewind) {
      if (existing.idleTimer) this.clock.clearTimeout(existing.idleTimer);
      existing.idleTimer = null;
      existing.busy = true;
      started?.("warm");
      return existing.handle;
    }
    if (existing && usable) {
      this.log.info(
        {
          sessionId: session.id,
          warmAgentSessionId: existing.cursor.agentSessionId,
          warmTurnCount: existing.cursor.turnCount,
          agentSessionId: session.agentSessionId,
          turnCount: session.turnCount,
        },
        "warm conversation is stale (the session moved on elsewhere); resuming from the stored cursor",
      );
      this.drop(session.id, "graceful");
    } else if (existing) {
      this.drop(session.id, "kill");
    }
    const log = this.log.child({ sessionId: session.id, agent: session.agent });
    const recap = this.launch.recap;
    const budget = carryOverCharsOf(session.agentConfig);
    const movedOn = this.launch.forkSourceMovedOn;
    const forkedFrom = session.forkedFrom;
    const conversation = driver.open({
      sessionId: session.id,
      workspace: session.workspace,
      // The tenant's roots as well as the global ones, at every start: checked only at create, a
      // path made a symlink into another tenant's root later would get an agent there.
      resolveWorkspace: async () =>
        resolveWorkspaceForSpawn(
          session.workspace,
          this.launch.workspaceRoots,
          (await this.launch.tenantRoots?.(session.tenant)) ?? [],
        ),
      env: agentEnvironment(entry, this.launch.agentEnvDeny),
      entry,
      agentConfig: session.agentConfig,
      cursor: {
        agentSessionId: session.agentSessionId,
        turnCount: session.turnCount,
        lastAssistantMessageId: session.lastAssistantMessageId,
        pastAgentSessionIds: session.pastAgentSessionIds,
        rewind: session.rewind ?? null,
      },
      carryOver: recap && budget > 0 ? () => recap(session.id, budget, log) : undefined,
      forkSourceMovedOn:
        movedOn && forkedFrom && session.rewind?.kind === "fork" ? () => movedOn(forkedFrom) : undefined,
      transcripts: this.launch.transcripts?.(session.id),
      settings: {
        contextWindow: this.contextWindow,
        upstreamSilentMs: this.launch.upstreamSilentMs,
        upstreamLimits: this.launch.upstreamLimits,
        clock: this.clock,
      },
      log,
    });
    const warm: Warm = {
      conversation,
      handle: conversation,
      cursor: {
        agentSessionId: session.agentSessionId,
        turnCount: session.turnCount,
        lastAssistantMessageId: session.lastAssistantMessageId,
      },
      agent: session.agent,
      workspace: session.workspace,
      busy: true,
      idleSince: 0,
      idleTimer: null,
      tokens: session.contextUsage?.inputTokens ?? null,
      closeWhenReleased: false,
    };
    this.metrics.agentSpawned(session.agent, session.agentSessionId ? "resume" : "new");
    started?.(session.agentSessionId ? "resume" : "new");
    warm.handle = observeCursor(conversation, warm, () =>
      this.metrics.agentSpawned(session.agent, "fresh_fallback"),
    );
    this.warm.set(session.id, warm);
    return warm.handle;
  }

  /** The turn is over. A dead or failed conversation is dropped; a healthy one waits, warm. */
  release(sessionId: string, healthy: boolean, tokens: number | null): void {
    const warm = this.warm.get(sessionId);
    if (!warm) return;
    warm.busy = false;
    if (tokens !== null) warm.tokens = tokens;
    if (this.stopped) {
      // A turn that ended after the pool stopped (it started while the gateway shut down): its
      // agent is not kept warm, or its reap timer would outlive the gateway.
      this.drop(sessionId, warm.conversation.alive ? "graceful" : "kill");
      return;
    }
    if (warm.closeWhenReleased) {
      this.log.info({ sessionId, workspace: warm.workspace }, "warm agent closed: session archived");
      this.drop(sessionId, warm.conversation.alive ? "graceful" : "kill");
      return;
    }
    if (!healthy || !warm.conversation.alive) {
      // A failed turn's agent may still be running: let it save (a killed Claude Code can leave a
      // torn transcript line). The next turn resumes from the cursor.
      this.drop(sessionId, warm.conversation.alive ? "graceful" : "kill");
      return;
    }
    warm.idleSince = this.clock.now();
    warm.idleTimer = this.clock.setTimeout(() => this.reap(sessionId), this.idleMs);
    warm.idleTimer.unref();
  }

  private reap(sessionId: string): void {
    const warm = this.warm.get(sessionId);
    if (!warm || warm.busy) return;
    this.log.info(
      {
        sessionId,
        workspace: warm.workspace,
        idleMs: this.clock.now() - warm.idleSince,
        tokens: warm.tokens,
      },
      "idle reap",
    );
    this.drop(sessionId, "graceful");
  }

  private drop(sessionId: string, mode: "graceful" | "kill"): void {
    const warm = this.warm.get(sessionId);
    if (!warm) return;
    this.warm.delete(sessionId);
    if (warm.idleTimer) this.clock.clearTimeout(warm.idleTimer);
    void warm.conversation.close(mode).catch(() => {});
  }

  /** Close a session's conversation (archive, or a kill after a cancel escalation). */
  close(sessionId: string, mode: "graceful" | "kill"): void {
    this.drop(sessionId, mode);
  }

  /** Archive: an idle warm agent goes now; a busy one is closed when its (cancelled) turn ends. */
  /**
   * The session was archived (here or on another instance): close its warm agent now if idle,
   * else when its turn (being cancelled by the archive) ends.
   */
  closeArchived(sessionId: string): void {
    const warm = this.warm.get(sessionId);
    if (!warm) return;
    if (warm.busy) {
      warm.closeWhenReleased = true;
      return;
    }
    this.log.info({ sessionId, workspace: warm.workspace }, "warm agent closed: session archived");
    this.drop(sessionId, "graceful");
  }

  /** Set by stop: a turn released later closes its agent instead of keeping it warm. */
  private stopped = false;

  /** Agents are spawned on demand: nothing to begin. */
  start(): void {}

  /** Shutdown: close every conversation so agents can save. */
  async stop(): Promise<void> {
    this.stopped = true;
    const all = [...this.warm.values()];
    this.warm.clear();
    await Promise.all(
      all.map((w) => {
        if (w.idleTimer) this.clock.clearTimeout(w.idleTimer);
        return w.conversation.close("graceful").catch(() => {});
      }),
    );
  }

  get size(): number {
    return this.warm.size;
  }

  /** Live agent processes by agent name (mooring_agent_processes). */
  processesByAgent(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const w of this.warm.values()) {
      if (w.conversation.alive) counts.set(w.agent, (counts.get(w.agent) ?? 0) + 1);
    }
    return counts;
  }
}

function sameCursor(a: CursorMark, session: SessionRow): boolean {
  return (
    a.agentSessionId === session.agentSessionId &&
    a.turnCount === session.turnCount &&
    a.lastAssistantMessageId === session.lastAssistantMessageId
  );
}

/** The conversation, remembering every cursor it saves so the pool knows where it stands. */
function observeCursor(
  conversation: AgentConversation,
  warm: Warm,
  freshFallback: () => void,
): AgentConversation {
  return {
    runTurn: (options: RunTurnOptions) =>
      conversation.runTurn({
        ...options,
        sink: {
          emit: (event) => {
            // The agent could not resume the stored conversation and started a fresh one.
            if (event.type === "session.reset" && event.reason === "resume_failed") freshFallback();
            options.sink.emit(event);
          },
          drained: options.sink.drained && (() => options.sink.drained!()),
          requestPermission:
            options.sink.requestPermission && ((ask) => options.sink.requestPermission!(ask)),
          saveCursor: (saved) => {
            // As it is stored (the worker's sink makes it storable), so it compares equal later.
            const cursor = storable(saved);
            warm.cursor = {
              agentSessionId: cursor.agentSessionId,
              turnCount: cursor.turnCount,
              lastAssistantMessageId: cursor.lastAssistantMessageId,
            };
            return options.sink.saveCursor(cursor);
          },
        },
      }),
    close: (mode) => conversation.close(mode),
    get alive() {
      return conversation.alive;
    },
  };
}
