/**
 * NUL bytes in agent output as ordinary work makes them: the real Claude Code CLI (against the loopback fake
 * of the Anthropic API) runs a tool whose output holds NUL bytes, as `printf 'a\000b'`, `find
 * -print0` or `cat` of a binary file do. Its `tool_result` carries `\u0000`, which Postgres' jsonb
 * refuses; the turn used to freeze its event lane. Now it completes with the NUL stored as U+FFFD,
 * and another session's turn on the same lane completes meanwhile.
 */
import { realpathSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { isRunning } from "../../support/agent-gateway.js";
import { createTestDatabase, type TestDatabase } from "../../support/db.js";
import { type FakeAnthropic, startFakeAnthropic } from "../../support/fake-anthropic.js";
import { repoRoot, startTestGateway } from "../../support/gateway.js";
import { createSessionWith, submitPrompt, waitTerminal } from "../../support/turns.js";

const claudeBin = join(repoRoot, "node_modules/.bin/claude");

let db: TestDatabase;
let fake: FakeAnthropic;
let gw: Gateway;
let root: string;
let workspace: string;
const agentPids = new Set<number>();

beforeAll(async () => {
  db = await createTestDatabase();
  fake = await startFakeAnthropic();
  root = realpathSync(await mkdtemp(join(tmpdir(), "mooring-claude-nul-")));
  workspace = join(root, "ws");
  await mkdir(workspace, { recursive: true });
  const agents = {
    claude: {
      driver: "claude-code",
      command: claudeBin,
      env: {
        ANTHROPIC_BASE_URL: fake.url,
        ANTHROPIC_API_KEY: "test",
        CLAUDE_CONFIG_DIR: join(root, "config"),
      },
    },
  };
  gw = await startTestGateway(
    db.url,
    { MOORING_AGENTS: JSON.stringify(agents), MOORING_EVENT_FLUSH_LANES: "1" },
    {
      onLog: (record) => {
        if (record.msg === "claude-code spawned" && typeof record.agentPid === "number")
          agentPids.add(record.agentPid);
      },
    },
  );
});

afterAll(async () => {
  await gw?.stop();
  for (const pid of agentPids) if (isRunning(pid)) process.kill(pid, "SIGKILL");
  await fake?.close();
  await db?.drop();
  if (root) await rm(root, { recursive: true, force: true });
});

it("a tool result holding NUL bytes is stored (as U+FFFD) and the turn completes; the lane goes on", async () => {
  const file = join(workspace, "zero.txt");
  await writeFile(file, "a\u0000b\n");
  fake.respond((r) =>
    r.hasToolResult
      ? { text: "Read it." }
      : { text: "Reading.", toolUse: { id: "toolu_nul_1", name: "Read", input: { file_path: file } } },
  );
  const session = await createSessionWith(gw.url, { workspace, agent: "claude" });
  const other = await createSessionWith(gw.url, { workspace, agent: "simulated" });
  const task = await submitPrompt(gw.url, session.id, "read zero.txt");
  const done = await waitTerminal(gw.url, task.id, 60_000);
  const otherDone = await waitTerminal(gw.url, (await submitPrompt(gw.url, other.id, "[deltas 5]")).id);
  expect(otherDone.status).toBe("completed");
  expect(done.status).toBe("completed");
  expect(done.result.text).toContain("Read it.");

  // What the CLI reported did hold NUL: the fake API got it back in the tool result.
  const toolResultSent = fake.mainRequests().find((r) => r.hasToolResult);
  expect(JSON.stringify(toolResultSent?.body)).toContain("a\\u0000b");

  const rows = await db.sql<{ type: string; data: any; payload: any }[]>`
    select type, data, payload from events where task_id = ${task.id} order by seq`;
  const result = rows.find((r) => r.type === "tool.result");
  expect(result).toBeDefined();
  expect(JSON.stringify(result)).toContain("a\uFFFDb");
  expect(JSON.stringify(rows)).not.toContain("\\u0000");
  expect(rows[rows.length - 1].type).toBe("task.completed");
}, 90_000);
