/**
 * The acp driver against a real ACP agent process (test/support/acp-agent.ts, built on the SDK's
 * agent side) speaking over stdio.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acpDriver } from "../../../src/agents/acp/driver.js";
import { CANNOT_RESUME_NOTICE } from "../../../src/agents/acp/session-start.js";
import { AgentFailure, type ResumeCursor } from "../../../src/agents/driver.js";
import type { PermissionPolicy } from "../../../src/agents/registry.js";
import { AcpHarness, noAbort, RecordingSink, testAgentEntry } from "../../support/acp-harness.js";

const RESUME_NOTICE = "Session context was too large to resume — starting fresh.";
const TIMEOUT = 20_000;

let h: AcpHarness;
beforeEach(() => {
  h = new AcpHarness();
});
afterEach(async () => {
  await h.cleanup();
});

const staleCursor = (): ResumeCursor => ({
  agentSessionId: "sess-gone",
  turnCount: 4,
  lastAssistantMessageId: "sess-gone-m4",
  pastAgentSessionIds: ["sess-older"],
});

describe("acp driver: turns", () => {
  it(
    "streams message chunks in order and ends with the full message",
    async () => {
      const conversation = await h.open();
      const sink = new RecordingSink();
      const outcome = await conversation.runTurn({
        prompt: "[chunks 3] [stop max_tokens]",
        sink,
        signal: noAbort(),
      });

      expect(outcome).toEqual({
        text: "chunk 1/3 chunk 2/3 chunk 3/3 ",
        stopReason: "max_tokens",
        usage: null,
      });
      expect(sink.events.items).toEqual([
        { type: "message.delta", text: "chunk 1/3 " },
        { type: "message.delta", text: "chunk 2/3 " },
        { type: "message.delta", text: "chunk 3/3 " },
        { type: "message", text: "chunk 1/3 chunk 2/3 chunk 3/3 ", messageId: expect.any(String) },
      ]);
      const [beforePrompt, afterReply] = sink.cursors.items;
      expect(beforePrompt).toEqual({
        agentSessionId: expect.stringMatching(/^sess-/),
        turnCount: 1,
        lastAssistantMessageId: null,
        pastAgentSessionIds: [],
      });
      expect(afterReply).toEqual({
        ...beforePrompt,
        lastAssistantMessageId: sink.ofType("message")[0].messageId,
      });
    },
    TIMEOUT,
  );

  it(
    "runs the entry's command in the workspace with its args and env, and stays warm between turns",
    async () => {
      const workspace = await h.tempDir("cwd");
      const base = testAgentEntry();
      const entry = {
        ...base,
        args: [...base.args, "--from-entry"],
        env: { MOORING_ACP_VAR: "set-by-entry" },
      };
      const conversation = await h.open({ entry, workspace });
      const sink = new RecordingSink();
      const first = await conversation.runTurn({
        prompt: "[cwd] [env MOORING_ACP_VAR] [argv] [pid]",
        sink,
        signal: noAbort(),
      });
      expect(first.text).toContain(`cwd: ${workspace} session-cwd: ${workspace}`);
      expect(first.text).toContain("env MOORING_ACP_VAR: set-by-entry");
      expect(first.text).toContain('argv: ["--from-entry"]');

      const second = await conversation.runTurn({ prompt: "[pid] [history]", sink, signal: noAbort() });
      const pid = /pid: (\d+)/.exec(first.text)?.[1];
      expect(pid).toBeDefined();
      expect(second.text).toContain(`pid: ${pid}`);
      expect(second.text).toContain("history: 1");
      expect(sink.lastCursor).toMatchObject({
        agentSessionId: sink.cursors.items[0].agentSessionId,
        turnCount: 2,
      });
      expect(h.logs("agent spawned")).toHaveLength(1);
      expect(h.logs("agent spawned")[0]).toMatchObject({ cwd: workspace, agentSessionId: "new" });
    },
    TIMEOUT,
  );

  it(
    "reports tool calls with their results and usage",
    async () => {
      const conversation = await h.open();
      const sink = new RecordingSink();
      const outcome = await conversation.runTurn({
        prompt: "[tool 2048] [tool 10 fail] [usage 1234]",
        sink,
        signal: noAbort(),
      });

      const tools = sink.events.items.filter((e) => e.type === "tool.call" || e.type === "tool.result");
      expect(tools).toEqual([
        { type: "tool.call", id: "call-1", name: "generate", input: { bytes: 2048 } },
        { type: "tool.result", id: "call-1", isError: false, output: "x".repeat(2048) },
        { type: "tool.call", id: "call-2", name: "generate", input: { bytes: 10 } },
        { type: "tool.result", id: "call-2", isError: true, output: "x".repeat(10) },
      ]);
      const usage = {
        inputTokens: 1234,
        outputTokens: 0,
        cacheCreationInputTokens: 0,
        cacheReadInputTokens: 0,
        // usage_update.size: the agent's own window, preferred by the context indicator.
        contextWindow: 200_000,
      };
      expect(sink.ofType("usage")).toEqual([{ type: "usage", usage }]);
      expect(outcome.usage).toEqual(usage);
    },
    TIMEOUT,
  );

  it(
    "answers a JSON-RPC error from session/prompt with AGENT_ERROR and keeps the agent for the next turn",
    async () => {
      const conversation = await h.open();
      const sink = new RecordingSink();
      const failed = conversation.runTurn({ prompt: "[error]", sink, signal: noAbort() });
      await expect(failed).rejects.toBeInstanceOf(AgentFailure);
      await expect(failed).rejects.toMatchObject({ code: "AGENT_ERROR" });
      expect(conversation.alive).toBe(true);
      const next = await conversation.runTurn({ prompt: "still there?", sink, signal: noAbort() });
      expect(next.text).toBe("echo: still there?");
    },
    TIMEOUT,
  );
});

describe("acp driver: permissions", () => {
  const cases: { policy: PermissionPolicy; config: Record<string, unknown>; prompt: string; got: string }[] =
    [
      { policy: "allow", config: {}, prompt: "[permission]", got: "allow-once" },
      { policy: "deny", config: {}, prompt: "[permission]", got: "reject-once" },
      { policy: "deny", config: {}, prompt: "[permission allow-only]", got: "cancelled" },
      { policy: "client", config: { permissions: "allow" }, prompt: "[permission]", got: "allow-once" },
      { policy: "client", config: {}, prompt: "[permission]", got: "reject-once" },
    ];
  it.each(cases)(
    "policy $policy with config $config answers $prompt with $got",
    async ({ policy, config, prompt, got }) => {
      const conversation = await h.open({
        entry: testAgentEntry({ permissions: policy }),
        agentConfig: config,
      });
      const outcome = await conversation.runTurn({ prompt, sink: new RecordingSink(), signal: noAbort() });
      expect(outcome.text).toBe(`permission: ${got} `);
    },
    TIMEOUT,
  );
});

describe("acp driver: cancel", () => {
  it(
    "sends session/cancel and resolves cancelled when the agent stops",
    async () => {
      const conversation = await h.open();
      const sink = new RecordingSink();
      const abort = new AbortController();
      const turn = conversation.runTurn({ prompt: "[slow]", sink, signal: abort.signal });
      await sink.events.waitFor((e) => e.type === "message.delta" && e.text === "tick 2 ");
      abort.abort();
      const outcome = await turn;
      expect(outcome.stopReason).toBe("cancelled");
      expect(outcome.text).toMatch(/^tick 1 tick 2 /);
      expect(conversation.alive).toBe(true);
      const next = await conversation.runTurn({
        prompt: "[history]",
        sink: new RecordingSink(),
        signal: noAbort(),
      });
      expect(next.text).toMatch(/^history: 1 /);
    },
    TIMEOUT,
  );

  it(
    "terminates an agent that ignores session/cancel and SIGTERM, and fails CANCELLED",
    async () => {
      const conversation = await h.open();
      const sink = new RecordingSink();
      const abort = new AbortController();
      const turn = conversation.runTurn({ prompt: "[stubborn]", sink, signal: abort.signal });
      await sink.events.waitFor((e) => e.type === "message.delta");
      const from = h.logger.lines.items.length;
      abort.abort();
      await expect(turn).rejects.toMatchObject({ code: "CANCELLED" });
      const exited = await h.logger.lines.waitFor((line) => line.msg === "agent exited");
      expect(exited).toMatchObject({ signal: "SIGKILL" });
      expect(conversation.alive).toBe(false);
      // Each step only after the one before went unanswered: session/cancel, SIGTERM (which the
      // agent says it ignores), then SIGKILL.
      const steps = h.logger.lines.items.slice(from).flatMap((line) => {
        if (line.msg === "cancelling agent turn") return ["session/cancel"];
        if (line.msg === "agent ignored session/cancel; terminating it") return ["SIGTERM"];
        if (line.msg === "agent stderr" && String(line.stderr).includes("ignoring SIGTERM"))
          return ["SIGTERM ignored"];
        if (line.msg === "agent exited") return [`exited by ${line.signal}`];
        return [];
      });
      expect(steps).toEqual(["session/cancel", "SIGTERM", "SIGTERM ignored", "exited by SIGKILL"]);
    },
    TIMEOUT,
  );
});

describe("acp driver: resume", () => {
  it(
    "loads the saved session in a new process after close, with its history intact",
    async () => {
      const entry = testAgentEntry({ env: { ACP_TEST_STATE_DIR: await h.tempDir("state") } });
      const workspace = await h.tempDir("ws");
      const first = await h.open({ entry, workspace });
      const sink = new RecordingSink();
      await first.runTurn({ prompt: "first", sink, signal: noAbort() });
      await first.runTurn({ prompt: "second", sink, signal: noAbort() });
      await first.close("graceful");
      expect(first.alive).toBe(false);
      const saved = sink.lastCursor!;
      expect(saved.turnCount).toBe(2);

      const second = await h.open({ entry, workspace, cursor: saved });
      const resumed = new RecordingSink();
      const outcome = await second.runTurn({ prompt: "[history]", sink: resumed, signal: noAbort() });
      expect(outcome.text).toBe("history: 2 [first | second]");
      // The replayed history is the agent catching up, not output of this turn.
      expect(resumed.ofType("message.delta").map((e) => e.text)).toEqual(["history: 2 [first | second]"]);
      expect(resumed.ofType("session.reset")).toEqual([]);
      expect(resumed.lastCursor).toMatchObject({ agentSessionId: saved.agentSessionId, turnCount: 3 });
      expect(h.logs("agent spawned")[1]).toMatchObject({ agentSessionId: saved.agentSessionId });
      expect(h.logs("agent session resumed")).toHaveLength(1);
    },
    TIMEOUT,
  );

  it(
    "starts fresh with session.reset when session/load fails",
    async () => {
      const workspace = await h.tempDir("ws");
      const entry = testAgentEntry({ env: { ACP_TEST_STATE_DIR: await h.tempDir("state") } });
      const conversation = await h.open({ entry, workspace, cursor: staleCursor() });
      const sink = new RecordingSink();
      const outcome = await conversation.runTurn({ prompt: "[history]", sink, signal: noAbort() });

      expect(outcome.text).toBe("history: 0 []");
      expect(sink.events.items[0]).toEqual({
        type: "session.reset",
        reason: "resume_failed",
        notice: RESUME_NOTICE,
      });
      // The turn count carries over into the fresh conversation (staleCursor has 4 turns).
      expect(sink.cursors.items[0]).toEqual({
        agentSessionId: null,
        turnCount: 4,
        lastAssistantMessageId: null,
        pastAgentSessionIds: ["sess-older", "sess-gone"],
      });
      expect(sink.lastCursor).toMatchObject({
        turnCount: 5,
        pastAgentSessionIds: ["sess-older", "sess-gone"],
      });
      expect(sink.lastCursor?.agentSessionId).toMatch(/^sess-(?!gone)/);
      const [failure] = h.logs("agent session resume failed; starting fresh");
      expect(failure).toMatchObject({
        level: 50,
        agentSessionId: "sess-gone",
        cwd: workspace,
        sessionId: "session-under-test",
      });
      expect(failure.err).toEqual(expect.any(String));
    },
    TIMEOUT,
  );

  it(
    "fails AGENT_START_FAILED when the fresh start after a failed load fails too",
    async () => {
      const entry = testAgentEntry({ env: { ACP_TEST_FAIL_NEW: "1" } });
      const conversation = await h.open({ entry, cursor: staleCursor() });
      const sink = new RecordingSink();
      await expect(conversation.runTurn({ prompt: "hi", sink, signal: noAbort() })).rejects.toMatchObject({
        code: "AGENT_START_FAILED",
      });
      expect(sink.ofType("session.reset")).toEqual([]);
      expect(sink.lastCursor).toMatchObject({
        agentSessionId: null,
        pastAgentSessionIds: ["sess-older", "sess-gone"],
      });
      expect(conversation.alive).toBe(false);
    },
    TIMEOUT,
  );

  it(
    "keeps the cursor and does not fall back when the turn is aborted while loading",
    async () => {
      const entry = testAgentEntry({ env: { ACP_TEST_LOAD_DELAY_MS: "5000" } });
      const conversation = await h.open({ entry, cursor: staleCursor() });
      const sink = new RecordingSink();
      const abort = new AbortController();
      const turn = conversation.runTurn({ prompt: "hi", sink, signal: abort.signal });
      await h.logger.lines.waitFor((line) => line.msg === "resuming agent session");
      abort.abort();
      await expect(turn).rejects.toMatchObject({ code: "CANCELLED" });
      expect(sink.cursors.items).toEqual([]);
      expect(sink.events.items).toEqual([]);
      expect(h.logs("agent session resume failed; starting fresh")).toEqual([]);
    },
    TIMEOUT,
  );

  it(
    "starts fresh with a session.reset when the agent cannot load sessions",
    async () => {
      const conversation = await h.open({
        entry: testAgentEntry({ env: { ACP_TEST_NO_LOAD: "1" } }),
        cursor: staleCursor(),
      });
      const sink = new RecordingSink();
      const outcome = await conversation.runTurn({ prompt: "[history]", sink, signal: noAbort() });
      expect(outcome.text).toBe("history: 0 []");
      expect(sink.ofType("session.reset")).toEqual([
        { type: "session.reset", reason: "resume_failed", notice: CANNOT_RESUME_NOTICE },
      ]);
      expect(sink.lastCursor).toMatchObject({
        turnCount: 5,
        pastAgentSessionIds: ["sess-older", "sess-gone"],
      });
    },
    TIMEOUT,
  );
});

describe("acp driver: failures and lifecycle", () => {
  it(
    "fails AGENT_CRASHED when the agent exits mid-turn, logging its stderr",
    async () => {
      const conversation = await h.open();
      const sink = new RecordingSink();
      const turn = conversation.runTurn({ prompt: "[exit]", sink, signal: noAbort() });
      await expect(turn).rejects.toMatchObject({
        code: "AGENT_CRASHED",
        message: expect.stringContaining("code 3"),
      });
      expect(sink.ofType("message.delta")).toEqual([{ type: "message.delta", text: "about to exit " }]);
      expect(conversation.alive).toBe(false);
      const [died] = h.logs("agent died during a turn");
      expect(died.stderr).toContain("fatal: simulated crash");
      // The chunk proved the agent saved the turn before dying.
      expect(sink.lastCursor?.lastAssistantMessageId).toEqual(expect.any(String));
    },
    TIMEOUT,
  );

  it(
    "fails AGENT_START_FAILED when the command cannot be spawned",
    async () => {
      const conversation = await h.open({
        entry: testAgentEntry({ command: "/nonexistent/acp-agent", args: [] }),
      });
      const turn = conversation.runTurn({ prompt: "hi", sink: new RecordingSink(), signal: noAbort() });
      await expect(turn).rejects.toMatchObject({
        code: "AGENT_START_FAILED",
        message: expect.stringContaining("ENOENT"),
      });
      // A client learns why, not where the operator keeps the program.
      await expect(turn).rejects.toMatchObject({ message: expect.not.stringContaining("/nonexistent") });
      expect(conversation.alive).toBe(false);
    },
    TIMEOUT,
  );

  it(
    "close('kill') ends a warm agent at once",
    async () => {
      const conversation = await h.open();
      await conversation.runTurn({ prompt: "hi", sink: new RecordingSink(), signal: noAbort() });
      expect(conversation.alive).toBe(true);
      await conversation.close("kill");
      expect(conversation.alive).toBe(false);
      const exited = await h.logger.lines.waitFor((line) => line.msg === "agent exited");
      expect(exited).toMatchObject({ signal: "SIGKILL" });
      await expect(
        conversation.runTurn({ prompt: "hi", sink: new RecordingSink(), signal: noAbort() }),
      ).rejects.toMatchObject({ code: "AGENT_CRASHED" });
    },
    TIMEOUT,
  );
});

describe("acp driver: validateConfig", () => {
  const client = testAgentEntry({ permissions: "client" });
  const fixed = testAgentEntry({ permissions: "allow" });

  it("accepts permissions on a client-policy entry and a boolean contextSuffix", () => {
    expect(acpDriver.validateConfig(client, { permissions: "allow", contextSuffix: true })).toEqual({
      ok: true,
      config: { permissions: "allow", contextSuffix: true },
    });
    expect(acpDriver.validateConfig(fixed, {})).toEqual({ ok: true, config: {} });
  });

  it("rejects unknown fields, permissions the entry fixes, and bad values", () => {
    expect(acpDriver.validateConfig(client, { model: "x" })).toEqual({
      ok: false,
      problem: "agentConfig.model is not allowed for acp",
    });
    expect(acpDriver.validateConfig(fixed, { permissions: "allow" })).toEqual({
      ok: false,
      problem: "agentConfig.permissions is not allowed for acp",
    });
    expect(acpDriver.validateConfig(client, { permissions: "maybe" })).toMatchObject({ ok: false });
    expect(acpDriver.validateConfig(client, { contextSuffix: "yes" })).toMatchObject({ ok: false });
  });

  it("keeps mcpServers as ACP sends them (an empty list as none) and names the field of a bad one", () => {
    const stdio = { name: "files", command: "mcp-files", args: [], env: [] };
    expect(acpDriver.validateConfig(fixed, { mcpServers: [{ ...stdio, type: "stdio" }] })).toEqual({
      ok: true,
      config: { mcpServers: [stdio] },
    });
    expect(acpDriver.validateConfig(fixed, { mcpServers: [] })).toEqual({ ok: true, config: {} });
    expect(
      acpDriver.validateConfig(
        fixed,
        { mcpServers: [{ ...stdio, env: [{ name: "AWS_KEY", value: "x" }] }] },
        { agentEnvDeny: ["AWS_*"] },
      ),
    ).toEqual({
      ok: false,
      problem: "agentConfig.mcpServers[0].env[0].name AWS_KEY is withheld from agents by the gateway",
      field: "agentConfig.mcpServers",
    });
    expect(
      acpDriver.validateConfig(fixed, {
        mcpServers: [{ type: "http", name: "h", url: "file:///etc/passwd", headers: [] }],
      }),
    ).toMatchObject({
      ok: false,
      problem: "agentConfig.mcpServers[0].url must be an http or https URL",
    });
  });
});
