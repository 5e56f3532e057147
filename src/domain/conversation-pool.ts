/**
 * Warm agent conversations, one per session on this instance. A conversation stays open between
 * turns so the next turn skips the agent's start-up, and is reaped after MOORING_AGENT_IDLE_MS
 * without a turn (never during one); the next turn then resumes it from the session's cursor.
 */
import type { Logger } from "pino";
import type { AgentConversation, AgentDriver } from "../agents/driver.js";
import type { AgentEntry } from "../agents/registry.js";
import type { SessionRow } from "./views.js";

interface Warm {
  conversation: AgentConversation;
  agent: string;
  workspace: string;
  busy: boolean;
  idleSince: number;
  idleTimer: NodeJS.Timeout | null;
  tokens: number | null;
}

export class ConversationPool {
  private readonly warm = new Map<string, Warm>();

  constructor(
    private readonly idleMs: number,
    private readonly contextWindow: number,
    private readonly log: Logger,
  ) {}

  /** The session's warm conversation, or a new one opened from its stored cursor. */
  acquire(session: SessionRow, entry: AgentEntry, driver: AgentDriver): AgentConversation {
    const existing = this.warm.get(session.id);
    if (existing && existing.conversation.alive && !existing.busy && existing.agent === session.agent) {
      if (existing.idleTimer) clearTimeout(existing.idleTimer);
      existing.idleTimer = null;
      existing.busy = true;
      return existing.conversation;
    }
    if (existing) this.drop(session.id, "kill");
    const conversation = driver.open({
      sessionId: session.id,
      workspace: session.workspace,
      entry,
      agentConfig: session.agentConfig,
      cursor: {
        agentSessionId: session.agentSessionId,
        turnCount: session.turnCount,
        lastAssistantMessageId: session.lastAssistantMessageId,
        pastAgentSessionIds: session.pastAgentSessionIds,
      },
      settings: { contextWindow: this.contextWindow },
      log: this.log.child({ sessionId: session.id, agent: session.agent }),
    });
    this.warm.set(session.id, {
      conversation,
      agent: session.agent,
      workspace: session.workspace,
      busy: true,
      idleSince: 0,
      idleTimer: null,
      tokens: session.contextUsage?.inputTokens ?? null,
    });
    return conversation;
  }

  /** The turn is over. A dead or failed conversation is dropped; a healthy one waits, warm. */
  release(sessionId: string, healthy: boolean, tokens: number | null): void {
    const warm = this.warm.get(sessionId);
    if (!warm) return;
    warm.busy = false;
    if (tokens !== null) warm.tokens = tokens;
    if (!healthy || !warm.conversation.alive) {
      this.drop(sessionId, healthy ? "graceful" : "kill");
      return;
    }
    warm.idleSince = Date.now();
    warm.idleTimer = setTimeout(() => this.reap(sessionId), this.idleMs);
    warm.idleTimer.unref();
  }

  private reap(sessionId: string): void {
    const warm = this.warm.get(sessionId);
    if (!warm || warm.busy) return;
    this.log.info(
      { sessionId, workspace: warm.workspace, idleMs: Date.now() - warm.idleSince, tokens: warm.tokens },
      "idle reap",
    );
    this.drop(sessionId, "graceful");
  }

  private drop(sessionId: string, mode: "graceful" | "kill"): void {
    const warm = this.warm.get(sessionId);
    if (!warm) return;
    this.warm.delete(sessionId);
    if (warm.idleTimer) clearTimeout(warm.idleTimer);
    void warm.conversation.close(mode).catch(() => {});
  }

  /** Close a session's conversation (archive, or a kill after a cancel escalation). */
  close(sessionId: string, mode: "graceful" | "kill"): void {
    this.drop(sessionId, mode);
  }

  /** Shutdown: close every conversation so agents can save. */
  async closeAll(): Promise<void> {
    const all = [...this.warm.values()];
    this.warm.clear();
    await Promise.all(
      all.map((w) => {
        if (w.idleTimer) clearTimeout(w.idleTimer);
        return w.conversation.close("graceful").catch(() => {});
      }),
    );
  }

  get size(): number {
    return this.warm.size;
  }
}
