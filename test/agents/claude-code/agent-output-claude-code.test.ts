/**
 * NUL bytes in agent output as ordinary work makes them: the real Claude Code CLI (against the loopback fake
 * of the Anthropic API) runs a tool whose output holds NUL bytes, as `printf 'a\000b'`, `find
 * -print0` or `cat` of a binary file do. Its `tool_result` carries `\u0000`, which Postgres' jsonb
 * refuses; the turn used to freeze its event lane. Now it completes with the NUL stored as U+FFFD,
 * and another session's turn on the same lane completes meanwhile.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeEach, expect, it } from "vitest";
import { createSessionWith, submitPrompt, waitTerminal } from "../../support/turns.js";
import { useClaudeCode } from "../../support/claude-code.js";
import type { TestGateway } from "../../support/gateway.js";

const t = useClaudeCode("mooring-claude-nul-");
let gw: TestGateway;
beforeEach(async () => {
  ({ gw } = await t.boot({ MOORING_EVENT_FLUSH_LANES: "1" }));
});

it("a tool result holding NUL bytes is stored (as U+FFFD) and the turn completes; the lane goes on", async () => {
  const file = join(t.workspace, "zero.txt");
  await writeFile(file, "a\u0000b\n");
  t.fake.respond((r) =>
    r.hasToolResult
      ? { text: "Read it." }
      : { text: "Reading.", toolUse: { id: "toolu_nul_1", name: "Read", input: { file_path: file } } },
  );
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "claude" });
  const other = await createSessionWith(gw.url, { workspace: t.workspace, agent: "simulated" });
  const task = await submitPrompt(gw.url, session.id, "read zero.txt");
  const done = await waitTerminal(gw.url, task.id, 60_000);
  const otherDone = await waitTerminal(gw.url, (await submitPrompt(gw.url, other.id, "[deltas 5]")).id);
  expect(otherDone.status).toBe("completed");
  expect(done.status).toBe("completed");
  expect(done.result.text).toContain("Read it.");

  // What the CLI reported did hold NUL: the fake API got it back in the tool result.
  const toolResultSent = t.fake.mainRequests().find((r) => r.hasToolResult);
  expect(JSON.stringify(toolResultSent?.body)).toContain("a\\u0000b");

  const rows = await t.db.sql<{ type: string; data: any; payload: any }[]>`
    select type, data, payload from events where task_id = ${task.id} order by seq`;
  const result = rows.find((r) => r.type === "tool.result");
  expect(result).toBeDefined();
  expect(JSON.stringify(result)).toContain("a\uFFFDb");
  expect(JSON.stringify(rows)).not.toContain("\\u0000");
  expect(rows[rows.length - 1].type).toBe("task.completed");
}, 90_000);
