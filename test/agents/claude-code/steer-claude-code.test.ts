/**
 * Steering a Claude Code turn through the gateway: the real `claude` CLI against the fake
 * Anthropic API. What the CLI (2.1.328) does with a user message written to its stdin while a
 * turn runs (docs/claude-code.md, Steering): it takes it at the turn's next model call, as a
 * "The user sent a new message while you were working" block after the tool result, in the same
 * turn (one `result`); when the turn's last call is already streaming, it answers the message as
 * a turn of its own right after the `result`, and the driver waits for that one too.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import { SseReader, taskEvents } from "../../support/agent-gateway.js";
import type { FakeRequest } from "../../support/fake-anthropic.js";
import { call } from "../../support/gateway.js";
import { createSessionWith, submitPrompt, waitTerminal } from "../../support/turns.js";
import { useClaudeCode } from "../../support/claude-code.js";

const STEER = "please also mention the steering word PAPRIKA";

const t = useClaudeCode("mooring-steer-claude-");
const boot = async (): Promise<string> => (await t.boot()).url;

const carriesSteer = (r: FakeRequest) => JSON.stringify(r.body.messages).includes("PAPRIKA");
const hasToolResult = (r: FakeRequest) => JSON.stringify(r.body.messages).includes('"tool_result"');

it("a steer while a tool-using turn runs reaches the model within the same turn", async () => {
  const file = join(t.workspace, "notes.txt");
  await writeFile(file, "some notes\n");
  // First call: slow text, then a Read; the call after the tool result answers.
  t.fake.respond((r) => {
    if (!r.isMain) return undefined;
    if (!hasToolResult(r)) {
      return {
        text: "Let me read the notes file first, slowly and carefully, word by word.",
        chunkDelayMs: 300,
        toolUse: { id: "toolu_read_1", name: "Read", input: { file_path: file } },
      };
    }
    return { text: carriesSteer(r) ? "Read it. PAPRIKA." : "Read it." };
  });
  const url = await boot();
  const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
  const feed = new SseReader(url, session.id);
  try {
    const task = await submitPrompt(url, session.id, "summarize notes.txt");
    await feed.next("message.delta", task.id, 60_000);
    const steered = await call(url, "POST", `/v1/tasks/${task.id}/input`, { text: STEER });
    expect(steered.status).toBe(202);
    const done = await waitTerminal(url, task.id, 120_000);
    expect(done.status).toBe("completed");
    expect(done.result.text).toBe("Read it. PAPRIKA.");
    // The model saw the steer in the call after the tool result: the same turn, not a new one.
    const main = t.fake.mainRequests();
    const withSteer = main.filter(carriesSteer);
    expect(withSteer.length).toBeGreaterThan(0);
    expect(hasToolResult(withSteer[0])).toBe(true);
    expect(JSON.stringify(withSteer[0].body.messages)).toContain(
      "The user sent a new message while you were working",
    );
    const events = await taskEvents(t.db.sql, task.id);
    expect(events.filter((e) => e.type === "turn.input").map((e) => e.data.text)).toEqual([STEER]);
    expect(events.filter((e) => e.type === "task.completed")).toHaveLength(1);
  } finally {
    feed.close();
  }
}, 180_000);

it("a steer while the turn's last reply streams is answered after it, still within the mooring turn", async () => {
  t.fake.respond((r) => {
    if (!r.isMain) return undefined;
    if (r.lastUserText === STEER) return { text: "Steered answer PAPRIKA." };
    return { text: "A long plain answer that streams slowly word by word for a while.", chunkDelayMs: 300 };
  });
  const url = await boot();
  const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
  const feed = new SseReader(url, session.id);
  try {
    const task = await submitPrompt(url, session.id, "tell me something");
    await feed.next("message.delta", task.id, 60_000);
    expect((await call(url, "POST", `/v1/tasks/${task.id}/input`, { text: STEER })).status).toBe(202);
    const done = await waitTerminal(url, task.id, 120_000);
    expect(done.status).toBe("completed");
    // The turn ended at the result of the steered message, not at the first one.
    expect(done.result.text).toBe("Steered answer PAPRIKA.");
    expect(t.fake.mainRequests().filter((r) => r.lastUserText === STEER)).toHaveLength(1);
    // The next turn is not confused by a left-over result.
    const next = await submitPrompt(url, session.id, "and now?");
    const after = await waitTerminal(url, next.id, 120_000);
    expect(after.status).toBe("completed");
    expect(after.result.text).toBe("A long plain answer that streams slowly word by word for a while.");
  } finally {
    feed.close();
  }
}, 240_000);
