/**
 * The claude-code driver against the real Claude Code CLI (node_modules/.bin/claude), talking to a
 * loopback fake of the Anthropic API.
 */
import { randomUUID } from "node:crypto";
import { existsSync, realpathSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { resumeFailedNotice, unsavedNotice } from "../../../src/agents/claude-code/conversation.js";
import { claudeCodeDriver } from "../../../src/agents/claude-code/driver.js";
import { expectedTranscriptPath } from "../../../src/agents/claude-code/transcript.js";
import {
  type AgentConversation,
  type AgentEvent,
  AgentFailure,
  emptyCursor,
  type ResumeCursor,
  type TurnSink,
} from "../../../src/agents/driver.js";
import { agentEnvironment } from "../../../src/agents/agent-env.js";
import type { AgentEntry } from "../../../src/agents/registry.js";
import { resolveWorkspaceForSpawn } from "../../../src/domain/workspace.js";
import { type FakeAnthropic, startFakeAnthropic } from "../../support/fake-anthropic.js";

const claudeBin = fileURLToPath(new URL("../../../node_modules/.bin/claude", import.meta.url));

type EventOf<T extends AgentEvent["type"]> = Extract<AgentEvent, { type: T }>;

/** Records what a turn reports, as the pipeline would persist it. */
class RecordingSink implements TurnSink {
  readonly events: AgentEvent[] = [];
  /** Every saved cursor, with how many conversation calls the fake had seen when it was saved. */
  readonly saves: { cursor: ResumeCursor; requestsSeen: number }[] = [];
  private waiters: { type: AgentEvent["type"]; resolve: (e: AgentEvent) => void }[] = [];

  constructor(private readonly fake: FakeAnthropic) {}

  emit(event: AgentEvent): void {
    this.events.push(event);
    for (const waiter of this.waiters.filter((w) => w.type === event.type)) waiter.resolve(event);
    this.waiters = this.waiters.filter((w) => w.type !== event.type);
  }

  async saveCursor(cursor: ResumeCursor): Promise<void> {
    this.saves.push({ cursor: structuredClone(cursor), requestsSeen: this.fake.mainRequests().length });
  }

  get cursor(): ResumeCursor {
    const last = this.saves[this.saves.length - 1];
    if (!last) throw new Error("no cursor was saved");
    return last.cursor;
  }

  of<T extends AgentEvent["type"]>(type: T): EventOf<T>[] {
    return this.events.filter((e): e is EventOf<T> => e.type === type);
  }

  next(type: AgentEvent["type"]): Promise<AgentEvent> {
    return new Promise((resolve) => this.waiters.push({ type, resolve }));
  }
}

let fake: FakeAnthropic;
let root: string;
let configDir: string;
let workspace: string;
let logs: Record<string, any>[];
const opened: AgentConversation[] = [];

beforeAll(async () => {
  fake = await startFakeAnthropic();
});

afterAll(async () => {
  await fake.close();
});

beforeEach(async () => {
  fake.respond(() => undefined);
  root = realpathSync(await mkdtemp(join(tmpdir(), "mooring-claude-")));
  configDir = join(root, "config");
  workspace = join(root, "ws");
  await mkdir(workspace, { recursive: true });
  logs = [];
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close("kill")));
  await rm(root, { recursive: true, force: true });
});

function entry(overrides: Partial<AgentEntry> = {}): AgentEntry {
  return {
    name: "claude-code",
    driver: "claude-code",
    command: claudeBin,
    args: [],
    env: { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "sk-test-fake", CLAUDE_CONFIG_DIR: configDir },
    permissions: "deny",
    ...overrides,
  };
}

function open(
  cursor: ResumeCursor,
  options: {
    workspace?: string;
    entry?: AgentEntry;
    agentConfig?: Record<string, unknown>;
    roots?: string[];
  } = {},
) {
  const capture = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) logs.push(JSON.parse(line));
      done();
    },
  });
  const folder = options.workspace ?? workspace;
  const chosen = options.entry ?? entry();
  const conversation = claudeCodeDriver.open({
    sessionId: "sess-test",
    workspace: folder,
    resolveWorkspace: () => resolveWorkspaceForSpawn(folder, options.roots ?? []),
    env: agentEnvironment(chosen, []),
    entry: chosen,
    agentConfig: options.agentConfig ?? {},
    cursor,
    settings: { contextWindow: 200_000 },
    log: pino({ level: "debug" }, capture),
  });
  opened.push(conversation);
  return conversation;
}

