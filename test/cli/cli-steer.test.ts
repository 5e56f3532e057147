/**
 * `mooring run --steer` (docs/cli.md): with a turn running in the session, the prompt is added to
 * it and the command follows that turn to its end; with nothing running, it is a plain submit.
 */
import { expect, it } from "vitest";
import { runCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { call } from "../support/gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";

const f = cliFixture();

it("--steer adds the prompt to the running turn and prints that turn's answer", async () => {
  const session = await createSession(f.gw.url, f.workspace);
  const running = await submitOk(f.gw.url, session, { prompt: "[input]" });
  await waitTask(f.gw.url, running.id, (t) => t.status !== "queued");
  const r = await runCli(f.runArgs("--session", session, "--steer", "turn left"), { env: f.env() });
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("steered turn left");
  const done = await waitTask(f.gw.url, running.id);
  expect(done.result.text).toBe("steered turn left ");
  // Nothing was queued: the session has the one task.
  const tasks = await call(f.gw.url, "GET", `/v1/tasks?sessionId=${session}`);
  expect(tasks.body.items).toHaveLength(1);
}, 120_000);

it("--steer on an idle session submits a new turn", async () => {
  const session = await createSession(f.gw.url, f.workspace);
  const r = await runCli(f.runArgs("--session", session, "--steer", "hello"), { env: f.env() });
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("You said: hello");
}, 120_000);

it("--steer with another --if-busy is a usage error", async () => {
  const r = await runCli(f.runArgs("--steer", "--if-busy", "reject", "x"), { env: f.env() });
  expect(r.code).toBe(2);
}, 120_000);
