/**
 * NUL and lone surrogates in agent output. A real ACP agent
 * (test/support/acp-agent.ts, `[badbytes]`) puts them in message text, a tool call's name and input
 * (a key included) and the tool's output. Postgres stores neither, and one such event used to
 * freeze its event lane: every session on it stopped. Now the driver boundary makes them storable
 * (NUL and lone surrogates become U+FFFD), the turn completes, and another session on the same
 * lane runs meanwhile.
 */

import { beforeEach, expect, it } from "vitest";
import { createSessionWith, submitPrompt, waitTerminal } from "../../support/turns.js";
import { useAcpAgents } from "../../support/acp-gateway.js";
import type { TestGateway } from "../../support/gateway.js";
import type { LogRecorder } from "../../support/agent-gateway.js";

const t = useAcpAgents("mooring-badbytes-");

// One lane: every session shares the writer a refused event used to freeze.
let gw: TestGateway;
let logs: LogRecorder;
beforeEach(async () => {
  ({ gw, logs } = await t.boot({ "acp-test": t.entry() }, { MOORING_EVENT_FLUSH_LANES: "1" }));
});

/** No NUL and no lone surrogate anywhere in a value, keys included. */
function storable(value: unknown): boolean {
  const text = JSON.stringify(value);
  return !/\\u0000|\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i.test(
    text,
  );
}

it("a turn whose agent emits NUL and lone surrogates completes, stored sanitized, while another session on the lane runs", async () => {
  const bad = await createSessionWith(gw.url, { workspace: t.workspace, agent: "acp-test" });
  const other = await createSessionWith(gw.url, { workspace: t.workspace, agent: "simulated" });

  const badTask = await submitPrompt(gw.url, bad.id, "[badbytes] [chunks 2]");
  const otherTask = await submitPrompt(gw.url, other.id, "[deltas 20]");
  const [badDone, otherDone] = await Promise.all([
    waitTerminal(gw.url, badTask.id),
    waitTerminal(gw.url, otherTask.id),
  ]);
  expect(otherDone.status).toBe("completed");
  expect(badDone.status).toBe("completed");
  expect(badDone.result.text).toContain("text nul\uFFFD high\uFFFD low\uFFFD end");

  const rows = await t.db.sql<{ seq: number; type: string; data: any; payload: any }[]>`
    select seq, type, data, payload from events where task_id = ${badTask.id} order by seq`;
  expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => rows[0].seq + i));
  expect(rows[rows.length - 1].type).toBe("task.completed");
  for (const row of rows) expect(storable(row)).toBe(true);

  const text = rows
    .filter((r) => r.type === "message.delta")
    .map((r) => r.data.text)
    .join("");
  expect(text).toContain("text nul\uFFFD high\uFFFD low\uFFFD end");
  expect(text).toContain("after \uFFFD");
  expect(text).toContain("chunk 2/2");

  const call = rows.find((r) => r.type === "tool.call")!;
  expect(call.data.name).toBe("run nul\uFFFD high\uFFFD low\uFFFD end");
  expect(call.data.input).toEqual({
    command: "printf 'a\uFFFDb' nul\uFFFD high\uFFFD low\uFFFD end",
    "key\uFFFD\uFFFD": ["nul\uFFFD high\uFFFD low\uFFFD end"],
  });
  const result = rows.find((r) => r.type === "tool.result")!;
  expect(JSON.stringify(result.data)).toContain("a\uFFFDb nul\uFFFD high\uFFFD low\uFFFD end");

  // Nothing was refused along the way: the text was storable before it reached the event log.
  expect(logs.items.filter((r) => /flush failed|refused/.test(r.msg))).toEqual([]);
  // The session row (the agent's resume cursor) went through the same boundary.
  const [session] = await t.db.sql`select last_seq from sessions where id = ${bad.id}`;
  expect(session.lastSeq).toBe(rows[rows.length - 1].seq);
}, 60_000);
