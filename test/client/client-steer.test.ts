/**
 * The SDK's steer: `run.steer(text)` on a run handle and `client.tasks.steer(taskId, text)`, and
 * the refusals as typed errors (docs/client.md, Steering).
 */
import { rm } from "node:fs/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MooringClient, TaskNotRunningError } from "../../src/client/index.js";
import type { Gateway } from "../../src/gateway.js";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { startTestGateway } from "../support/gateway.js";
import { tempWorkspace } from "../support/turns.js";

let db: TestDatabase;
let gw: Gateway;
let workspace: string;

beforeAll(async () => {
  db = await createTestDatabase();
  gw = await startTestGateway(db.url);
  workspace = await tempWorkspace();
});
afterAll(async () => {
  await gw?.stop();
  await db?.drop();
  await rm(workspace, { recursive: true, force: true });
});

it("run.steer and tasks.steer add input to the running turn; a finished one is TaskNotRunningError", async () => {
  const c = new MooringClient({ url: gw.url });
  const session = await c.sessions.create({ workspace, agent: "simulated" });
  const run = await c.turns.submit(session.id, { prompt: "[input] [input]" });
  await new Promise<void>((resolve) =>
    run.on("event", (e) => {
      if (e.type === "task.started") resolve();
    }),
  );
  const first = await run.steer("one");
  expect(first).toMatchObject({ taskId: run.taskId, text: "one", created: true });
  const second = await c.tasks.steer(run.taskId, "two");
  expect(second.seq).toBeGreaterThan(first.seq);
  expect(await run.text()).toBe("steered one steered two ");
  const late = await run.steer("three").catch((e) => e);
  expect(late).toBeInstanceOf(TaskNotRunningError);
  expect(late).toMatchObject({ code: "TASK_NOT_RUNNING", status: 409 });
});
