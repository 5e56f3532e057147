/**
 * The conversation pool's rules, with a scripted driver: when a warm conversation is reused, when
 * it is replaced, how it is closed, and what the idle reap logs.
 */
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type {
  AgentConversation,
  AgentDriver,
  OpenConversationOptions,
  ResumeCursor,
  RunTurnOptions,
  TurnOutcome,
} from "../../src/agents/driver.js";
import type { AgentEntry } from "../../src/agents/registry.js";
import { ConversationPool, type LaunchPolicy } from "../../src/domain/conversation-pool.js";
import type { SessionRow } from "../../src/domain/views.js";
import { LogRecorder } from "../support/agent-gateway.js";

class ScriptedConversation implements AgentConversation {
  alive = true;
  readonly closes: string[] = [];
  /** The cursor the next turn saves. */
  next: ResumeCursor | null = null;

  constructor(readonly options: OpenConversationOptions) {}

  async runTurn({ sink }: RunTurnOptions): Promise<TurnOutcome> {
    if (this.next) await sink.saveCursor(this.next);
    return { text: "ok", stopReason: "end_turn", usage: null };
  }

  async close(mode: "graceful" | "kill"): Promise<void> {
    this.closes.push(mode);
    this.alive = false;
  }
}

const launch: LaunchPolicy = { workspaceRoots: [], agentEnvDeny: [] };
const opened: ScriptedConversation[] = [];
const driver: AgentDriver = {
  name: "simulated",
  validateConfig: (_entry, config) => ({ ok: true, config }),
  open: (options) => {
    const conversation = new ScriptedConversation(options);
    opened.push(conversation);
    return conversation;
  },
};
const entry: AgentEntry = { name: "scripted", driver: "simulated", args: [], env: {}, permissions: "deny" };
const sink = { emit: () => {}, saveCursor: async () => {} };
const signal = new AbortController().signal;

function row(cursor: Partial<SessionRow> = {}): SessionRow {
  const now = new Date();
  return {
    id: "00000000-0000-4000-8000-000000000001",
    tenant: "default",
    instanceGroup: "default",
    workspace: "/srv/ws",
    checkpoints: true,
    agent: "scripted",
    agentConfig: {},
    title: null,
    metadata: {},
    idempotencyKey: null,
    archivedAt: null,
    agentSessionId: null,
    turnCount: 0,
    lastAssistantMessageId: null,
    pastAgentSessionIds: [],
    forkedFrom: null,
    rewind: null,
    contextUsage: null,
    lastSeq: 0,
    prunedSeq: 0,
    nextTurnIndex: 0,
    version: 0,
    createdAt: now,
    updatedAt: now,
    lastActivityAt: now,
    status: "busy",
    ...cursor,
  };
}

const saved: ResumeCursor = {
  agentSessionId: "conv-1",
  turnCount: 1,
  lastAssistantMessageId: "m-1",
  pastAgentSessionIds: [],
};

let pool: ConversationPool;
afterEach(async () => {
  await pool?.stop();
  opened.length = 0;
});

describe("conversation pool", () => {
  it("reuses the warm conversation while the stored cursor is the one it saved", async () => {
    pool = new ConversationPool(60_000, 200_000, pino({ level: "silent" }), launch);
    const first = pool.acquire(row(), entry, driver);
    opened[0].next = saved;
    await first.runTurn({ prompt: "one", sink, signal });
    pool.release(row().id, true, null);

    const second = pool.acquire(row(saved), entry, driver);

    expect(opened).toHaveLength(1);
    expect(second.alive).toBe(true);
    expect(opened[0].closes).toEqual([]);
  });

  it("replaces a warm conversation whose session moved on elsewhere, resuming from the stored cursor", async () => {
    const logs = new LogRecorder();
    pool = new ConversationPool(
      60_000,
      200_000,
      pino({ level: "info" }, { write: (l: string) => logs.push(JSON.parse(l)) }),
      launch,
    );
    const first = pool.acquire(row(), entry, driver);
    opened[0].next = saved;
    await first.runTurn({ prompt: "one", sink, signal });
    pool.release(row().id, true, null);

    // Another instance ran turn 2 of this session meanwhile.
    const moved = { agentSessionId: "conv-1", turnCount: 2, lastAssistantMessageId: "m-2" };
    pool.acquire(row(moved), entry, driver);

    expect(opened).toHaveLength(2);
    expect(opened[0].closes).toEqual(["graceful"]);
    expect(opened[1].options.cursor).toMatchObject(moved);
    expect(
      logs.named(
        "warm conversation is stale (the session moved on elsewhere); resuming from the stored cursor",
      ),
    ).toEqual([expect.objectContaining({ warmTurnCount: 1, turnCount: 2 })]);
  });

  it("closes a failed turn's live agent gracefully and a dead one by kill", async () => {
    pool = new ConversationPool(60_000, 200_000, pino({ level: "silent" }), launch);
    pool.acquire(row(), entry, driver);
    pool.release(row().id, false, null);
    expect(opened[0].closes).toEqual(["graceful"]);

    pool.acquire(row(), entry, driver);
    opened[1].alive = false;
    pool.release(row().id, false, null);
    expect(opened[1].closes).toEqual(["kill"]);
  });

  it("reaps an idle conversation and logs the session, workspace, idle time and tokens", async () => {
    const logs = new LogRecorder();
    pool = new ConversationPool(
      50,
      200_000,
      pino({ level: "info" }, { write: (l: string) => logs.push(JSON.parse(l)) }),
      launch,
    );
    pool.acquire(row(), entry, driver);
    pool.release(row().id, true, 4321);

    const reap = await logs.next("idle reap");

    expect(reap).toMatchObject({ sessionId: row().id, workspace: "/srv/ws", tokens: 4321 });
    expect(reap.idleMs).toBeGreaterThanOrEqual(45);
    expect(opened[0].closes).toEqual(["graceful"]);
    expect(pool.size).toBe(0);
  });
});
