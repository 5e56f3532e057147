/**
 * Claude Code through the gateway: the real `claude` CLI (node_modules/.bin/claude) driven by the
 * worker and the conversation pool, against a loopback fake of the Anthropic API, with the
 * session's resume cursor in a real Postgres.
 */
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { unsavedNotice } from "../../../src/agents/claude-code/conversation.js";
import { expectedTranscriptPath } from "../../../src/agents/claude-code/transcript.js";
import { RECAP_HEAD, RECAP_TAIL } from "../../../src/domain/carry-over.js";
import {
  getSession,
  isRunning,
  parseLogOutput,
  SseReader,
  storedCursor,
  taskEvents,
  writeCursor,
} from "../../support/agent-gateway.js";
import { call, eventually, spawnGateway, testEnv } from "../../support/gateway.js";
import { createSessionWith, runTurn, submitPrompt, waitTerminal } from "../../support/turns.js";
import { useClaudeCode } from "../../support/claude-code.js";
import type { TestGateway } from "../../support/gateway.js";

const RESUME_FAILED_NOTICE = "Session context was too large to resume — starting fresh.";
const ONE_M_MODEL = "claude-sonnet-4-5[1m]";

const t = useClaudeCode("mooring-gw-claude-");

/** `claude` with a 1M-context model and the plan permission mode allowed. */
const claude = () =>
  t.entry({ models: [ONE_M_MODEL, "claude-sonnet-4-5"], permissionModes: ["default", "plan"] });

function gatewayEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { MOORING_AGENTS: JSON.stringify({ claude: claude() }), MOORING_HEARTBEAT_MS: "500", ...extra };
}

/** An in-process gateway whose logs are captured; stopped after the test. */
const boot = (extra: Record<string, string> = {}) => t.boot(extra, { claude: claude() });
const stopGateway = (gw: TestGateway) => t.stop(gw);

const callsFor = (prompt: string) => t.fake.mainRequests().filter((r) => r.lastUserText === prompt);
const types = (events: { type: string }[]) => events.map((e) => e.type);

