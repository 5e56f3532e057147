/**
 * Fork and rollback on an ACP agent (docs/api.md, Fork and rollback): the real test ACP agent
 * (test/support/acp-agent.ts) gets a fresh session with the carried history, rolled-back turns and
 * turns past the fork point left out, announced by `session.reset` of reason `rollback` or `fork`.
 */
import { describe, expect, it } from "vitest";
import { RECAP_HEAD } from "../../../src/domain/carry-over.js";
import { taskEvents } from "../../support/agent-gateway.js";
import { call } from "../../support/gateway.js";
import { createSessionWith, runTurn } from "../../support/turns.js";
import { useAcpAgents } from "../../support/acp-gateway.js";

const t = useAcpAgents("mooring-acp-fork-");

const boot = async (): Promise<string> =>
  (await t.boot({ "acp-test": t.entry({ permissions: "deny" }) })).url;

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
  it("rolls back through carried history", async () => {
    const url = await boot();
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
  }, 180_000);

  it("forks at an earlier turn through carried history", async () => {
    const url = await boot();
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
});
