/**
 * Ctrl-C. Once cancels the task and waits for `task.cancelled` (exit 3); twice detaches
 * at once and prints the `mooring attach` command (exit 130). And a run on a real pseudo-terminal
 * (`script`) draws its status line in place.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { cliBin, spawnCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { call, repoRoot } from "../support/gateway.js";

const t = cliFixture();

const env = () => t.env();
const runArgs = (prompt: string) => [
  "run",
  "--workspace",
  t.workspace,
  "--agent",
  "simulated",
  "--json",
  prompt,
];

describe("Ctrl-C", () => {
  it("once: cancels the task, waits for task.cancelled, exits 3", async () => {
    const cli = spawnCli(runArgs("[deltas 2] [hang]"), { env: env() });
    await cli.waitFor('"type":"task.started"');
    cli.child.kill("SIGINT");
    expect(await cli.exited).toBe(3);
    expect(cli.stderr()).toMatch(/cancelling task/);
    const lines = cli.stdout().trim().split("\n");
    expect(lines.some((l) => l.includes('"type":"task.cancelled"'))).toBe(true);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({
      type: "cli.result",
      exitCode: 3,
      task: { status: "cancelled" },
    });
  });

  it("twice: detaches at once, prints the attach command, exits 130; the task runs on", async () => {
    // [stubborn] ignores the cancel, so the turn is still cancelling when the second Ctrl-C comes.
    const cli = spawnCli(runArgs("[stubborn]"), { env: env() });
    await cli.waitFor('"type":"task.started"');
    const taskId = JSON.parse(
      cli
        .stdout()
        .split("\n")
        .find((l) => l.includes('"task.started"'))!,
    ).taskId;
    cli.child.kill("SIGINT");
    await cli.waitFor(/cancelling task/, "stderr");
    cli.child.kill("SIGINT");
    expect(await cli.exited).toBe(130);
    expect(cli.stderr()).toContain(`mooring attach ${taskId}`);
    expect(cli.stdout()).not.toContain('"task.cancelled"');
    const task = await call(t.url, "GET", `/v1/tasks/${taskId}`);
    expect(task.body.status).toMatch(/cancelling|cancelled/);
  });
});

describe("on a terminal", () => {
  it("draws one status line in place on stderr (under script, a real pseudo-terminal)", async () => {
    const command = `"${process.execPath}" "${cliBin}" run --workspace "${t.workspace}" --agent simulated "[tool 10] [sleep 1500] [deltas 2]"`;
    const script = spawn("script", ["-q", "-e", "-c", command, "/dev/null"], {
      cwd: repoRoot,
      env: { ...process.env, ...env(), TERM: "xterm", NO_COLOR: undefined } as NodeJS.ProcessEnv,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    script.stdout.setEncoding("utf8").on("data", (c) => {
      out += c;
    });
    const [code] = await once(script, "close");
    expect(code, out).toBe(0);
    // Redrawn in place (carriage return, erase line), with colour, never as plain "mooring:" status lines.
    expect(out).toMatch(/\r\x1b\[2K.*running/);
    expect(out).toMatch(/\x1b\[3\dm/);
    expect(out).not.toMatch(/^mooring: running/m);
    expect(out).toContain("chunk 1 chunk 2");
  });

  it("NO_COLOR on a terminal: plain lines, no colour, no cursor movement", async () => {
    const command = `"${process.execPath}" "${cliBin}" run --workspace "${t.workspace}" --agent simulated "[deltas 2]"`;
    const script = spawn("script", ["-q", "-e", "-c", command, "/dev/null"], {
      cwd: repoRoot,
      env: { ...process.env, ...env(), TERM: "xterm", NO_COLOR: "1" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    script.stdout.setEncoding("utf8").on("data", (c) => {
      out += c;
    });
    const [code] = await once(script, "close");
    expect(code, out).toBe(0);
    expect(out).not.toMatch(/\x1b/);
    expect(out).toMatch(/mooring: running/);
  });
});
