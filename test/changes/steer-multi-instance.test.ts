/**
 * A steer asked of one instance reaches the turn another instance runs: the `turn.input` event is
 * committed with a `mooring_input` notification, which the running instance hears (its poll is the
 * backstop, set to a minute here so only the notification can deliver in time).
 */
import { beforeAll, expect, it } from "vitest";
import { call, type TestGateway } from "../support/gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";
import { useGateway } from "../support/use-gateway.js";

const t = useGateway({ workspace: true, start: false });
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  a = await t.startGateway({ MOORING_INSTANCE_ID: "steer-a", MOORING_POLL_MS: "60000" });
  b = await t.startGateway({ MOORING_INSTANCE_ID: "steer-b", MOORING_POLL_MS: "60000" });
});

it("a steer on instance A is taken by the turn running on instance B, once", async () => {
  const session = await createSession(b.url, t.workspace);
  // Submitted on B, so B claims and runs it; the turn waits for input.
  const task = await submitOk(b.url, session, { prompt: "[input]" });
  const [row] = await t.sql<
    { ownerInstance: string }[]
  >`select owner_instance from tasks where id = ${task.id}`;
  expect(row.ownerInstance).toBe("steer-b");
  const steered = await call(a.url, "POST", `/v1/tasks/${task.id}/input`, { text: "from a" });
  expect(steered.status).toBe(202);
  // Well before B's one-minute poll: the notification carried it.
  const done = await waitTask(a.url, task.id, undefined, 20_000);
  expect(done.status).toBe("completed");
  expect(done.result.text).toBe("steered from a ");
  const inputs = await t.sql`select seq from events where task_id = ${task.id} and type = 'turn.input'`;
  expect(inputs).toHaveLength(1);
});