describe("claude-code through the gateway", () => {
  it("streams a turn with usage and context ([1m] window, suffix) and keeps the process warm for the next", async () => {
    t.fake.respond((r) => ({
      text: `Answer to ${r.lastUserText}`,
      inputTokens: 200_000,
      cacheCreationInputTokens: 60_000,
      cacheReadInputTokens: 40_000,
      outputTokens: 17,
    }));
    const { url, logs } = await boot();
    const session = await createSessionWith(url, {
      workspace: `${t.workspace}/./`,
      agent: "claude",
      agentConfig: { model: ONE_M_MODEL, contextSuffix: true },
    });
    expect(session.workspace).toBe(t.workspace);
    const feed = new SseReader(url, session.id);
    try {
      const task = await submitPrompt(url, session.id, "hello there");
      const live = await feed.next("message.delta", task.id);
      expect(live.data.text.length).toBeGreaterThan(0);
      const done = await waitTerminal(url, task.id);

      expect(done.status).toBe("completed");
      // 200,000 + 60,000 + 40,000 tokens of a 1,000,000-token window.
      expect(done.result).toEqual({
        text: "Answer to hello there\n[ctx: 30%]",
        stopReason: "end_turn",
        usage: {
          inputTokens: 200_000,
          outputTokens: 17,
          cacheCreationInputTokens: 60_000,
          cacheReadInputTokens: 40_000,
        },
        contextPercent: 30,
      });
      const events = await taskEvents(t.db.sql, task.id);
      expect(types(events).filter((t) => t !== "message.delta")).toEqual([
        "task.queued",
        "task.started",
        "message",
        "usage",
        "task.completed",
      ]);
      const deltas = events.filter((e) => e.type === "message.delta");
      expect(deltas.length).toBeGreaterThan(0);
      expect(deltas.map((d) => d.data.text).join("")).toBe("Answer to hello there");
      expect(events.find((e) => e.type === "message")?.data).toEqual({ text: "Answer to hello there" });
      expect(events.find((e) => e.type === "usage")?.data).toMatchObject({
        inputTokens: 200_000,
        outputTokens: 17,
        contextWindow: 1_000_000,
        contextPercent: 30,
      });
      // What SSE clients saw is what was committed.
      await feed.next("task.completed", task.id);
      expect(feed.items.filter((e) => e.taskId === task.id).map((e) => e.seq)).toEqual(
        events.map((e) => e.seq),
      );

      const after = await getSession(url, session.id);
      expect(after.contextUsage).toEqual({ inputTokens: 300_000, contextWindow: 1_000_000, percent: 30 });
      expect(after.agentSessionId).toMatch(/^[0-9a-f-]{36}$/);
      expect(after.turnCount).toBe(1);
      const cursor = await storedCursor(t.db.sql, session.id);
      expect(cursor.lastAssistantMessageId).toEqual(expect.any(String));

      const spawned = logs.named("claude-code spawned");
      expect(spawned).toHaveLength(1);
      expect(spawned[0]).toMatchObject({
        sessionId: session.id,
        cwd: t.workspace,
        agentSessionId: "new",
        model: ONE_M_MODEL,
        agentPid: expect.any(Number),
      });
      expect(spawned[0].agentPid).not.toBe(process.pid);
      expect(logs.named("context per turn")[0]).toMatchObject({
        sessionId: session.id,
        taskId: task.id,
        inputTokens: 300_000,
        contextWindow: 1_000_000,
        percent: 30,
      });

      const second = await runTurn(url, session.id, "and again");
      expect(second.status).toBe("completed");
      expect(second.result.text).toBe("Answer to and again\n[ctx: 30%]");
      expect(logs.named("claude-code spawned")).toHaveLength(1);
      expect(isRunning(spawned[0].agentPid)).toBe(true);
      expect(callsFor("and again")[0].userTexts).toEqual(["hello there", "and again"]);
      const again = await getSession(url, session.id);
      expect(again).toMatchObject({ agentSessionId: after.agentSessionId, turnCount: 2 });
    } finally {
      feed.close();
    }
  });

  it("reaps an idle process and resumes the same conversation on the next turn", async () => {
    t.fake.respond((r) => ({
      text: r.lastUserText.includes("pelican") ? "Noted: pelican" : "It was pelican",
      inputTokens: 12_000,
    }));
    const { url, logs } = await boot({ MOORING_AGENT_IDLE_MS: "300" });
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });

    const first = await runTurn(url, session.id, "remember the word pelican");
    expect(first.status).toBe("completed");
    const { agentSessionId } = await getSession(url, session.id);
    const [spawned] = logs.named("claude-code spawned");
    const reap = await logs.next("idle reap", { sessionId: session.id });
    expect(reap).toMatchObject({ workspace: t.workspace, tokens: 12_000 });
    expect(reap.idleMs).toBeGreaterThanOrEqual(290);
    await logs.next("claude-code exited", { agentPid: spawned.agentPid });
    expect(isRunning(spawned.agentPid)).toBe(false);

    const second = await runTurn(url, session.id, "which word did I say?");

    expect(second.status).toBe("completed");
    expect(second.result.text).toBe("It was pelican");
    const [resumedCall] = callsFor("which word did I say?");
    expect(resumedCall.userTexts).toContain("remember the word pelican");
    expect(resumedCall.assistantTexts).toContain("Noted: pelican");
    expect(await getSession(url, session.id)).toMatchObject({ agentSessionId, turnCount: 2 });
    expect(types(await taskEvents(t.db.sql, second.id))).not.toContain("session.reset");
    const spawns = logs.named("claude-code spawned");
    expect(spawns).toHaveLength(2);
    expect(spawns[1]).toMatchObject({ cwd: t.workspace, agentSessionId, model: "default" });
    expect(logs.named("claude-code resuming conversation")[0]).toMatchObject({
      sessionId: session.id,
      agentSessionId,
      transcriptPath: expectedTranscriptPath(t.configDir, t.workspace, agentSessionId),
      transcriptBytes: expect.any(Number),
    });
    expect(logs.named("claude-code resuming conversation")[0].transcriptBytes).toBeGreaterThan(0);
  });

  it("resumes the conversation after the gateway process is killed and another one starts", async () => {
    t.fake.respond((r) => ({ text: r.lastUserText.includes("heron") ? "Noted: heron" : "It was heron" }));
    const env = testEnv(t.db.url, { ...gatewayEnv(), LOG_LEVEL: "info" });
    const first = await spawnGateway(env);
    let killed = false;
    try {
      await first.waitReady();
      const session = await createSessionWith(first.url, { workspace: t.workspace, agent: "claude" });
      const turn = await runTurn(first.url, session.id, "remember the word heron");
      expect(turn.status).toBe("completed");
      const { agentSessionId } = await getSession(first.url, session.id);
      const spawned = parseLogOutput(first.output()).find((r) => r.msg === "claude-code spawned");
      expect(spawned).toMatchObject({ agentSessionId: "new", cwd: t.workspace });
      t.agentPids.add(spawned!.agentPid);

      first.kill("SIGKILL");
      killed = true;
      expect(await first.exited).toBe("SIGKILL");
      // The orphaned CLI sees its stdin close and exits by itself.
      await eventually(async () => !isRunning(spawned!.agentPid));

      const { url, logs } = await boot();
      const second = await runTurn(url, session.id, "which bird?");

      expect(second.status).toBe("completed");
      expect(second.result.text).toBe("It was heron");
      expect(callsFor("which bird?")[0].userTexts).toContain("remember the word heron");
      expect(await getSession(url, session.id)).toMatchObject({ agentSessionId, turnCount: 2 });
      expect(logs.named("claude-code spawned")[0]).toMatchObject({ agentSessionId });
      expect(logs.named("claude-code resuming conversation")[0]).toMatchObject({ agentSessionId });
    } finally {
      if (!killed) first.kill("SIGKILL");
      await first.exited;
    }
  });

  it("resumes after a graceful gateway restart, with the context capped at 100%", async () => {
    t.fake.respond((r) => ({
      text: r.lastUserText.includes("otter") ? "Noted: otter" : "It was otter",
      inputTokens: 90_000,
      cacheReadInputTokens: 60_000,
    }));
    const extra = { MOORING_CONTEXT_WINDOW: "100000" };
    const a = await boot(extra);
    const session = await createSessionWith(a.url, {
      workspace: t.workspace,
      agent: "claude",
      agentConfig: { contextSuffix: true },
    });
    const first = await runTurn(a.url, session.id, "remember the word otter");
    expect(first.result).toMatchObject({ text: "Noted: otter\n[ctx: 100%]", contextPercent: 100 });
    const usage = (await taskEvents(t.db.sql, first.id)).find((e) => e.type === "usage");
    expect(usage?.data).toMatchObject({ contextWindow: 100_000, contextPercent: 100 });
    const before = await getSession(a.url, session.id);
    expect(before.contextUsage).toEqual({ inputTokens: 150_000, contextWindow: 100_000, percent: 100 });
    await stopGateway(a.gw);
    const pid = a.logs.named("claude-code spawned")[0].agentPid;
    expect(isRunning(pid)).toBe(false);

    const b = await boot(extra);
    const second = await runTurn(b.url, session.id, "which animal?");

    expect(second.status).toBe("completed");
    expect(second.result.text).toBe("It was otter\n[ctx: 100%]");
    expect(callsFor("which animal?")[0].assistantTexts).toContain("Noted: otter");
    expect(await getSession(b.url, session.id)).toMatchObject({
      agentSessionId: before.agentSessionId,
      turnCount: 2,
    });
  });

  it("cancels a turn mid-stream and keeps the warm process for the next turn", async () => {
    const story = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");
    t.fake.respond((r) =>
      r.lastUserText === "tell a long story" ? { text: story, chunkDelayMs: 150 } : { text: "short" },
    );
    const { url, logs } = await boot();
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
    const feed = new SseReader(url, session.id);
    try {
      const task = await submitPrompt(url, session.id, "tell a long story");
      await feed.next("message.delta", task.id);
      const cancel = await call(url, "POST", `/v1/tasks/${task.id}/cancel`);
      expect(cancel.status).toBe(200);
      expect(["cancelling", "cancelled"]).toContain(cancel.body.status);
      const done = await waitTerminal(url, task.id);

      expect(done.status).toBe("cancelled");
      expect(done.error).toMatchObject({ code: "CANCELLED" });
      // Settled by the interrupt, not by the SIGTERM escalation: that would have ended the process,
      // and the next turn below finds the same one (one spawn).
      expect((await feed.next("task.cancelled", task.id)).data.status).toBe("cancelled");
      const streamed = (await taskEvents(t.db.sql, task.id))
        .filter((e) => e.type === "message.delta")
        .map((e) => e.data.text)
        .join("");
      expect(streamed.length).toBeGreaterThan(0);
      expect(streamed.length).toBeLessThan(story.length);

      const next = await runTurn(url, session.id, "after the cancel");
      expect(next.status).toBe("completed");
      expect(next.result.text).toBe("short");
      expect(logs.named("claude-code spawned")).toHaveLength(1);
    } finally {
      feed.close();
    }
  });

  it("starts fresh with session.reset when the resumed conversation is too long, carrying a recap within the budget", async () => {
    const filler = Array.from({ length: 60 }, (_, i) => `fact${i}`).join(" ");
    t.fake.respond((r) => ({
      text: r.lastUserText.includes("walrus") ? `Noted: walrus ${filler}` : `Noted: puffin ${filler}`,
    }));
    const { url, logs } = await boot({ MOORING_AGENT_IDLE_MS: "300" });
    // Room for the newest turn whole and 100 characters more: too little for the older one.
    const newest = `--- turn 2, user ---\nand the word puffin\n--- turn 2, assistant ---\nNoted: puffin ${filler}`;
    const budget = RECAP_HEAD.length + RECAP_TAIL.length + 4 + newest.length + 100;
    const session = await createSessionWith(url, {
      workspace: t.workspace,
      agent: "claude",
      agentConfig: { carryOverChars: budget },
    });
    await runTurn(url, session.id, "remember the word walrus");
    await runTurn(url, session.id, "and the word puffin");
    const oldId = (await getSession(url, session.id)).agentSessionId as string;
    await logs.next("idle reap", { sessionId: session.id });
    await logs.next("claude-code exited", { agentPid: logs.named("claude-code spawned")[0].agentPid });

    // Anything that still carries the old conversation is too long, the CLI's compaction included;
    // a recap is user text, never an earlier assistant message.
    t.fake.respond((r) =>
      r.assistantTexts.some((t) => t.startsWith("Noted:"))
        ? { error: "prompt_too_long" }
        : { text: "Fresh start answer" },
    );
    const turn = await runTurn(url, session.id, "carry on");

    expect(turn.status).toBe("completed");
    expect(turn.result.text).toBe("Fresh start answer");
    const events = await taskEvents(t.db.sql, turn.id);
    const resets = events.filter((e) => e.type === "session.reset").map((e) => e.data);
    expect(resets).toEqual([
      {
        reason: "resume_failed",
        notice: `${RESUME_FAILED_NOTICE} Context carried over: a recap of the last 1 turn (${resets[0]?.carriedOver?.chars} characters) from the session's log.`,
        carriedOver: { turns: 1, chars: expect.any(Number) },
      },
    ]);
    expect(types(events).indexOf("session.reset")).toBeLessThan(types(events).indexOf("message"));
    // The fresh conversation's first request: the recap, then the prompt, in one user message.
    const fresh = callsFor("carry on").at(-1)!;
    expect(fresh.assistantTexts).toEqual([]);
    expect(fresh.userTexts).toHaveLength(2);
    const [recap, prompt] = fresh.userTexts;
    expect(prompt).toBe("carry on");
    expect(recap.startsWith(RECAP_HEAD)).toBe(true);
    expect(recap.length).toBe(resets[0].carriedOver.chars);
    expect(recap.length).toBeLessThanOrEqual(budget);
    // The newest turn fits; the older one does not, and the budget holds.
    expect(recap).toBe(`${RECAP_HEAD}\n\n${newest}\n\n${RECAP_TAIL}`);
    const after = await getSession(url, session.id);
    expect(after.agentSessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(after.agentSessionId).not.toBe(oldId);
    expect(after.turnCount).toBe(3);
    expect(await storedCursor(t.db.sql, session.id)).toMatchObject({ pastAgentSessionIds: [oldId] });
    expect(logs.named("claude-code resume failed")[0]).toMatchObject({
      level: 50,
      sessionId: session.id,
      agentSessionId: oldId,
      error: expect.stringMatching(/prompt is too long/i),
      cwd: t.workspace,
      transcriptPath: expectedTranscriptPath(t.configDir, t.workspace, oldId),
      transcriptBytes: expect.any(Number),
    });
    expect(logs.named("claude-code fresh fallback")[0]).toMatchObject({
      sessionId: session.id,
      oldAgentSessionId: oldId,
      newAgentSessionId: after.agentSessionId,
      carriedOverTurns: 1,
      carriedOverChars: recap.length,
    });

    // The fresh conversation is the session's from now on; the recap is sent once.
    t.fake.respond(() => ({ text: "still fresh" }));
    const next = await runTurn(url, session.id, "next one");
    expect(next.status).toBe("completed");
    expect(callsFor("next one").at(-1)?.userTexts).toEqual([recap, "carry on", "next one"]);
  });

  it("sends no recap when the session turned carry-over off", async () => {
    t.fake.respond(() => ({ text: "Noted: walrus" }));
    const { url, logs } = await boot({ MOORING_AGENT_IDLE_MS: "300" });
    const session = await createSessionWith(url, {
      workspace: t.workspace,
      agent: "claude",
      agentConfig: { carryOverChars: 0 },
    });
    await runTurn(url, session.id, "remember the word walrus");
    await logs.next("idle reap", { sessionId: session.id });
    await logs.next("claude-code exited", { agentPid: logs.named("claude-code spawned")[0].agentPid });
    t.fake.respond((r) => (r.assistantTexts.length > 0 ? { error: "prompt_too_long" } : { text: "fresh" }));
    const turn = await runTurn(url, session.id, "carry on");
    expect(turn.status).toBe("completed");
    const resets = (await taskEvents(t.db.sql, turn.id)).filter((e) => e.type === "session.reset");
    expect(resets.map((e) => e.data)).toEqual([{ reason: "resume_failed", notice: RESUME_FAILED_NOTICE }]);
    expect(callsFor("carry on").at(-1)?.userTexts).toEqual(["carry on"]);
  });

  it("fails a turn that outgrows the context with CONTEXT_TOO_LARGE, and the next one starts fresh", async () => {
    // The paste itself is too long; a recap that quotes it is not.
    t.fake.respond((r) =>
      r.userTexts.some((t) => t.includes("an enormous paste") && !t.startsWith(RECAP_HEAD))
        ? { error: "prompt_too_long" }
        : { text: "fine" },
    );
    const { url, logs } = await boot();
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
    await runTurn(url, session.id, "a small start");
    const oldId = (await getSession(url, session.id)).agentSessionId as string;

    const tooLarge = await runTurn(url, session.id, "an enormous paste");

    expect(tooLarge.status).toBe("failed");
    expect(tooLarge.error).toMatchObject({
      code: "CONTEXT_TOO_LARGE",
      message: expect.stringMatching(/prompt is too long/i),
    });
    expect((await getSession(url, session.id)).agentSessionId).toBe(oldId);
    // The failed turn's agent was closed gracefully, so the next turn resumes and falls back.
    await logs.next("claude-code exited", { agentPid: logs.named("claude-code spawned")[0].agentPid });

    const next = await runTurn(url, session.id, "shorter now");
    expect(next.status).toBe("completed");
    expect(next.result.text).toBe("fine");
    const events = await taskEvents(t.db.sql, next.id);
    expect(events.filter((e) => e.type === "session.reset").map((e) => e.data.reason)).toEqual([
      "resume_failed",
    ]);
    expect((await getSession(url, session.id)).agentSessionId).not.toBe(oldId);
    const [recap, prompt, ...rest] = callsFor("shorter now").at(-1)?.userTexts ?? [];
    expect(rest).toEqual([]);
    expect(prompt).toBe("shorter now");
    expect(recap).toContain("--- turn 1, user ---\na small start\n--- turn 1, assistant ---\nfine");
    expect(recap).toContain(
      "--- turn 2, user ---\nan enormous paste\n--- turn 2, assistant ---\n(no reply: the turn ended failed)",
    );
  });

  it("starts fresh, instead of failing forever, when the cursor's transcript never existed", async () => {
    t.fake.respond(() => ({ text: "fresh and working" }));
    const { url, logs } = await boot();
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
    const lost = randomUUID();
    await writeCursor(t.db.sql, session.id, {
      agentSessionId: lost,
      turnCount: 1,
      lastAssistantMessageId: null,
    });
    expect(existsSync(expectedTranscriptPath(t.configDir, t.workspace, lost))).toBe(false);

    const turn = await runTurn(url, session.id, "first words");

    expect(turn.status).toBe("completed");
    expect(turn.result.text).toBe("fresh and working");
    const events = await taskEvents(t.db.sql, turn.id);
    expect(events.filter((e) => e.type === "session.reset").map((e) => e.data)).toEqual([
      { reason: "unsaved", notice: unsavedNotice },
    ]);
    expect(unsavedNotice).toMatch(
      /^The server restarted before this conversation was saved, so its context was lost\./,
    );
    const after = await getSession(url, session.id);
    expect(after.agentSessionId).not.toBe(lost);
    expect(after.turnCount).toBe(2);
    expect(await storedCursor(t.db.sql, session.id)).toMatchObject({ pastAgentSessionIds: [lost] });
    expect(logs.named("claude-code resuming conversation")).toEqual([]);
    expect(logs.named("claude-code spawned")[0]).toMatchObject({ agentSessionId: "new" });
    expect(logs.named("claude-code fresh fallback")[0]).toMatchObject({
      oldAgentSessionId: lost,
      newAgentSessionId: after.agentSessionId,
      reason: "unsaved",
    });

    const next = await runTurn(url, session.id, "second words");
    expect(next.status).toBe("completed");
    expect(callsFor("second words")[0].userTexts).toEqual(["first words", "second words"]);
  });

  it("resumes an unconfirmed cursor whose transcript lives in another project folder", async () => {
    t.fake.respond((r) => ({
      text: r.lastUserText.includes("narwhal") ? "Noted: narwhal" : "Still narwhal",
    }));
    const { url, logs } = await boot({ MOORING_AGENT_IDLE_MS: "300" });
    const original = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
    await runTurn(url, original.id, "remember the word narwhal");
    const id = (await getSession(url, original.id)).agentSessionId as string;
    // One conversation, one process: the original's CLI is gone before another resumes its id.
    await logs.next("idle reap", { sessionId: original.id });
    await logs.next("claude-code exited", { agentPid: logs.named("claude-code spawned")[0].agentPid });

    const elsewhere = join(t.root, "moved-ws");
    await mkdir(elsewhere);
    const moved = await createSessionWith(url, { workspace: elsewhere, agent: "claude" });
    await writeCursor(t.db.sql, moved.id, { agentSessionId: id, turnCount: 1, lastAssistantMessageId: null });

    const turn = await runTurn(url, moved.id, "and now?");

    expect(turn.status).toBe("completed");
    expect(turn.result.text).toBe("Still narwhal");
    expect(types(await taskEvents(t.db.sql, turn.id))).not.toContain("session.reset");
    expect(callsFor("and now?")[0].userTexts).toContain("remember the word narwhal");
    expect(await getSession(url, moved.id)).toMatchObject({ agentSessionId: id, turnCount: 2 });
    const resumed = logs.named("claude-code resuming conversation").find((r) => r.sessionId === moved.id);
    expect(resumed).toMatchObject({
      agentSessionId: id,
      transcriptPath: expectedTranscriptPath(t.configDir, t.workspace, id),
    });
    expect(logs.named("claude-code spawned").find((r) => r.sessionId === moved.id)).toMatchObject({
      cwd: elsewhere,
      agentSessionId: id,
    });
  });
});
