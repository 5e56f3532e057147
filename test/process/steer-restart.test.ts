/**
 * kill -9 of the gateway running a steered turn (docs/api.md, Steering a running turn): nothing
 * accepted is lost, nothing is applied twice. Instance A runs the turn; instance B takes the
 * steers. An input the agent took before the kill was echoed once; an input accepted just before
 * the kill stays in the log; a steer sent to A as it is killed is, on its retry with the same key,
 * either the stored one (200) or refused (409 TASK_NOT_RUNNING) with nothing stored: never both,
 * never twice. After the restart the turn is interrupted and a new steer answers TASK_NOT_RUNNING.
 */
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSession, submitPrompt, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-steer-restart-", procs, (d, w) => {
  db = d;
  workspace = w;
});

const steer = (url: string, taskId: string, text: string, idempotencyKey: string) =>
  call(url, "POST", `/v1/tasks/${taskId}/input`, { text, idempotencyKey });

it("kill -9 of the instance running a steered turn: each input stored once, taken at most once", async () => {
  const envA = gatewayEnv(db.url, { MOORING_INSTANCE_ID: "steer-a" });
  const a = await procs.spawn(envA);
  const b = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "steer-b" }));
  await Promise.all([a.waitReady(), b.waitReady()]);
  const session = await createSession(a.url, workspace);
  // Submitted on A: A claims it in the submit and runs it.
  const task = await submitPrompt(a.url, session, "[input] [input] [input] [hang]");
  const [row] = await db.sql<
    { ownerInstance: string }[]
  >`select owner_instance from tasks where id = ${task.id}`;
  expect(row.ownerInstance).toBe("steer-a");

  // Taken by the agent before the kill: its echo is in the log.
  expect((await steer(b.url, task.id, "first", "k1")).status).toBe(202);
  await eventually(async () => {
    const echoes = await db.sql`
      select 1 from events where task_id = ${task.id} and type = 'message.delta' and data->>'text' = 'steered first '`;
    return echoes.length === 1;
  });
  // Accepted (by B) right before A dies; A may or may not have handed it to the agent.
  const second = await steer(b.url, task.id, "second", "k2");
  expect(second.status).toBe(202);
  // Sent to A as it is killed: the answer may never come.
  const third = steer(a.url, task.id, "third", "k3").catch(() => null);
  a.kill("SIGKILL");
  expect(await exitedWithOutput(a)).toBe("SIGKILL");
  await third;

  const restarted = await procs.spawn(envA);
  await restarted.waitReady();
  const done = await waitTerminal(restarted.url, task.id, 120_000);
  expect(done.status).toBe("interrupted");

  // Retries with the same keys add nothing: the stored input comes back, on either instance.
  const firstAgain = await steer(restarted.url, task.id, "first", "k1");
  expect(firstAgain.status).toBe(200);
  expect(firstAgain.body.created).toBe(false);
  const secondAgain = await steer(b.url, task.id, "second", "k2");
  expect(secondAgain.status).toBe(200);
  expect(secondAgain.body).toMatchObject({ seq: second.body.seq, created: false });
  // The steer lost with A: stored once (200), or not at all and refused now (409).
  const thirdAgain = await steer(b.url, task.id, "third", "k3");
  const inputs = await db.sql<{ seq: number; text: string; key: string }[]>`
    select seq, data->>'text' as text, data->>'idempotencyKey' as key
    from events where task_id = ${task.id} and type = 'turn.input' order by seq`;
  if (thirdAgain.status === 200) {
    expect(inputs.map((i) => i.text)).toEqual(["first", "second", "third"]);
  } else {
    expect(thirdAgain.status).toBe(409);
    expect(thirdAgain.body.error.code).toBe("TASK_NOT_RUNNING");
    expect(inputs.map((i) => i.text)).toEqual(["first", "second"]);
  }
  // A new steer of the interrupted task is refused and stores nothing.
  const late = await call(b.url, "POST", `/v1/tasks/${task.id}/input`, { text: "late" });
  expect(late.status).toBe(409);
  expect(late.body.error.code).toBe("TASK_NOT_RUNNING");

  // Each input reached the agent at most once (the first exactly once); none reached another turn.
  const echoes = await db.sql<{ text: string }[]>`
    select data->>'text' as text from events
    where session_id = ${session} and type = 'message.delta' and data->>'text' like 'steered %'`;
  const count = (text: string) => echoes.filter((e) => e.text === `steered ${text} `).length;
  expect(count("first")).toBe(1);
  expect(count("second")).toBeLessThanOrEqual(1);
  expect(count("third")).toBeLessThanOrEqual(1);
  const elsewhere = await db.sql`
    select 1 from events where session_id = ${session} and type = 'turn.input' and task_id <> ${task.id}`;
  expect(elsewhere).toHaveLength(0);
}, 240_000);
