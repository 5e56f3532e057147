/**
 * Test plumbing for the acp driver: a registry entry that runs test/support/acp-agent.ts, a sink
 * and a logger that record what they get and let a test await a particular item, and cleanup of
 * every conversation and temp dir a test opened.
 */
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import pino from "pino";
import { acpDriver } from "../../src/agents/acp/driver.js";
import {
  type AgentConversation,
  type AgentEvent,
  emptyCursor,
  type ResumeCursor,
  type TurnSink,
} from "../../src/agents/driver.js";
import { agentEnvironment } from "../../src/agents/agent-env.js";
import type { AgentEntry } from "../../src/agents/registry.js";
import { resolveWorkspaceForSpawn } from "../../src/domain/workspace.js";
import { Recorded } from "./recorded.js";

const agentScript = fileURLToPath(new URL("./acp-agent.ts", import.meta.url));
// An absolute loader URL: the agent runs in a temp workspace where `tsx` would not resolve.
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

export function testAgentEntry(overrides: Partial<AgentEntry> = {}): AgentEntry {
  return {
    name: "acp-test",
    driver: "acp",
    command: process.execPath,
    args: ["--import", tsxLoader, agentScript],
    env: {},
    permissions: "deny",
    ...overrides,
  };
}

export class RecordingSink implements TurnSink {
  readonly events = new Recorded<AgentEvent>();
  readonly cursors = new Recorded<ResumeCursor>();

  emit(event: AgentEvent): void {
    this.events.push(event);
  }

  async saveCursor(cursor: ResumeCursor): Promise<void> {
    this.cursors.push(structuredClone(cursor));
  }

  get lastCursor(): ResumeCursor | undefined {
    return this.cursors.items.at(-1);
  }

  ofType<T extends AgentEvent["type"]>(type: T): Extract<AgentEvent, { type: T }>[] {
    return this.events.items.filter((e): e is Extract<AgentEvent, { type: T }> => e.type === type);
  }
}

export type LogLine = { level: number; msg: string } & Record<string, unknown>;

export function memoryLogger() {
  const lines = new Recorded<LogLine>();
  const log = pino({ level: "debug" }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { log, lines };
}

interface OpenOptions {
  entry?: AgentEntry;
  workspace?: string;
  cursor?: ResumeCursor;
  agentConfig?: Record<string, unknown>;
}

/** Opens conversations on the test agent and undoes everything in `cleanup`. */
export class AcpHarness {
  readonly logger = memoryLogger();
  private readonly conversations: AgentConversation[] = [];
  private readonly dirs: string[] = [];

  async tempDir(prefix: string): Promise<string> {
    const dir = await realpath(await mkdtemp(join(tmpdir(), `mooring-acp-${prefix}-`)));
    this.dirs.push(dir);
    return dir;
  }

  async open(options: OpenOptions = {}): Promise<AgentConversation> {
    const workspace = options.workspace ?? (await this.tempDir("ws"));
    const entry = options.entry ?? testAgentEntry();
    const conversation = acpDriver.open({
      sessionId: "session-under-test",
      workspace,
      resolveWorkspace: () => resolveWorkspaceForSpawn(workspace, []),
      env: agentEnvironment(entry, []),
      entry,
      agentConfig: options.agentConfig ?? {},
      cursor: options.cursor ?? emptyCursor(),
      settings: { contextWindow: 200_000 },
      log: this.logger.log,
    });
    this.conversations.push(conversation);
    return conversation;
  }

  logs(msg: string): LogLine[] {
    return this.logger.lines.items.filter((line) => line.msg === msg);
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.conversations.map((c) => c.close("kill")));
    await Promise.all(this.dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  }
}

/** A turn that nothing cancels. */
export const noAbort = (): AbortSignal => new AbortController().signal;
