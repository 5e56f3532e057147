/**
 * The SDK's steer: `run.steer(text)` on a run handle and `client.tasks.steer(taskId, text)`, and
 * the refusals as typed errors (docs/client.md, Steering).
 */
import { expect, it } from "vitest";
import { MooringClient, TaskNotRunningError } from "../../src/client/index.js";
import { useGateway } from "../support/use-gateway.js";

const t = useGateway({ workspace: true });

it("run.steer and tasks.steer add input to the running turn; a finished one is TaskNotRunningError", async () => {
  const c = new MooringClient({ url: t.url });
  const session = await c.sessions.create({ workspace: t.workspace, agent: "simulated" });
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
