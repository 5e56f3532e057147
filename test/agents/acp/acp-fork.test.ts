/**
 * Fork and rollback on an ACP agent (docs/api.md, Fork and rollback; docs/acp.md): the real test
 * ACP agent (test/support/acp-agent.ts) gets a fresh session with the carried history, rolled-back
 * turns and turns past the fork point left out, announced by `session.reset` of reason `rollback`
 * or `fork`. A fork at the source's newest state, of an agent that advertises
 * `sessionCapabilities.fork`, is made by `session/fork` instead: no recap, no reset; when that
 * fails, or the source has had a turn since the fork point (ended or still running) by the time the
 * fork's first turn starts, the recap again.
 */
import { describe, expect, it } from "vitest";
import { RECAP_HEAD } from "../../../src/domain/carry-over.js";
import { taskEvents } from "../../support/agent-gateway.js";
import { call } from "../../support/gateway.js";
import { cancelTask, createSessionWith, runTurn, submitPrompt, waitStatus } from "../../support/turns.js";
import { useAcpAgents } from "../../support/acp-gateway.js";

const t = useAcpAgents("mooring-acp-fork-");

/** `fork`: the agent's ACP_TEST_FORK (advertise and serve `session/fork`, or answer it with an error). */
async function boot(fork?: "1" | "fail"): Promise<string> {
  const entry = t.entry({ permissions: "deny" });
  const env = { ...(entry.env as Record<string, string>), ...(fork ? { ACP_TEST_FORK: fork } : {}) };
  return (await t.boot({ "acp-test": { ...entry, env } }, { MOORING_HEARTBEAT_MS: "500" })).url;
}

async function completed(url: string, sessionId: string, prompt: string) {
  const done = await runTurn(url, sessionId, prompt);
  expect(done.status, JSON.stringify(done.error)).toBe("completed");
  return done;
}

/** The recap the agent got ahead of the `[recap]` prompt, and the turn's reset event. */
async function recapOf(url: string, sessionId: string) {
  const done = await completed(url, sessionId, "what do you know? [recap]");
  const [head, ...lines] = done.result.text.split("\n");
  expect(head).toBe("recap: 1 block(s)");
  const reset = (await taskEvents(t.db.sql, done.id)).find((e) => e.type === "session.reset");
  return { turn: done, recap: lines.join("\n"), reset };
}

