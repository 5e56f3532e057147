import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway.js";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { call, startTestGateway } from "../support/gateway.js";
import { waitTask } from "../support/turns.js";

let db: TestDatabase;
let gw: Gateway;
let workspace: string;

beforeAll(async () => {
  db = await createTestDatabase();
  gw = await startTestGateway(db.url);
  workspace = await mkdtemp(join(tmpdir(), "ws-"));
});
afterAll(async () => {
  await gw?.stop();
  await db?.drop();
});

it("creates a session and runs a simulated turn to completion", async () => {
  const s = await call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
  expect(s.status).toBe(201);
  const t = await call(gw.url, "POST", `/v1/sessions/${s.body.id}/turns`, {
    prompt: "[deltas 3] [tool 5000] [tokens 1000]",
  });
  expect(t.status).toBe(202);
  expect(t.headers.get("location")).toBe(`/v1/tasks/${t.body.id}`);
  const task = await waitTask(gw.url, t.body.id);
  expect(task.status).toBe("completed");
  expect(task.result.text).toBe("chunk 1 chunk 2 chunk 3 ");
  expect(task.result.contextPercent).toBe(1);
  const events = await db.sql`select seq, type from events where session_id = ${s.body.id} order by seq`;
  expect(events.map((e) => e.type)).toEqual([
    "task.queued",
    "task.started",
    "message.delta",
    "tool.call",
    "tool.result",
    "message",
    "usage",
    "task.completed",
  ]);
  expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
});
