/**
 * NUL and lone surrogates in agent output. A real ACP agent
 * (test/support/acp-agent.ts, `[badbytes]`) puts them in message text, a tool call's name and input
 * (a key included) and the tool's output. Postgres stores neither, and one such event used to
 * freeze its event lane: every session on it stopped. Now the driver boundary makes them storable
 * (NUL and lone surrogates become U+FFFD), the turn completes, and another session on the same
 * lane runs meanwhile.
 */
import { realpathSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { isRunning, LogRecorder } from "../../support/agent-gateway.js";
import { createTestDatabase, type TestDatabase } from "../../support/db.js";
import { repoRoot, startTestGateway } from "../../support/gateway.js";
import { createSessionWith, submitPrompt, waitTerminal } from "../../support/turns.js";

const agentScript = join(repoRoot, "test/support/acp-agent.ts");
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

let db: TestDatabase;
let gw: Gateway;
let root: string;
let workspace: string;
const logs = new LogRecorder();
const agentPids = new Set<number>();

beforeAll(async () => {
  db = await createTestDatabase();
  root = realpathSync(await mkdtemp(join(tmpdir(), "mooring-badbytes-")));
  workspace = join(root, "ws");
  await mkdir(workspace, { recursive: true });
  const agents = {
    "acp-test": { driver: "acp", command: process.execPath, args: ["--import", tsxLoader, agentScript] },
  };
  // One lane: every session shares the writer a refused event used to freeze.
  gw = await startTestGateway(
    db.url,
    { MOORING_AGENTS: JSON.stringify(agents), MOORING_EVENT_FLUSH_LANES: "1" },
    {
      onLog: (record) => {
        if (record.msg === "agent spawned" && typeof record.agentPid === "number")
          agentPids.add(record.agentPid);
        logs.push(record as never);
      },
    },
  );
});

afterAll(async () => {
  await gw?.stop();
  for (const pid of agentPids) if (isRunning(pid)) process.kill(pid, "SIGKILL");
  await db?.drop();
  if (root) await rm(root, { recursive: true, force: true });
});

/** No NUL and no lone surrogate anywhere in a value, keys included. */
function storable(value: unknown): boolean {
  const text = JSON.stringify(value);
  return !/\\u0000|\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i.test(
    text,
  );
}

it("a turn whose agent emits NUL and lone surrogates completes, stored sanitized, while another session on the lane runs", async () => {
  const bad = await createSessionWith(gw.url, { workspace, agent: "acp-test" });
  const other = await createSessionWith(gw.url, { workspace, agent: "simulated" });

  const badTask = await submitPrompt(gw.url, bad.id, "[badbytes] [chunks 2]");
  const otherTask = await submitPrompt(gw.url, other.id, "[deltas 20]");
  const [badDone, otherDone] = await Promise.all([
    waitTerminal(gw.url, badTask.id),
    waitTerminal(gw.url, otherTask.id),
  ]);
  expect(otherDone.status).toBe("completed");
  expect(badDone.status).toBe("completed");
  expect(badDone.result.text).toContain("text nul\uFFFD high\uFFFD low\uFFFD end");

  const rows = await db.sql<{ seq: number; type: string; data: any; payload: any }[]>`
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
  const [session] = await db.sql`select last_seq from sessions where id = ${bad.id}`;
  expect(session.lastSeq).toBe(rows[rows.length - 1].seq);
}, 60_000);
