/**
 * ACP agents through the gateway: a real ACP agent process (test/support/acp-agent.ts, built on
 * the SDK's agent side) driven by the worker and the conversation pool, with the session's resume
 * cursor in a real Postgres.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CANNOT_RESUME_NOTICE } from "../../../src/agents/acp/session-start.js";
import { RECAP_HEAD, RECAP_TAIL } from "../../../src/domain/carry-over.js";
import {
  getSession,
  isRunning,
  parseLogOutput,
  SseReader,
  storedCursor,
  taskEvents,
} from "../../support/agent-gateway.js";
import { call, eventually, spawnGateway, testEnv } from "../../support/gateway.js";
import { createSessionWith, runTurn, submitPrompt, waitTerminal } from "../../support/turns.js";
import { useAcpAgents } from "../../support/acp-gateway.js";

const t = useAcpAgents("mooring-gw-acp-");

function agents(): Record<string, unknown> {
  const entry = (permissions: string, env: Record<string, string> = {}) =>
    t.entry({ env: { ACP_TEST_STATE_DIR: t.stateDir, ...env }, permissions });
  return {
    "acp-test": entry("client"),
    "acp-noload": entry("deny", { ACP_TEST_NO_LOAD: "1" }),
    "acp-deny": entry("deny"),
    "acp-allow": entry("allow"),
  };
}

function gatewayEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { MOORING_AGENTS: JSON.stringify(agents()), MOORING_HEARTBEAT_MS: "500", ...extra };
}

const boot = (extra: Record<string, string> = {}) => t.boot(agents(), extra);

const types = (events: { type: string }[]) => events.map((e) => e.type);
const pidIn = (text: string) => Number(/pid: (\d+)/.exec(text)?.[1]);

describe("acp agents through the gateway", () => {
  it("streams a prompt's updates and measures context by the agent's own window, capped at 100", async () => {
    const { url, logs } = await boot();
    const session = await createSessionWith(url, {
      workspace: t.workspace,
      agent: "acp-test",
      agentConfig: { contextSuffix: true },
    });
    const feed = new SseReader(url, session.id);
    try {
      const task = await submitPrompt(url, session.id, "[chunks 3] [pid] [usage 300000 1000000]");
      const delta = await feed.next("message.delta", task.id);
      expect(delta.data.text).toMatch(/^chunk 1\/3 /);
      const done = await waitTerminal(url, task.id);

      expect(done.status).toBe("completed");
      const pid = pidIn(done.result.text);
      expect(done.result).toEqual({
        text: `chunk 1/3 chunk 2/3 chunk 3/3 pid: ${pid}\n[ctx: 30%]`,
        stopReason: "end_turn",
        usage: {
          inputTokens: 300_000,
          outputTokens: 0,
          cacheCreationInputTokens: 0,
          cacheReadInputTokens: 0,
        },
        contextPercent: 30,
      });
      const events = await taskEvents(t.db.sql, task.id);
      expect(types(events).filter((t) => t !== "message.delta")).toEqual([
        "task.queued",
        "task.started",
        "usage",
        "message",
        "task.completed",
      ]);
      expect(
        events
          .filter((e) => e.type === "message.delta")
          .map((e) => e.data.text)
          .join(""),
      ).toBe(`chunk 1/3 chunk 2/3 chunk 3/3 pid: ${pid}`);
      expect(events.find((e) => e.type === "usage")?.data).toMatchObject({
        inputTokens: 300_000,
        contextWindow: 1_000_000,
        contextPercent: 30,
      });
      await feed.next("task.completed", task.id);
      expect(feed.items.filter((e) => e.taskId === task.id).map((e) => e.seq)).toEqual(
        events.map((e) => e.seq),
      );
      const after = await getSession(url, session.id);
      expect(after.contextUsage).toEqual({ inputTokens: 300_000, contextWindow: 1_000_000, percent: 30 });
      expect(after.agentSessionId).toMatch(/^sess-/);
      expect(after.turnCount).toBe(1);
      expect(logs.named("agent spawned")).toEqual([
        expect.objectContaining({
          sessionId: session.id,
          cwd: t.workspace,
          agentSessionId: "new",
          model: expect.any(String),
        }),
      ]);
      expect(logs.named("context per turn")[0]).toMatchObject({
        taskId: task.id,
        inputTokens: 300_000,
        percent: 30,
      });

      // The agent's default window (200,000) this time: 250,000 tokens is over it, shown as 100.
      const second = await runTurn(url, session.id, "[pid] [usage 250000]");
      expect(second.result).toMatchObject({ text: `pid: ${pid}\n[ctx: 100%]`, contextPercent: 100 });
      expect((await getSession(url, session.id)).contextUsage).toEqual({
        inputTokens: 250_000,
        contextWindow: 200_000,
        percent: 100,
      });
      expect(logs.named("agent spawned")).toHaveLength(1);
    } finally {
      feed.close();
    }
  });

  it("reports tool calls and results with previews, the full output on demand", async () => {
    const { url } = await boot();
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" });

    const done = await runTurn(url, session.id, "[tool 5000] [tool 10 fail]");

    expect(done.status).toBe("completed");
    const events = await taskEvents(t.db.sql, done.id);
    const tools = events.filter((e) => e.type === "tool.call" || e.type === "tool.result");
    expect(tools.map((e) => [e.type, e.data.id])).toEqual([
      ["tool.call", "call-1"],
      ["tool.result", "call-1"],
      ["tool.call", "call-2"],
      ["tool.result", "call-2"],
    ]);
    expect(tools[0].data).toEqual({ id: "call-1", name: "generate", input: { bytes: 5000 } });
    expect(tools[1].data).toMatchObject({ id: "call-1", isError: false, bytes: 5000, truncated: true });
    expect(tools[1].data.preview).toBe("x".repeat(2048));
    expect(tools[3].data).toMatchObject({ id: "call-2", isError: true, preview: "x".repeat(10), bytes: 10 });
    const full = await call(url, "GET", `/v1/sessions/${session.id}/events/${tools[1].seq}/payload`);
    expect(full.status).toBe(200);
    expect(full.body.payload).toEqual({ output: "x".repeat(5000) });
  });

  it("answers permission requests by the entry's policy or, where it allows, the session's choice", async () => {
    const { url, logs } = await boot();
    const answers: Record<string, string> = {};
    const cases: [string, string, Record<string, unknown>][] = [
      ["client-allow", "acp-test", { permissions: "allow" }],
      ["client-deny", "acp-test", { permissions: "deny" }],
      ["client-default", "acp-test", {}],
      ["entry-allow", "acp-allow", {}],
      ["entry-deny", "acp-deny", {}],
    ];
    for (const [name, agent, agentConfig] of cases) {
      const session = await createSessionWith(url, { workspace: t.workspace, agent, agentConfig });
      const done = await runTurn(url, session.id, "[permission]");
      expect(done.status).toBe("completed");
      answers[name] = done.result.text;
    }
    expect(answers).toEqual({
      "client-allow": "permission: allow-once ",
      "client-deny": "permission: reject-once ",
      "client-default": "permission: reject-once ",
      "entry-allow": "permission: allow-once ",
      "entry-deny": "permission: reject-once ",
    });
    expect(logs.named("agent permission request answered").map((r) => r.answer)).toEqual([
      "allow",
      "deny",
      "deny",
      "allow",
      "deny",
    ]);

    // Only an entry with `permissions: "client"` lets a session choose; nothing else is accepted.
    for (const [agent, agentConfig] of [
      ["acp-deny", { permissions: "allow" }],
      ["acp-test", { permissions: "always" }],
      ["acp-test", { command: "/bin/sh" }],
    ] as const) {
      const refused = await call(url, "POST", "/v1/sessions", { workspace: t.workspace, agent, agentConfig });
      expect(refused.status).toBe(400);
      expect(refused.body.error.code).toBe("INVALID_REQUEST");
      expect(refused.body.error.message).toContain("agentConfig.");
    }
  });

  it("cancels a running prompt and keeps the agent warm for the next turn", async () => {
    const { url, logs } = await boot();
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" });
    const pid = pidIn((await runTurn(url, session.id, "[pid]")).result.text);
    const feed = new SseReader(url, session.id);
    try {
      const task = await submitPrompt(url, session.id, "[slow]");
      await feed.next("message.delta", task.id);
      const cancel = await call(url, "POST", `/v1/tasks/${task.id}/cancel`);
      expect(cancel.status).toBe(200);
      const done = await waitTerminal(url, task.id);

      expect(done.status).toBe("cancelled");
      expect(done.error).toMatchObject({ code: "CANCELLED" });
      expect(done.result).toMatchObject({ stopReason: "cancelled", text: expect.stringMatching(/^tick 1 /) });
      // Settled by session/cancel itself: the escalation would have terminated the agent, and the
      // next turn finds the same process (one spawn, the same pid).
      expect(logs.named("agent ignored session/cancel; terminating it")).toEqual([]);
      expect((await feed.next("task.cancelled", task.id)).data.status).toBe("cancelled");
      expect(logs.named("cancelling agent turn")).toHaveLength(1);

      const next = await runTurn(url, session.id, "[pid]");
      expect(next.status).toBe("completed");
      expect(pidIn(next.result.text)).toBe(pid);
      expect(logs.named("agent spawned")).toHaveLength(1);
    } finally {
      feed.close();
    }
  });

  it("reaps an idle agent and resumes with session/load on the next turn", async () => {
    const { url, logs } = await boot({ MOORING_AGENT_IDLE_MS: "300" });
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" });
    const first = await runTurn(url, session.id, "first [pid] [usage 4321]");
    const firstPid = pidIn(first.result.text);
    const { agentSessionId } = await getSession(url, session.id);

    const reap = await logs.next("idle reap", { sessionId: session.id });
    expect(reap).toMatchObject({ workspace: t.workspace, tokens: 4321 });
    expect(reap.idleMs).toBeGreaterThanOrEqual(290);
    await logs.next("agent exited", { sessionId: session.id });
    await eventually(async () => !isRunning(firstPid));

    const second = await runTurn(url, session.id, "[history] [pid]");

    expect(second.status).toBe("completed");
    expect(second.result.text).toMatch(/^history: 1 \[first \[pid\] \[usage 4321\]\]/);
    expect(pidIn(second.result.text)).not.toBe(firstPid);
    expect(await getSession(url, session.id)).toMatchObject({ agentSessionId, turnCount: 2 });
    expect(types(await taskEvents(t.db.sql, second.id))).not.toContain("session.reset");
    expect(logs.named("agent spawned")[1]).toMatchObject({ cwd: t.workspace, agentSessionId });
    expect(logs.named("resuming agent session")[0]).toMatchObject({ agentSessionId, cwd: t.workspace });
    expect(logs.named("agent session resumed")).toHaveLength(1);
  });

  it("starts fresh with session.reset when the agent cannot load the saved session", async () => {
    const { url, logs } = await boot({ MOORING_AGENT_IDLE_MS: "300" });
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" });
    await runTurn(url, session.id, "remember me");
    const oldId = (await getSession(url, session.id)).agentSessionId as string;
    await logs.next("idle reap", { sessionId: session.id });
    await logs.next("agent exited", { sessionId: session.id });
    // The agent lost what it saved (like a transcript cleaned up): session/load answers an error.
    await rm(join(t.stateDir, `${oldId}.json`));

    const turn = await runTurn(url, session.id, "[history]");

    expect(turn.status).toBe("completed");
    expect(turn.result.text).toMatch(/^history: 0 \[\]$/);
    const events = await taskEvents(t.db.sql, turn.id);
    const resets = events.filter((e) => e.type === "session.reset").map((e) => e.data);
    expect(resets).toEqual([
      {
        reason: "resume_failed",
        notice: `Session context was too large to resume — starting fresh. Context carried over: a recap of the last 1 turn (${resets[0]?.carriedOver?.chars} characters) from the session's log.`,
        carriedOver: { turns: 1, chars: expect.any(Number) },
      },
    ]);
    const after = await getSession(url, session.id);
    expect(after.agentSessionId).toMatch(/^sess-/);
    expect(after.agentSessionId).not.toBe(oldId);
    expect(after.turnCount).toBe(2);
    expect(await storedCursor(t.db.sql, session.id)).toMatchObject({ pastAgentSessionIds: [oldId] });
    expect(logs.named("agent session resume failed; starting fresh")[0]).toMatchObject({
      level: 50,
      sessionId: session.id,
      agentSessionId: oldId,
      cwd: t.workspace,
      err: expect.any(String),
    });
    expect(logs.named("fresh agent session started")[0]).toMatchObject({
      oldAgentSessionId: oldId,
      newAgentSessionId: after.agentSessionId,
    });
  });

  it("carries a recap into the first prompt of an agent without loadSession after the gateway is killed", async () => {
    const first = await spawnGateway(testEnv(t.db.url, { ...gatewayEnv(), LOG_LEVEL: "info" }));
    let killed = false;
    try {
      await first.waitReady();
      const session = await createSessionWith(first.url, { workspace: t.workspace, agent: "acp-noload" });
      expect((await runTurn(first.url, session.id, "remember the heron")).result.text).toBe(
        "echo: remember the heron",
      );
      const turn = await runTurn(first.url, session.id, "and the otter [pid]");
      t.agentPids.add(pidIn(turn.result.text));
      const oldId = (await getSession(first.url, session.id)).agentSessionId;

      first.kill("SIGKILL");
      killed = true;
      expect(await first.exited).toBe("SIGKILL");
      await eventually(async () => !isRunning(pidIn(turn.result.text)));

      const { url, logs } = await boot();
      const after = await runTurn(url, session.id, "what do you know? [recap]");

      expect(after.status).toBe("completed");
      const [head, ...recapLines] = after.result.text.split("\n");
      expect(head).toBe("recap: 1 block(s)");
      const recap = recapLines.join("\n");
      expect(recap.startsWith(RECAP_HEAD)).toBe(true);
      expect(recap.endsWith(RECAP_TAIL)).toBe(true);
      expect(recap.length).toBeLessThanOrEqual(12_000);
      const order = ["remember the heron", "echo: remember the heron", "and the otter [pid]", "pid: "].map(
        (s) => recap.indexOf(s),
      );
      expect(order.every((at) => at > 0)).toBe(true);
      expect(order).toEqual([...order].sort((a, b) => a - b));
      const resets = (await taskEvents(t.db.sql, after.id))
        .filter((e) => e.type === "session.reset")
        .map((e) => e.data);
      expect(resets).toEqual([
        {
          reason: "resume_failed",
          notice: `${CANNOT_RESUME_NOTICE} Context carried over: a recap of the last 2 turns (${recap.length} characters) from the session's log.`,
          carriedOver: { turns: 2, chars: recap.length },
        },
      ]);
      expect(logs.named("fresh agent session started")[0]).toMatchObject({
        oldAgentSessionId: oldId,
        carriedOverTurns: 2,
        carriedOverChars: recap.length,
      });
      // Sent once: the fresh session's next prompt has no recap.
      expect((await runTurn(url, session.id, "[recap]")).result.text).toBe("recap: none");
    } finally {
      if (!killed) first.kill("SIGKILL");
      await first.exited;
    }
  });

  it("resumes with session/load after the gateway process is killed", async () => {
    const first = await spawnGateway(testEnv(t.db.url, { ...gatewayEnv(), LOG_LEVEL: "info" }));
    let killed = false;
    try {
      await first.waitReady();
      const session = await createSessionWith(first.url, { workspace: t.workspace, agent: "acp-test" });
      const turn = await runTurn(first.url, session.id, "before the crash [pid]");
      expect(turn.status).toBe("completed");
      const agentPid = pidIn(turn.result.text);
      t.agentPids.add(agentPid);
      const { agentSessionId } = await getSession(first.url, session.id);
      expect(parseLogOutput(first.output()).find((r) => r.msg === "agent spawned")).toMatchObject({
        agentSessionId: "new",
        cwd: t.workspace,
      });

      first.kill("SIGKILL");
      killed = true;
      expect(await first.exited).toBe("SIGKILL");
      // The orphaned agent sees its stdin close and exits by itself.
      await eventually(async () => !isRunning(agentPid));

      const { url, logs } = await boot();
      const second = await runTurn(url, session.id, "[history]");

      expect(second.status).toBe("completed");
      expect(second.result.text).toBe("history: 1 [before the crash [pid]]");
      expect(await getSession(url, session.id)).toMatchObject({ agentSessionId, turnCount: 2 });
      expect(logs.named("agent spawned")[0]).toMatchObject({ agentSessionId });
      expect(logs.named("agent session resumed")).toHaveLength(1);
    } finally {
      if (!killed) first.kill("SIGKILL");
      await first.exited;
    }
  });

  it("fails AGENT_CRASHED when the agent exits mid-turn, and the next turn runs in a new process", async () => {
    const { url, logs } = await boot();
    const session = await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" });
    const before = await runTurn(url, session.id, "[pid]");
    const firstPid = pidIn(before.result.text);

    const crashed = await runTurn(url, session.id, "[exit]");

    expect(crashed.status).toBe("failed");
    expect(crashed.error).toEqual({
      code: "AGENT_CRASHED",
      message: 'The agent "acp-test" stopped mid-turn: it exited with code 3.',
    });
    const events = await taskEvents(t.db.sql, crashed.id);
    expect(events.filter((e) => e.type === "message.delta").map((e) => e.data.text)).toEqual([
      "about to exit ",
    ]);
    expect(types(events).at(-1)).toBe("task.failed");
    expect(logs.named("agent died during a turn")[0]).toMatchObject({
      level: 50,
      sessionId: session.id,
      stderr: expect.stringContaining("fatal: simulated crash"),
    });
    expect(isRunning(firstPid)).toBe(false);

    const after = await runTurn(url, session.id, "[pid] [history]");
    expect(after.status).toBe("completed");
    expect(pidIn(after.result.text)).not.toBe(firstPid);
    expect(after.result.text).toContain("history: 1 [[pid]]");
    const { agentSessionId } = await storedCursor(t.db.sql, session.id);
    expect(logs.named("agent spawned").map((r) => r.agentSessionId)).toEqual(["new", agentSessionId]);
  });
});