const pidOf = (conversation: AgentConversation) =>
  (conversation as unknown as { pid: number | undefined }).pid;

function run(conversation: AgentConversation, prompt: string, sink: RecordingSink, signal?: AbortSignal) {
  return conversation.runTurn({ prompt, sink, signal: signal ?? new AbortController().signal });
}

/** Main conversation calls the fake answered for one prompt. */
const callsFor = (prompt: string) => fake.mainRequests().filter((r) => r.lastUserText === prompt);

const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("claude-code driver with the real CLI", () => {
  it("streams a turn's text and reports usage, saving the cursor before the prompt is sent", async () => {
    fake.respond((r) =>
      r.lastUserText === "say hello"
        ? {
            text: "Hello there from the fake API",
            inputTokens: 40_000,
            cacheCreationInputTokens: 6_000,
            cacheReadInputTokens: 4_000,
            outputTokens: 12,
          }
        : undefined,
    );
    const requestsBefore = fake.mainRequests().length;
    const sink = new RecordingSink(fake);
    const conversation = open(emptyCursor(), { agentConfig: { contextSuffix: true } });

    const outcome = await run(conversation, "say hello", sink);

    // The `[ctx: NN%]` suffix is the pipeline's job (TurnState), not the driver's: no double suffix.
    expect(outcome.text).toBe("Hello there from the fake API");
    expect(outcome.stopReason).toBe("end_turn");
    expect(outcome.usage).toMatchObject({
      inputTokens: 40_000,
      cacheCreationInputTokens: 6_000,
      cacheReadInputTokens: 4_000,
      outputTokens: 12,
      model: expect.stringMatching(/.+/),
    });
    const deltas = sink.of("message.delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((d) => d.text).join("")).toBe("Hello there from the fake API");
    const [message] = sink.of("message");
    expect(message).toMatchObject({ text: "Hello there from the fake API", messageId: expect.any(String) });
    expect(sink.of("usage")).toEqual([{ type: "usage", usage: outcome.usage }]);
    expect(sink.events.indexOf(message)).toBeGreaterThan(sink.events.indexOf(deltas[deltas.length - 1]));

    const first = sink.saves[0];
    expect(first.cursor).toMatchObject({ turnCount: 1, lastAssistantMessageId: null });
    expect(first.cursor.agentSessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(first.requestsSeen).toBe(requestsBefore);
    expect(sink.cursor).toEqual({
      agentSessionId: first.cursor.agentSessionId,
      turnCount: 1,
      lastAssistantMessageId: message.messageId,
      pastAgentSessionIds: [],
    });
    expect(existsSync(expectedTranscriptPath(configDir, workspace, first.cursor.agentSessionId!))).toBe(true);
    expect(logs.find((l) => l.msg === "claude-code spawned")).toMatchObject({
      cwd: workspace,
      agentSessionId: "new",
    });
    expect(logs.find((l) => l.msg === "claude-code turn context")).toMatchObject({
      inputTokens: 40_000,
      percent: 25,
    });
  });

  it("keeps the process warm: the second turn runs in the same process and conversation", async () => {
    fake.respond((r) => ({ text: `answer to ${r.lastUserText}` }));
    const sink = new RecordingSink(fake);
    const conversation = open(emptyCursor());

    await run(conversation, "warm one", sink);
    const pid = pidOf(conversation);
    const id = sink.cursor.agentSessionId;
    const second = await run(conversation, "warm two", sink);

    expect(second.text).toBe("answer to warm two");
    expect(pid).toBeDefined();
    expect(pidOf(conversation)).toBe(pid);
    expect(isRunning(pid!)).toBe(true);
    expect(sink.cursor).toMatchObject({ agentSessionId: id, turnCount: 2 });
    expect(callsFor("warm two")[0].userTexts).toContain("warm one");
    expect(logs.filter((l) => l.msg === "claude-code spawned")).toHaveLength(1);
  });

  it("checks the workspace at every turn: a warm CLI whose folder now leads outside the roots is not used", async () => {
    fake.respond(() => ({ text: "ok" }));
    const sink = new RecordingSink(fake);
    const outside = join(root, "outside");
    await mkdir(outside);
    const conversation = open(emptyCursor(), { roots: [workspace] });
    await run(conversation, "first", sink);
    expect(logs.find((l) => l.msg === "claude-code spawned")).toMatchObject({ cwd: workspace, workspace });

    await rename(workspace, `${workspace}.moved`);
    await symlink(outside, workspace);
    const failure = await run(conversation, "second", sink).catch((err: unknown) => err);

    expect(failure).toMatchObject({ code: "WORKSPACE_NOT_ALLOWED" });
    expect((failure as Error).message).not.toContain(outside);
    expect(callsFor("second")).toEqual([]);
  });

  it("resumes the same conversation after a graceful close", async () => {
    fake.respond((r) => ({ text: r.lastUserText.includes("pelican") ? "Noted: pelican" : "It was pelican" }));
    const first = new RecordingSink(fake);
    const conversation = open(emptyCursor());
    await run(conversation, "remember the word pelican", first);
    const pid = pidOf(conversation)!;

    await conversation.close("graceful");
    expect(conversation.alive).toBe(false);
    expect(isRunning(pid)).toBe(false);

    const second = new RecordingSink(fake);
    const resumed = open(first.cursor);
    const outcome = await run(resumed, "which word did I say?", second);

    expect(outcome.text).toBe("It was pelican");
    const [call] = callsFor("which word did I say?");
    expect(call.userTexts).toContain("remember the word pelican");
    expect(call.assistantTexts).toContain("Noted: pelican");
    expect(second.cursor).toMatchObject({ agentSessionId: first.cursor.agentSessionId, turnCount: 2 });
    expect(second.of("session.reset")).toEqual([]);
    expect(logs.find((l) => l.msg === "claude-code resuming conversation")).toMatchObject({
      agentSessionId: first.cursor.agentSessionId,
      transcriptPath: expectedTranscriptPath(configDir, workspace, first.cursor.agentSessionId!),
      transcriptBytes: expect.any(Number),
    });
  });

  it("cancels mid-stream with an interrupt and keeps the process for the next turn", async () => {
    const story = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");
    fake.respond((r) =>
      r.lastUserText === "tell a long story" ? { text: story, chunkDelayMs: 150 } : { text: "short" },
    );
    const sink = new RecordingSink(fake);
    const conversation = open(emptyCursor());
    const controller = new AbortController();

    const turn = run(conversation, "tell a long story", sink, controller.signal);
    await sink.next("message.delta");
    controller.abort();
    const outcome = await turn;

    expect(outcome.stopReason).toBe("cancelled");
    // Settled by the interrupt itself: the escalation would have ended the turn only by killing the
    // process (SIGTERM), and the process is still there, the same one for the next turn.
    expect(conversation.alive).toBe(true);
    const pid = pidOf(conversation);
    expect(isRunning(pid!)).toBe(true);
    expect(outcome.text.length).toBeLessThan(story.length);
    const next = await run(conversation, "after the cancel", sink);
    expect(next.text).toBe("short");
    expect(pidOf(conversation)).toBe(pid);
  });

  it("starts fresh when the resumed conversation is too long, and runs the turn there", async () => {
    fake.respond(() => ({ text: "Noted: walrus" }));
    const first = new RecordingSink(fake);
    const conversation = open(emptyCursor());
    await run(conversation, "remember the word walrus", first);
    await conversation.close("graceful");
    const oldId = first.cursor.agentSessionId!;

    // Any call that still carries the old conversation is too long, as a huge transcript would be;
    // that includes the CLI's own compaction attempts, which would otherwise rescue it.
    fake.respond((r) =>
      JSON.stringify(r.body).includes("walrus")
        ? { error: "prompt_too_long" }
        : { text: "Fresh start answer" },
    );
    const sink = new RecordingSink(fake);
    const outcome = await run(open(first.cursor), "carry on", sink);

    expect(outcome.text).toBe("Fresh start answer");
    expect(sink.of("session.reset")).toEqual([
      {
        type: "session.reset",
        reason: "resume_failed",
        notice: "Session context was too large to resume — starting fresh.",
      },
    ]);
    expect(resumeFailedNotice).toBe("Session context was too large to resume — starting fresh.");
    expect(
      sink.saves.some(
        (s) => s.cursor.agentSessionId === null && s.cursor.pastAgentSessionIds.includes(oldId),
      ),
    ).toBe(true);
    expect(sink.cursor.agentSessionId).not.toBeNull();
    expect(sink.cursor.agentSessionId).not.toBe(oldId);
    expect(sink.cursor).toMatchObject({ turnCount: 2, pastAgentSessionIds: [oldId] });
    expect(sink.cursor.lastAssistantMessageId).toBe(sink.of("message").at(-1)?.messageId);
    expect(callsFor("carry on").at(-1)?.userTexts).toEqual(["carry on"]);
    expect(logs.find((l) => l.msg === "claude-code resume failed")).toMatchObject({
      level: 50,
      agentSessionId: oldId,
      error: expect.stringMatching(/prompt is too long/i),
      cwd: workspace,
      transcriptBytes: expect.any(Number),
    });
    expect(logs.find((l) => l.msg === "claude-code fresh fallback")).toMatchObject({
      oldAgentSessionId: oldId,
      newAgentSessionId: sink.cursor.agentSessionId,
    });
  });

  it("starts fresh when the CLI does not know the saved conversation", async () => {
    fake.respond(() => ({ text: "new conversation here" }));
    const lost = randomUUID();
    const sink = new RecordingSink(fake);
    const cursor = {
      agentSessionId: lost,
      turnCount: 3,
      lastAssistantMessageId: randomUUID(),
      pastAgentSessionIds: [],
    };

    const outcome = await run(open(cursor), "hello again", sink);

    expect(outcome.text).toBe("new conversation here");
    expect(sink.of("session.reset").map((e) => e.reason)).toEqual(["resume_failed"]);
    expect(sink.cursor).toMatchObject({ turnCount: 4, pastAgentSessionIds: [lost] });
    expect(logs.find((l) => l.msg === "claude-code resume failed")?.error).toMatch(/No conversation found/);
  });

  it.each([0, 1])(
    "starts fresh, without trying to resume, when a cursor's transcript never existed (turnCount %i)",
    async (turnCount) => {
      fake.respond(() => ({ text: "fresh and working" }));
      const unsaved = randomUUID();
      const sink = new RecordingSink(fake);
      const cursor = {
        agentSessionId: unsaved,
        turnCount,
        lastAssistantMessageId: null,
        pastAgentSessionIds: ["older"],
      };

      const outcome = await run(open(cursor), "first words", sink);

      expect(outcome.text).toBe("fresh and working");
      expect(sink.of("session.reset")).toEqual([
        { type: "session.reset", reason: "unsaved", notice: unsavedNotice },
      ]);
      expect(sink.cursor).toMatchObject({
        turnCount: turnCount + 1,
        pastAgentSessionIds: ["older", unsaved],
      });
      expect(sink.cursor.agentSessionId).not.toBe(unsaved);
      expect(logs.some((l) => l.msg === "claude-code resuming conversation")).toBe(false);
      expect(logs.find((l) => l.msg === "claude-code spawned")).toMatchObject({ agentSessionId: "new" });
    },
  );

  it("resumes an unconfirmed cursor whose transcript lives in another project folder", async () => {
    fake.respond((r) => ({ text: r.lastUserText.includes("narwhal") ? "Noted: narwhal" : "Still narwhal" }));
    const first = new RecordingSink(fake);
    const conversation = open(emptyCursor());
    await run(conversation, "remember the word narwhal", first);
    await conversation.close("graceful");
    const id = first.cursor.agentSessionId!;

    const elsewhere = join(root, "moved-ws");
    await mkdir(elsewhere);
    const sink = new RecordingSink(fake);
    const cursor = { ...first.cursor, lastAssistantMessageId: null };
    const outcome = await run(open(cursor, { workspace: elsewhere }), "and now?", sink);

    expect(outcome.text).toBe("Still narwhal");
    expect(sink.of("session.reset")).toEqual([]);
    expect(callsFor("and now?")[0].userTexts).toContain("remember the word narwhal");
    expect(sink.cursor).toMatchObject({ agentSessionId: id, turnCount: 2 });
    expect(logs.find((l) => l.msg === "claude-code resuming conversation")?.transcriptPath).toBe(
      expectedTranscriptPath(configDir, workspace, id),
    );
  });

  it("reports tool calls and their full results", async () => {
    const file = join(workspace, "notes.txt");
    await writeFile(file, "the secret is 42\n");
    fake.respond((r) =>
      r.hasToolResult
        ? { text: "The file says 42." }
        : {
            text: "Let me read it.",
            toolUse: { id: "toolu_test_1", name: "Read", input: { file_path: file } },
          },
    );
    const sink = new RecordingSink(fake);

    const outcome = await run(open(emptyCursor()), "read my notes", sink);

    expect(outcome.text).toBe("The file says 42.");
    expect(sink.of("tool.call")).toEqual([
      { type: "tool.call", id: "toolu_test_1", name: "Read", input: { file_path: file } },
    ]);
    const [result] = sink.of("tool.result");
    expect(result).toMatchObject({ id: "toolu_test_1", isError: false });
    expect(JSON.stringify(result.output)).toContain("the secret is 42");
    expect(sink.of("message").map((m) => m.text)).toEqual(["Let me read it.", "The file says 42."]);
    const order = sink.events.map((e) => e.type).filter((t) => t !== "message.delta");
    expect(order).toEqual(["message", "tool.call", "tool.result", "message", "usage"]);
  });

  it("fails with CONTEXT_TOO_LARGE, without starting over, when a live conversation outgrows the window", async () => {
    fake.respond((r) =>
      JSON.stringify(r.body).includes("enormous") ? { error: "prompt_too_long" } : { text: "fine" },
    );
    const sink = new RecordingSink(fake);
    const conversation = open(emptyCursor());
    await run(conversation, "a small start", sink);
    const id = sink.cursor.agentSessionId;

    const failure = await run(conversation, "an enormous paste", sink).catch((err: unknown) => err);

    expect(failure).toBeInstanceOf(AgentFailure);
    expect(failure).toMatchObject({
      code: "CONTEXT_TOO_LARGE",
      message: expect.stringMatching(/prompt is too long/i),
    });
    expect(sink.of("session.reset")).toEqual([]);
    expect(sink.of("message").map((m) => m.text)).toEqual(["fine"]);
    // The refused call measured nothing, so only the first turn's usage was reported.
    expect(sink.of("usage")).toHaveLength(1);
    expect(sink.cursor.agentSessionId).toBe(id);
  });

  it("fails with AGENT_ERROR and the API's message when the API refuses the call", async () => {
    fake.respond(() => ({
      error: {
        status: 400,
        body: {
          type: "error",
          error: { type: "invalid_request_error", message: "model does not accept this" },
        },
      },
    }));

    const failure = await run(open(emptyCursor()), "anything", new RecordingSink(fake)).catch(
      (err: unknown) => err,
    );

    expect(failure).toBeInstanceOf(AgentFailure);
    expect(failure).toMatchObject({
      code: "AGENT_ERROR",
      message: expect.stringContaining("model does not accept this"),
    });
  });

  it("escalates a cancel the agent ignores to SIGTERM, after the interrupt", async () => {
    // A deaf agent that notes what reached it, in order: the interrupt on its stdin, then signals.
    const script = join(root, "deaf-claude.mjs");
    const seen = join(root, "deaf-claude.seen");
    await writeFile(
      script,
      [
        "#!/usr/bin/env node",
        'import { appendFileSync } from "node:fs";',
        'import { createInterface } from "node:readline";',
        `const note = (what) => appendFileSync(${JSON.stringify(seen)}, what + "\\n");`,
        'process.on("SIGTERM", () => { note("SIGTERM"); process.exit(143); });',
        "let first = true;",
        'createInterface({ input: process.stdin }).on("line", (line) => {',
        "  if (first) {",
        "    first = false;",
        '    console.log(JSON.stringify({ type: "system", subtype: "init", session_id: "deaf-1", model: "fake-model" }));',
        "    return;",
        "  }",
        '  if (JSON.parse(line).request?.subtype === "interrupt") note("interrupt");',
        "});",
        "setInterval(() => {}, 60_000);",
        "",
      ].join("\n"),
    );
    await chmod(script, 0o755);
    const sink = new RecordingSink(fake);
    const conversation = open(emptyCursor(), { entry: entry({ command: script }) });
    const controller = new AbortController();

    const turn = run(conversation, "never answered", sink, controller.signal);
    await vi.waitUntil(() => sink.saves.some((s) => s.cursor.agentSessionId === "deaf-1"), { timeout: 5000 });
    const pid = pidOf(conversation)!;
    controller.abort();
    const outcome = await turn;

    expect(outcome.stopReason).toBe("cancelled");
    // The interrupt first; SIGTERM only once its grace passed unanswered.
    expect((await readFile(seen, "utf8")).trim().split("\n")).toEqual(["interrupt", "SIGTERM"]);
    expect(conversation.alive).toBe(false);
    expect(isRunning(pid)).toBe(false);
  });

  it("fails the turn with AGENT_CRASHED when the process exits without a result", async () => {
    const script = join(root, "crashing-claude.sh");
    await writeFile(
      script,
      [
        "#!/bin/sh",
        "read -r prompt",
        `echo '{"type":"system","subtype":"init","session_id":"crash-1","model":"fake-model"}'`,
        "echo 'fatal: the fake agent fell over' >&2",
        "exit 3",
        "",
      ].join("\n"),
    );
    await chmod(script, 0o755);
    const conversation = open(emptyCursor(), { entry: entry({ command: script }) });

    const failure = await run(conversation, "anything", new RecordingSink(fake)).catch((err: unknown) => err);

    expect(failure).toBeInstanceOf(AgentFailure);
    expect(failure).toMatchObject({ code: "AGENT_CRASHED", message: expect.stringContaining("code 3") });
    expect(conversation.alive).toBe(false);
    expect(logs.find((l) => l.msg === "claude-code crashed")).toMatchObject({
      level: 50,
      stderr: expect.stringContaining("fatal: the fake agent fell over"),
    });
  });

  it("fails with AGENT_START_FAILED when the program cannot be started", async () => {
    const conversation = open(emptyCursor(), { entry: entry({ command: join(root, "no-such-claude") }) });

    const failure = await run(conversation, "anything", new RecordingSink(fake)).catch((err: unknown) => err);

    expect(failure).toMatchObject({ code: "AGENT_START_FAILED", message: expect.stringContaining("ENOENT") });
    // A client learns why, not where the operator keeps the program.
    expect((failure as Error).message).not.toContain("no-such-claude");
  });
});

describe("claude-code agentConfig", () => {
  const base: AgentEntry = {
    name: "claude-code",
    driver: "claude-code",
    args: [],
    env: {},
    permissions: "deny",
  };

  it("accepts model, permission mode and contextSuffix within the entry's limits", () => {
    const limited = { ...base, models: ["sonnet", "opus"], permissionModes: ["default", "plan"] };
    expect(
      claudeCodeDriver.validateConfig(limited, {
        model: "opus",
        permissionMode: "plan",
        contextSuffix: true,
      }),
    ).toEqual({
      ok: true,
      config: { model: "opus", permissionMode: "plan", contextSuffix: true },
    });
    expect(claudeCodeDriver.validateConfig(base, { model: "anything-goes" })).toEqual({
      ok: true,
      config: { model: "anything-goes" },
    });
  });

  it("refuses fields and values the entry does not allow", () => {
    const limited = { ...base, models: ["sonnet"] };
    expect(claudeCodeDriver.validateConfig(base, { command: "/bin/sh" })).toEqual({
      ok: false,
      problem: "agentConfig.command is not allowed for claude-code",
    });
    expect(claudeCodeDriver.validateConfig(limited, { model: "opus" })).toMatchObject({ ok: false });
    expect(claudeCodeDriver.validateConfig(base, { permissionMode: "bypassPermissions" })).toMatchObject({
      ok: false,
      problem: expect.stringContaining("agentConfig.permissionMode"),
    });
    expect(claudeCodeDriver.validateConfig(base, { permissionMode: "default" })).toMatchObject({ ok: true });
    expect(claudeCodeDriver.validateConfig(base, { contextSuffix: "yes" })).toMatchObject({ ok: false });
  });
});
