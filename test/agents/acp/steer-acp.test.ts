/**
 * Steering an ACP turn: ACP has no way to add input to a running prompt, so a steer answers 409
 * STEER_NOT_SUPPORTED (and so does a submit with ifBusy steer while the session is busy), nothing
 * is stored, and the client's fallback (ifBusy enqueue) works.
 */
import { realpathSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { isRunning } from "../../support/agent-gateway.js";
import { createTestDatabase, type TestDatabase } from "../../support/db.js";
import { call, repoRoot, startTestGateway } from "../../support/gateway.js";
import { createSessionWith, submit, submitPrompt, waitTask, waitTerminal } from "../../support/turns.js";

const agentScript = join(repoRoot, "test/support/acp-agent.ts");
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

let db: TestDatabase;
let root: string;
let workspace: string;
const gateways: Gateway[] = [];
const agentPids = new Set<number>();

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});
beforeEach(async () => {
  root = realpathSync(await mkdtemp(join(tmpdir(), "mooring-steer-acp-")));
  workspace = join(root, "ws");
  await mkdir(workspace, { recursive: true });
});
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
  for (const pid of agentPids) if (isRunning(pid)) process.kill(pid, "SIGKILL");
  agentPids.clear();
  await rm(root, { recursive: true, force: true });
});

it("a steer of a running ACP turn answers 409 STEER_NOT_SUPPORTED; ifBusy steer too; enqueue still works", async () => {
  const gw = await startTestGateway(
    db.url,
    {
      MOORING_AGENTS: JSON.stringify({
        "acp-test": {
          driver: "acp",
          command: process.execPath,
          args: ["--import", tsxLoader, agentScript],
          env: { ACP_TEST_STATE_DIR: join(root, "agent-state") },
          permissions: "deny",
        },
      }),
    },
    {
      onLog: (record) => {
        if (typeof record.agentPid === "number") agentPids.add(record.agentPid);
      },
    },
  );
  gateways.push(gw);
  const session = await createSessionWith(gw.url, { workspace, agent: "acp-test" });
  const task = await submitPrompt(gw.url, session.id, "[slow]");
  await waitTask(gw.url, task.id, (t) => t.status !== "queued", 60_000);

  const steered = await call(gw.url, "POST", `/v1/tasks/${task.id}/input`, { text: "turn left" });
  expect(steered.status).toBe(409);
  expect(steered.body.error.code).toBe("STEER_NOT_SUPPORTED");
  const rpc = await call(gw.url, "POST", "/v1/rpc", {
    jsonrpc: "2.0",
    id: 1,
    method: "turns.steer",
    params: { taskId: task.id, text: "turn left" },
  });
  expect(rpc.body.error.data.code).toBe("STEER_NOT_SUPPORTED");
  const busy = await submit(gw.url, session.id, { prompt: "turn left", ifBusy: "steer" });
  expect(busy.status).toBe(409);
  expect(busy.body.error.code).toBe("STEER_NOT_SUPPORTED");

  // The fallback: queue it as the next turn.
  const queued = await submit(gw.url, session.id, { prompt: "[chunks 1]", ifBusy: "enqueue" });
  expect(queued.status).toBe(202);
  await call(gw.url, "POST", `/v1/tasks/${task.id}/cancel`);
  expect((await waitTerminal(gw.url, task.id, 60_000)).status).toBe("cancelled");
  expect((await waitTerminal(gw.url, queued.body.id, 60_000)).status).toBe("completed");
  const stored = await db.sql`select 1 from events where session_id = ${session.id} and type = 'turn.input'`;
  expect(stored).toHaveLength(0);
}, 180_000);
