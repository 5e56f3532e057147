/**
 * Fork and rollback on the real Claude Code CLI (docs/claude-code.md, Fork and rollback), against
 * the fake Anthropic API: what the model is sent after a fork at the last turn, a fork at an
 * earlier one, and a rollback (`--resume <id> --fork-session --resume-session-at <message>`), and
 * that the source's own conversation is left as it was.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { call } from "../../support/gateway.js";
import { createSessionWith, runTurn } from "../../support/turns.js";
import { useClaudeCode } from "../../support/claude-code.js";

const t = useClaudeCode("mooring-claude-fork-");
beforeEach(() => {
  t.fake.respond((r) => ({ text: `Answer to ${r.lastUserText}`, inputTokens: 1000, outputTokens: 5 }));
});
const boot = () => t.boot();

/** What the model was sent in the call that answered `prompt`: the user texts, oldest first. */
function sentFor(prompt: string): string[] {
  const calls = t.fake.mainRequests().filter((r) => r.lastUserText === prompt);
  expect(calls.length, `no model call for ${prompt}`).toBeGreaterThan(0);
  return calls[calls.length - 1].userTexts;
}

async function completed(url: string, sessionId: string, prompt: string) {
  const done = await runTurn(url, sessionId, prompt);
  expect(done.status, JSON.stringify(done.error)).toBe("completed");
  return done;
}

const sessionOf = async (url: string, id: string) => (await call(url, "GET", `/v1/sessions/${id}`)).body;

describe("claude-code fork and rollback", () => {
  it("forks at the last turn and at an earlier one, and rolls back a turn: the model sees the cut history", async () => {
    const { url } = await boot();
    const source = (await createSessionWith(url, { workspace: t.workspace, agent: "claude" })).id;
    await completed(url, source, "one");
    await completed(url, source, "two");
    await completed(url, source, "three");
    expect(sentFor("three")).toEqual(["one", "two", "three"]);
    const sourceAgentId = (await sessionOf(url, source)).agentSessionId;

    // At the last turn (the default): everything carried, in a new conversation of the CLI's.
    const atLast = await call(url, "POST", `/v1/sessions/${source}/fork`, {});
    expect(atLast.status).toBe(201);
    await completed(url, atLast.body.id, "four on the fork");
    expect(sentFor("four on the fork")).toEqual(["one", "two", "three", "four on the fork"]);
    const forkAgentId = (await sessionOf(url, atLast.body.id)).agentSessionId;
    expect(forkAgentId).toBeTruthy();
    expect(forkAgentId).not.toBe(sourceAgentId);

    // At an earlier turn: the CLI's conversation is cut after that turn's answer.
    const early = await call(url, "POST", `/v1/sessions/${source}/fork`, { atTurn: 0 });
    expect(early.status).toBe(201);
    await completed(url, early.body.id, "five on the early fork");
    expect(sentFor("five on the early fork")).toEqual(["one", "five on the early fork"]);
    // A branch, not a fresh start: no session.reset in either fork.
    for (const id of [atLast.body.id, early.body.id]) {
      const log = await call(url, "GET", `/v1/sessions/${id}/events?afterSeq=0&limit=1000`, undefined, {
        accept: "application/json",
      });
      expect(log.body.items.filter((e: { type: string }) => e.type === "session.reset")).toEqual([]);
    }

    // The source is untouched by both forks.
    await completed(url, source, "six on the source");
    expect(sentFor("six on the source")).toEqual(["one", "two", "three", "six on the source"]);
    expect((await sessionOf(url, source)).agentSessionId).toBe(sourceAgentId);

    // Roll back one turn: the next call no longer contains it.
    const rolled = await call(url, "POST", `/v1/sessions/${source}/rollback`, { turns: 1 });
    expect(rolled.status).toBe(200);
    const next = await completed(url, source, "seven after the rollback");
    expect(next.turnIndex).toBe(4);
    expect(sentFor("seven after the rollback")).toEqual(["one", "two", "three", "seven after the rollback"]);
    // Rolled back again, two turns this time, across the earlier rollback's boundary.
    expect((await call(url, "POST", `/v1/sessions/${source}/rollback`, { turns: 2 })).status).toBe(200);
    await completed(url, source, "eight");
    expect(sentFor("eight")).toEqual(["one", "two", "eight"]);
  }, 300_000);
});
