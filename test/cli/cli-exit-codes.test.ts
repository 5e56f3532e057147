/**
 * Every exit code of `mooring run`, as a table, each from the real CLI against a real
 * gateway (0 completed, 1 failed, 2 usage, 3 cancelled, 4 refused or expired, 5 unreachable,
 * 130 the second Ctrl-C is in cli-signals.test.ts with the first).
 */
import { describe, expect, it } from "vitest";
import { runCli, spawnCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { call } from "../support/gateway.js";
import { useGateway } from "../support/use-gateway.js";

const t = cliFixture();

/** On a database of its own: one running task fills it; one more waits 1.5 s and expires; a third is refused. */
const tight = useGateway({
  env: {
    MOORING_MAX_ACTIVE: "1",
    MOORING_MAX_QUEUED: "1",
    MOORING_QUEUE_TIMEOUT_MS: "1500",
    MOORING_SWEEP_MS: "200",
  },
});

const env = () => t.env();
const run = (args: string[], extra: Record<string, string> = {}) =>
  runCli(["run", "--workspace", t.workspace, "--agent", "simulated", ...args], {
    env: { ...env(), ...extra },
  });

describe("mooring run exit codes", () => {
  it.each([
    { code: 0, why: "completed", args: ["[deltas 3]"], stderr: /completed/ },
    { code: 1, why: "failed", args: ["[fail AGENT_ERROR]"], stderr: /failed \(AGENT_ERROR\)/ },
    { code: 1, why: "the agent crashed", args: ["[crash]"], stderr: /AGENT_CRASHED/ },
    { code: 2, why: "an unknown option", args: ["--bogus", "hi"], stderr: /unknown option/ },
    { code: 2, why: "a bad --load-class", args: ["--load-class", "huge", "hi"], stderr: /huge/ },
    {
      code: 2,
      why: "--session with --continue",
      args: ["--session", "x", "--continue", "hi"],
      stderr: /exclude/,
    },
    {
      code: 2,
      why: "an unknown session",
      args: ["--session", "00000000-0000-0000-0000-000000000000", "hi"],
      stderr: /SESSION_NOT_FOUND/,
    },
    { code: 2, why: "an unknown agent", args: ["--agent", "nope", "hi"], stderr: /INVALID_REQUEST/ },
    { code: 2, why: "a bad --url", args: ["--url", "ftp://x", "hi"], stderr: /http\(s\) URL/ },
    {
      code: 5,
      why: "an unreachable gateway",
      args: ["--url", "http://127.0.0.1:1", "--connect-timeout", "300", "hi"],
      stderr: /mooring: cannot reach http:\/\/127\.0\.0\.1:1: /,
    },
  ])("exits $code when $why", async ({ code, args, stderr }) => {
    const result = await run(args);
    expect(result.code, result.stderr).toBe(code);
    expect(result.stderr).toMatch(stderr);
  });

  it("exits 2 when the prompt is empty (stdin closed with nothing)", async () => {
    const result = await runCli(["run", "--workspace", t.workspace, "--agent", "simulated", "-"], {
      env: env(),
      input: "",
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/prompt is empty/);
  });

  it("exits 3 when the task is cancelled by someone else", async () => {
    const cli = spawnCli(["run", "--workspace", t.workspace, "--agent", "simulated", "--json", "[hang]"], {
      env: env(),
    });
    await cli.waitFor('"type":"task.started"');
    const taskId = JSON.parse(
      cli
        .stdout()
        .split("\n")
        .find((l) => l.includes('"task.started"'))!,
    ).taskId;
    const cancel = await runCli(["tasks", "cancel", taskId, "--json"], { env: env() });
    expect(cancel.code).toBe(0);
    expect(await cli.exited).toBe(3);
    expect(cli.stdout()).toContain('"type":"task.cancelled"');
  });

  it("exits 4 when the gate refuses the turn, and 4 when it expires in the queue", async () => {
    const tightEnv = { ...env(), MOORING_URL: tight.url };
    const busy = spawnCli(["run", "--workspace", t.workspace, "--agent", "simulated", "--json", "[hang]"], {
      env: tightEnv,
    });
    await busy.waitFor('"type":"task.started"');
    const queued = spawnCli(["run", "--workspace", t.workspace, "--agent", "simulated", "[deltas 1]"], {
      env: tightEnv,
    });
    await queued.waitFor(/queued/, "stderr");
    // The queue (1) is full: the third is refused at once (no retry with --connect-timeout 0).
    const refused = await run(["--connect-timeout", "0", "[deltas 1]"], tightEnv);
    expect(refused.code, refused.stderr).toBe(4);
    expect(refused.stderr).toMatch(/GATEWAY_BUSY/);
    expect(await queued.exited).toBe(4);
    expect(queued.stderr()).toMatch(/expired \(GATEWAY_BUSY, queue_timeout\)/);
    busy.child.kill("SIGINT");
    expect(await busy.exited).toBe(3);
  });

  it("--detach prints the task id and exits 0 while the task runs on", async () => {
    const result = await run(["--detach", "[sleep 300] [deltas 2]"]);
    expect(result.code).toBe(0);
    const taskId = result.stdout.trim();
    expect(result.stderr).toContain(`mooring attach ${taskId}`);
    const task = await call(t.url, "GET", `/v1/tasks/${taskId}?waitMs=10000`);
    expect(task.body.status).toMatch(/queued|running|completed/);
    const attached = await runCli(["attach", taskId], { env: env() });
    expect(attached.code).toBe(0);
    expect(attached.stdout).toBe("chunk 1 chunk 2 ");
  });
});

describe("resource commands", () => {
  it("gate, sessions and tasks answer JSON with --json and a table otherwise", async () => {
    const done = await run(["--json", "[deltas 1]"]);
    const result = JSON.parse(done.stdout.trim().split("\n").at(-1)!);
    expect(result.type).toBe("cli.result");
    const taskId = result.task.id;
    const gate = await runCli(["gate", "--json"], { env: env() });
    expect(JSON.parse(gate.stdout)).toMatchObject({ maxActive: 5, maxQueued: 20 });
    const table = await runCli(["gate"], { env: env() });
    expect(table.stdout).toMatch(/^ACTIVE\s+MAX ACTIVE/);
    const task = await runCli(["tasks", "get", taskId, "--json"], { env: env() });
    expect(JSON.parse(task.stdout)).toMatchObject({ id: taskId, status: "completed" });
    const tasks = await runCli(["tasks", "list", "--session", result.task.sessionId], { env: env() });
    expect(tasks.stdout).toContain(taskId);
    const sessions = await runCli(["sessions", "list", "--json"], { env: env() });
    expect(sessions.stdout).toContain(result.task.sessionId);
    const archived = await runCli(["sessions", "archive", result.task.sessionId, "--json"], { env: env() });
    expect(JSON.parse(archived.stdout).status).toBe("archived");
    const missing = await runCli(["tasks", "get", "00000000-0000-0000-0000-000000000000"], { env: env() });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/TASK_NOT_FOUND/);
  });
});