describe("acp fork and rollback", () => {
  // An agent that can fork a conversation whole still cannot cut one: a rollback takes the recap.
  it.each([
    ["cannot fork", undefined],
    ["advertises session/fork", "1"],
  ] as const)(
    "rolls back through carried history (the agent %s)",
    async (_, fork) => {
      const url = await boot(fork);
      const id = (await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" })).id;
      await completed(url, id, "remember the heron");
      await completed(url, id, "and the otter");
      await completed(url, id, "and the crow");
      expect((await call(url, "POST", `/v1/sessions/${id}/rollback`, { turns: 1 })).status).toBe(200);
      const { turn, recap, reset } = await recapOf(url, id);
      expect(turn.turnIndex).toBe(3);
      expect(recap.startsWith(RECAP_HEAD)).toBe(true);
      expect(recap).toContain("remember the heron");
      expect(recap).toContain("and the otter");
      expect(recap).not.toContain("crow");
      expect(reset?.data).toMatchObject({ reason: "rollback", carriedOver: { turns: 2 } });
      // The reset was applied once: the next turn continues the fresh session, with no new reset.
      const after = await completed(url, id, "and then?");
      expect((await taskEvents(t.db.sql, after.id)).some((e) => e.type === "session.reset")).toBe(false);
    },
    180_000,
  );

  it("forks at an earlier turn through carried history, even where the agent could fork", async () => {
    const url = await boot("1");
    const source = (await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" })).id;
    await completed(url, source, "remember the heron");
    await completed(url, source, "and the otter");
    const fork = await call(url, "POST", `/v1/sessions/${source}/fork`, { atTurn: 0 });
    expect(fork.status).toBe(201);
    const { turn, recap, reset } = await recapOf(url, fork.body.id);
    expect(turn.turnIndex).toBe(1);
    expect(recap).toContain("remember the heron");
    expect(recap).not.toContain("otter");
    expect(reset?.data).toMatchObject({ reason: "fork", carriedOver: { turns: 1 } });
  }, 180_000);

  /**
   * A source with two turns, forked at its last one; the fork's first turn asks what the agent
   * holds, after `meanwhile` (given the source's id) has done what it does.
   */
  async function forkAtLast(url: string, meanwhile?: (source: string) => Promise<void>) {
    const source = (await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" })).id;
    await completed(url, source, "remember the heron");
    const last = await completed(url, source, "and the otter [origin]");
    const sourceAgentSession = (await call(url, "GET", `/v1/sessions/${source}`)).body.agentSessionId;
    const fork = await call(url, "POST", `/v1/sessions/${source}/fork`, {});
    expect(fork.status).toBe(201);
    expect(fork.body.forkedFrom).toEqual({ sessionId: source, turnIndex: last.turnIndex });
    await meanwhile?.(source);
    const turn = await completed(url, fork.body.id, "what do you hold? [origin] [history] [recap]");
    const events = await taskEvents(t.db.sql, turn.id);
    return { text: turn.result.text as string, events, sourceAgentSession, forkId: fork.body.id };
  }

  it("forks at the source's newest state with session/fork when the agent advertises it", async () => {
    const url = await boot("1");
    const { text, events, sourceAgentSession, forkId } = await forkAtLast(url);
    expect(typeof sourceAgentSession).toBe("string");
    // The agent's own copy of the source's conversation: both exchanges, and no recap prompt.
    expect(text).toContain(`origin: fork of ${sourceAgentSession}`);
    expect(text).toContain("history: 2 [remember the heron | and the otter [origin]]");
    expect(text).toContain("recap: none");
    expect(events.some((e) => e.type === "session.reset")).toBe(false);
    // The fork runs its own agent conversation from then on, resumed like any other.
    const forkAgentSession = (await call(url, "GET", `/v1/sessions/${forkId}`)).body.agentSessionId;
    expect(forkAgentSession).not.toBe(sourceAgentSession);
    const next = await completed(url, forkId, "and then? [history]");
    expect(next.result.text).toContain(
      "history: 3 [remember the heron | and the otter [origin] | what do you hold?",
    );
  }, 180_000);

  it("forks at the source's newest state through carried history when the agent cannot fork", async () => {
    const url = await boot();
    const { text, events } = await forkAtLast(url);
    expect(text).toContain("origin: new");
    expect(text).toContain("history: 0 []");
    expect(text).toContain("recap: 1 block(s)");
    expect(text).toContain("remember the heron");
    const reset = events.find((e) => e.type === "session.reset");
    expect(reset?.data).toMatchObject({ reason: "fork", carriedOver: { turns: 2 } });
  }, 180_000);

  // The fork was at the source's newest state when made, but the source moved on before the fork's
  // first turn: session/fork would copy the later exchange too, so the fork takes the recap.
  it("forks through carried history when the source ran a turn after the fork was made", async () => {
    const url = await boot("1");
    const { text, events } = await forkAtLast(url, async (source) => {
      await completed(url, source, "and the crow");
    });
    expect(text).toContain("origin: new");
    expect(text).toContain("history: 0 []");
    expect(text).toContain("recap: 1 block(s)");
    expect(text).toContain("remember the heron");
    expect(text).not.toContain("crow");
    const reset = events.find((e) => e.type === "session.reset");
    expect(reset?.data).toMatchObject({ reason: "fork", carriedOver: { turns: 2 } });
  }, 180_000);

  it("forks through carried history while a later turn of the source is running", async () => {
    const url = await boot("1");
    let running = "";
    const { text, events } = await forkAtLast(url, async (source) => {
      running = (await submitPrompt(url, source, "and the crow [slow]")).id;
      expect((await waitStatus(url, running, "running")).status).toBe("running");
    });
    expect(text).toContain("origin: new");
    expect(text).toContain("history: 0 []");
    expect(text).toContain("remember the heron");
    expect(text).not.toContain("crow");
    const reset = events.find((e) => e.type === "session.reset");
    expect(reset?.data).toMatchObject({ reason: "fork", carriedOver: { turns: 2 } });
    expect((await cancelTask(url, running)).status).toBe("cancelled");
  }, 180_000);

  it("falls back to the carried history when session/fork fails", async () => {
    const url = await boot("fail");
    const { text, events } = await forkAtLast(url);
    expect(text).toContain("origin: new");
    expect(text).toContain("history: 0 []");
    expect(text).toContain("recap: 1 block(s)");
    const reset = events.find((e) => e.type === "session.reset");
    expect(reset?.data).toMatchObject({ reason: "fork", carriedOver: { turns: 2 } });
  }, 180_000);

  it("forks through carried history when a later turn of the source reached its agent", async () => {
    const url = await boot("1");
    const source = (await createSessionWith(url, { workspace: t.workspace, agent: "acp-test" })).id;
    const kept = await completed(url, source, "remember the heron");
    // A failed turn is no fork point, yet its prompt may be in the agent's conversation (a real
    // agent keeps it): session/fork would copy it, so the fork takes the recap.
    const failed = await runTurn(url, source, "and the otter [error]");
    expect(failed.status).toBe("failed");
    const fork = await call(url, "POST", `/v1/sessions/${source}/fork`, {});
    expect(fork.status).toBe(201);
    expect(fork.body.forkedFrom).toEqual({ sessionId: source, turnIndex: kept.turnIndex });
    const turn = await completed(url, fork.body.id, "what do you hold? [origin] [history] [recap]");
    expect(turn.result.text).toContain("origin: new");
    expect(turn.result.text).toContain("history: 0 []");
    expect(turn.result.text).toContain("remember the heron");
    expect(turn.result.text).not.toContain("otter");
    const reset = (await taskEvents(t.db.sql, turn.id)).find((e) => e.type === "session.reset");
    expect(reset?.data).toMatchObject({ reason: "fork", carriedOver: { turns: 1 } });
  }, 180_000);
});
