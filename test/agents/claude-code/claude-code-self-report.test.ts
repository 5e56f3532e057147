/**
 * Self-reported context (agentConfig.selfReportContext) with the real Claude Code CLI
 * (node_modules/.bin/claude) against the loopback fake Anthropic API, through a gateway: the
 * `[ctx: ~NN%]` marker Claude is asked for never reaches clients, and its figure is reported next
 * to the token-based one.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  MarkerStrippingSink,
  markerTailStart,
  selfReportInstruction,
  stripMarker,
} from "../../../src/agents/claude-code/context-marker.js";
import type { AgentEvent } from "../../../src/agents/driver.js";
import { projectContextNote, resumeFailedNotice } from "../../../src/agents/claude-code/conversation.js";
import { SseReader, taskEvents, writeCursor } from "../../support/agent-gateway.js";
import { createSessionWith, submitPrompt, waitTerminal } from "../../support/turns.js";
import { useClaudeCode } from "../../support/claude-code.js";

const t = useClaudeCode("mooring-selfreport-");
const boot = () => t.boot();

/** The system prompt of a conversation call, as one string. */
const systemOf = (body: any): string =>
  typeof body?.system === "string" ? body.system : JSON.stringify(body?.system ?? "");

describe("self-reported context (Claude Code)", () => {
  it("strips a marker split across deltas, reports 42 beside the token figure and logs both", async () => {
    // The fake streams word by word: "\n[ctx:" and " ~42%]" arrive as two deltas.
    t.fake.respond((r) =>
      r.lastUserText === "how full are you"
        ? {
            text: "Plenty of room left.\n[ctx: ~42%]",
            inputTokens: 50_000,
            outputTokens: 9,
            chunkDelayMs: 60,
          }
        : undefined,
    );
    const { url, logs } = await boot();
    const session = await createSessionWith(url, {
      workspace: t.workspace,
      agent: "claude",
      agentConfig: { selfReportContext: true },
    });
    const feed = new SseReader(url, session.id);
    try {
      const task = await submitPrompt(url, session.id, "how full are you");
      const done = await waitTerminal(url, task.id, 90_000);
      expect(done.status).toBe("completed");
      expect(done.result.text).toBe("Plenty of room left.");
      expect(done.result.contextPercent).toBe(25);
      expect(done.result.selfReportedPercent).toBe(42);

      const events = await taskEvents(t.db.sql, task.id);
      const deltas = events.filter((e) => e.type === "message.delta").map((e) => e.data.text);
      // (The event log merges runs of deltas, so how many were stored depends on timing.)
      expect(deltas.join("")).toBe("Plenty of room left.");
      expect(deltas.join("")).not.toContain("[");
      expect(events.find((e) => e.type === "message")?.data).toEqual({ text: "Plenty of room left." });
      expect(events.find((e) => e.type === "usage")?.data).toMatchObject({
        contextPercent: 25,
        selfReportedPercent: 42,
      });
      // Clients saw the same: no marker on the live stream either.
      await feed.next("task.completed", task.id);
      const live = feed.items.filter((e) => e.taskId === task.id && e.type === "message.delta");
      expect(live.map((e) => e.data.text).join("")).toBe("Plenty of room left.");

      const line = await logs.next("context_usage");
      expect(line).toMatchObject({
        sessionId: session.id,
        sdkPercent: 25,
        selfReportedPercent: 42,
        drift: 17,
        inputTokens: 50_000,
      });
      // The CLI was asked for the marker.
      const call = t.fake.mainRequests().find((r) => r.lastUserText === "how full are you");
      expect(systemOf(call?.body)).toContain("[ctx: ~NN%]");
    } finally {
      feed.close();
    }
  }, 120_000);

  it("leaves a reply without a marker untouched: nothing stripped, the figure null, no drift line", async () => {
    t.fake.respond((r) =>
      r.lastUserText === "no marker please"
        ? { text: "Just text [ctx: soon] here.", inputTokens: 20_000 }
        : undefined,
    );
    const { url, logs } = await boot();
    const session = await createSessionWith(url, {
      workspace: t.workspace,
      agent: "claude",
      agentConfig: { selfReportContext: true },
    });
    const task = await submitPrompt(url, session.id, "no marker please");
    const done = await waitTerminal(url, task.id, 90_000);
    expect(done.status).toBe("completed");
    expect(done.result.text).toBe("Just text [ctx: soon] here.");
    expect(done.result.selfReportedPercent).toBeNull();
    const events = await taskEvents(t.db.sql, task.id);
    expect(
      events
        .filter((e) => e.type === "message.delta")
        .map((e) => e.data.text)
        .join(""),
    ).toBe("Just text [ctx: soon] here.");
    expect(events.find((e) => e.type === "usage")?.data.selfReportedPercent).toBeNull();
    await logs.next("context per turn", { taskId: task.id });
    expect(logs.named("context_usage")).toEqual([]);
  }, 120_000);

  it("names CLAUDE.md in the fresh-fallback notice when the t.workspace has one", async () => {
    await writeFile(join(t.workspace, "CLAUDE.md"), "# project notes\n");
    const { url } = await boot();
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
    // A resume of a conversation the CLI does not know: "No conversation found" → fresh fallback.
    await writeCursor(t.db.sql, session.id, {
      agentSessionId: "0b7cf2a4-54a3-4b0e-9a57-6c1d3f0e9d11",
      turnCount: 1,
      lastAssistantMessageId: "msg-known",
    });
    const task = await submitPrompt(url, session.id, "after the fallback");
    const done = await waitTerminal(url, task.id, 90_000);
    expect(done.status).toBe("completed");
    const reset = (await taskEvents(t.db.sql, task.id)).find((e) => e.type === "session.reset");
    expect(reset?.data).toEqual({
      reason: "resume_failed",
      notice: `${resumeFailedNotice} ${projectContextNote}`,
    });
  }, 120_000);
});

describe("the marker's rules", () => {
  it("holds back only what could start a marker and strips only a trailing one", () => {
    expect(markerTailStart("Hello [c")).toBe(5);
    expect(markerTailStart("Hello\n[ctx: ~4")).toBe(5);
    expect(markerTailStart("a [b] c")).toBe(7);
    expect(markerTailStart("x [ctx: ~42%] and more")).toBe(22);
    expect(stripMarker("done\n[ctx: ~7%]\n")).toEqual({ text: "done", percent: 7 });
    expect(stripMarker("[ctx: ~42%] then text")).toEqual({ text: "[ctx: ~42%] then text", percent: null });
    expect(selfReportInstruction).toContain("[ctx: ~NN%]");
  });

  it("streams every split of a reply without its marker, and releases a false start", () => {
    for (const reply of ["Room left.\n[ctx: ~42%]", "See [a] and [ctx: later]."]) {
      for (let cut = 1; cut < reply.length; cut++) {
        for (let cut2 = cut; cut2 < reply.length; cut2++) {
          const seen: AgentEvent[] = [];
          const sink = new MarkerStrippingSink({ emit: (e) => seen.push(e), saveCursor: async () => {} });
          for (const text of [reply.slice(0, cut), reply.slice(cut, cut2), reply.slice(cut2)]) {
            if (text !== "") sink.emit({ type: "message.delta", text });
          }
          sink.emit({ type: "message", text: reply });
          const expected = stripMarker(reply).text;
          const deltas = seen
            .filter((e) => e.type === "message.delta")
            .map((e) => (e as { text: string }).text);
          expect(deltas.join("")).toBe(expected);
          expect(seen[seen.length - 1]).toEqual({ type: "message", text: expected });
        }
      }
    }
  });
});
