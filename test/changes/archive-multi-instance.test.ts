/**
 * Archiving a session closes its warm agent on every instance, not only the one that served the
 * archive: the archive notifies (channel mooring_archived), and the instance holding the agent
 * closes it at once when idle, or when the turn the archive cancels has ended.
 */
import { beforeAll, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, eventually, type TestGateway } from "../support/gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";

const t = useGateway({ workspace: true, start: false });
let a: TestGateway;
let b: TestGateway;
const closedOnB: string[] = [];

beforeAll(async () => {
  // Polling backstops at 60 s: only the notification can tell B in time.
  a = await t.startGateway({ MOORING_INSTANCE_ID: "archive-a", MOORING_POLL_MS: "60000" });
  b = await t.startGateway(
    { MOORING_INSTANCE_ID: "archive-b", MOORING_POLL_MS: "60000" },
    {
      onLog: (record) => {
        if (record.msg === "warm agent closed: session archived") closedOnB.push(record.sessionId);
      },
    },
  );
});

it("closes the idle warm agent on the instance that ran the turn when another instance archives", async () => {
  const session = await createSession(b.url, t.workspace);
  // Submitted on B, so B claims it (the admission claims in its own transaction) and keeps the agent warm.
  const task = await submitOk(b.url, session, { prompt: "hello" });
  expect((await waitTask(b.url, task.id)).status).toBe("completed");
  const [row] = await t.sql<
    { ownerInstance: string }[]
  >`select owner_instance from tasks where id = ${task.id}`;
  expect(row.ownerInstance).toBe("archive-b");
  expect(closedOnB).toEqual([]);

  expect((await call(a.url, "DELETE", `/v1/sessions/${session}`)).status).toBe(200);
  await eventually(async () => closedOnB.includes(session), 5000);
});

it("closes a busy one when the turn the archive cancelled has ended", async () => {
  const session = await createSession(b.url, t.workspace);
  const task = await submitOk(b.url, session, { prompt: "[sleep 30000]" });
  expect(task.status).toBe("running");
  expect((await call(a.url, "DELETE", `/v1/sessions/${session}`)).status).toBe(200);
  expect((await waitTask(a.url, task.id)).status).toBe("cancelled");
  await eventually(async () => closedOnB.includes(session), 5000);
});
