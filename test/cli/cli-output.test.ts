/**
 * What `mooring run` writes. `--json` lines ending with `cli.result`; the first line
 * reaching `head -1` before the turn ends; a 1 MiB line intact through a pipe; a prompt argument
 * never waiting on a stdin that never closes; the token in no output.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { cliBin, jsonLines, runCli, spawnCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { call, repoRoot } from "../support/gateway.js";

const token = "tok-SECRET-4e1f0c2a9b";
const t = cliFixture({
  MOORING_API_TOKENS: token,
  MOORING_MAX_PROMPT_CHARS: "1100000",
  MOORING_BODY_LIMIT_BYTES: String(4 * 1024 * 1024),
});

const env = (extra: Record<string, string> = {}) => t.env({ MOORING_TOKEN: token, ...extra });
const runArgs = (): string[] => t.runArgs();

describe("mooring run output", () => {
  it("--json: events verbatim, cli.state lines, and a last cli.result with the exit code", async () => {
    const { code, stdout } = await runCli([...runArgs(), "--json", "[deltas 3] [fail AGENT_ERROR]"], {
      env: env(),
    });
    expect(code).toBe(1);
    const lines = jsonLines(stdout);
    const last = lines.at(-1);
    expect(last).toMatchObject({ type: "cli.result", exitCode: 1, task: { status: "failed" } });
    expect(lines.filter((l) => l.type === "cli.result")).toHaveLength(1);
    expect(lines.some((l) => l.type === "cli.state" && l.state === "streaming")).toBe(true);
    const events = lines.filter((l) => typeof l.seq === "number");
    // (The gateway may merge deltas that arrive together, so their count is not asserted.)
    expect(events.map((e) => e.type)).toEqual([
      "task.queued",
      "task.started",
      "message.delta",
      "task.failed",
    ]);
    // Verbatim: the gateway's own events, as its REST API gives them.
    const page = await call(
      t.url,
      "GET",
      `/v1/sessions/${events[0].sessionId}/events?afterSeq=0`,
      undefined,
      {
        accept: "application/json",
        authorization: `Bearer ${token}`,
      },
    );
    expect(events).toEqual(page.body.items.filter((e: any) => e.taskId === last.task.id));
  });

  it("streams text to stdout and status to stderr as plain lines when not a terminal", async () => {
    const { code, stdout, stderr } = await runCli([...runArgs(), "[deltas 3] [tool 10]"], { env: env() });
    expect(code).toBe(0);
    expect(stdout).toBe("chunk 1 chunk 2 chunk 3 ");
    expect(stderr).toMatch(/^mooring: queued at position \d+/m);
    expect(stderr).toMatch(/^mooring: running · tool simulated/m);
    expect(stderr).not.toMatch(/\x1b/);
  });

  it("piped into head -1, the first line arrives before the turn ends", async () => {
    const sh = spawn(
      "sh",
      [
        "-c",
        `"${process.execPath}" "${cliBin}" run --workspace "${t.workspace}" --agent simulated --json "[deltas 1] [sleep 600000] [deltas 1]" | head -1`,
      ],
      { cwd: repoRoot, env: { ...process.env, ...env() }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    sh.stdout.setEncoding("utf8").on("data", (c) => {
      out += c;
    });
    const [code] = await once(sh, "close");
    expect(code).toBe(0);
    expect(out.split("\n").filter(Boolean)).toHaveLength(1);
    expect(JSON.parse(out).type).toBe("cli.state");
    // The pipeline ended (head got its line and the CLI left on the closed pipe) while the turn,
    // asleep for ten minutes, still runs.
    const tasks = await call(t.url, "GET", "/v1/tasks?limit=1", undefined, {
      authorization: `Bearer ${token}`,
    });
    expect(tasks.body.items[0].status).toBe("running");
    await call(t.url, "POST", `/v1/tasks/${tasks.body.items[0].id}/cancel`, undefined, {
      authorization: `Bearer ${token}`,
    });
  });

  it("a line over 1 MiB survives the pipe intact", async () => {
    // The prompt comes back in cli.result's task: 1.05 MiB of it, through stdin ("-").
    const prompt = `[deltas 1] ${"abcdefghij".repeat(106_000)}`;
    const { code, stdout, stderr } = await runCli([...runArgs(), "--json", "-"], {
      env: env(),
      input: prompt,
    });
    expect(code, stderr).toBe(0);
    const lines = stdout.split("\n").filter(Boolean);
    const last = lines.at(-1)!;
    expect(last.length).toBeGreaterThan(1024 * 1024);
    const result = JSON.parse(last);
    expect(result.type).toBe("cli.result");
    expect(result.task.prompt).toBe(prompt);
  });

  it("a prompt argument never waits on a stdin that never closes", async () => {
    const cli = spawnCli([...runArgs(), "[deltas 2]"], { env: env(), stdin: "pipe" });
    expect(await cli.exited).toBe(0);
    expect(cli.stdout()).toBe("chunk 1 chunk 2 ");
  });

  it("reads the prompt from stdin when it is absent", async () => {
    const { code, stdout } = await runCli(runArgs(), { env: env(), input: "[deltas 2]" });
    expect(code).toBe(0);
    expect(stdout).toBe("chunk 1 chunk 2 ");
  });

  it("--continue submits to the latest session on the t.workspace and agent", async () => {
    const first = jsonLines((await runCli([...runArgs(), "--json", "[deltas 1]"], { env: env() })).stdout).at(
      -1,
    );
    const second = jsonLines(
      (await runCli([...runArgs(), "--continue", "--json", "[deltas 1]"], { env: env() })).stdout,
    ).at(-1);
    expect(second.task.sessionId).toBe(first.task.sessionId);
    expect(second.task.turnIndex).toBe(first.task.turnIndex + 1);
  });

  it("the token appears in no output: help, text, JSON, errors, a wrong token", async () => {
    const outputs: string[] = [];
    const collect = (r: { stdout: string; stderr: string }) => outputs.push(r.stdout, r.stderr);
    const viaFlag = { XDG_STATE_HOME: t.stateHome, MOORING_URL: t.url };
    const ok = await runCli([...runArgs(), "--token", token, "[deltas 1] [tool 10]"], { env: viaFlag });
    expect(ok.code).toBe(0);
    collect(ok);
    const json = await runCli([...runArgs(), "--json", "[deltas 1]"], { env: env() });
    expect(json.code).toBe(0);
    collect(json);
    collect(await runCli(["run", "--help"], { env: env() }));
    collect(await runCli(["sessions", "list", "--token", token], { env: viaFlag }));
    collect(await runCli(["tasks", "get", "nope", "--token", token], { env: viaFlag }));
    const unreachable = await runCli(
      [...runArgs(), "--token", token, "--url", "http://127.0.0.1:1", "--connect-timeout", "100", "x"],
      {
        env: viaFlag,
      },
    );
    expect(unreachable.code).toBe(5);
    collect(unreachable);
    const wrong = `${token}-wrong`;
    const refused = await runCli([...runArgs(), "--json", "x"], { env: env({ MOORING_TOKEN: wrong }) });
    expect(refused.code).toBe(2);
    expect(refused.stdout).toMatch(/UNAUTHORIZED/);
    collect(refused);
    const all = outputs.join("\n");
    expect(all.length).toBeGreaterThan(1000);
    expect(all).not.toContain(token);
    expect(all).not.toContain(token.slice(4));
  });
});
