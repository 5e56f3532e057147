/**
 * The CLI as a newcomer meets it. Ctrl-C once under `npx mooring run` on a real
 * terminal exits 3 as documented (npx forwards the signal too); a tool call and "reconnecting"
 * show after the answer has started; the 8-character ids the console shows are accepted; a bad
 * --limit is refused; --version; an unreachable gateway is "cannot reach <url>: why". (The
 * interrupted turn's last line is asserted in cli-recovery.test.ts, with a real restart.)
 */
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jsonLines, runCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { call, repoRoot } from "../support/gateway.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { openTerminal } from "../support/terminal.js";

const cli = cliFixture();
const env = cli.env;
const runArgs = cli.runArgs;

describe("Ctrl-C on a terminal", () => {
  it("once under npx: cancels the task and exits 3, though npx forwards its own copy of the signal", async () => {
    // npm runs the command through `script-shell`; bash execs it, so the CLI is npm's own child and
    // gets the terminal's SIGINT and npm's forwarded one (dash cannot be made to: docs/cli.md).
    const term = openTerminal(
      runArgs("[deltas 2] [hang]"),
      env({ NO_COLOR: "1", npm_config_script_shell: "bash" }),
      "npx",
    );
    await term.waitFor("mooring: running");
    term.type("\x03");
    expect(await term.exited).toBe(3);
    expect(term.screen()).toContain("cancelling task");
    expect(term.screen()).toContain("cancelled (CANCELLED)");
    expect(term.screen()).not.toContain("detached");
  });
});

describe("the status line once the answer has started (same terminal)", () => {
  it("a tool call still shows, on a line of its own after the text so far", async () => {
    const term = openTerminal(runArgs("[deltas 2] [tool 10] [deltas 1]"), env());
    expect(await term.exited).toBe(0);
    const screen = term.screen();
    const text = screen.indexOf("chunk 2 ");
    expect(text).toBeGreaterThan(-1);
    // The answer's line is ended, then the status drawn on the next one, not inside the text.
    expect(screen.slice(text)).toMatch(/^chunk 2 \r\n\r\x1b\[2K.*tool simulated_command/);
  });

  it("reconnecting shows while the gateway is unreachable", async () => {
    const proxy = await TcpProxy.start(cli.gw.url);
    try {
      const term = openTerminal(runArgs("[deltas 2] [hang]"), env({ MOORING_URL: proxy.url }));
      await term.waitFor("chunk 2 ");
      proxy.refuse = true;
      proxy.cutAll();
      await term.waitFor(/chunk 2 \r\n[\s\S]*reconnecting/);
      proxy.refuse = false;
      const taskId = (await call(cli.gw.url, "GET", "/v1/tasks?limit=1")).body.items[0].id;
      await call(cli.gw.url, "POST", `/v1/tasks/${taskId}/cancel`);
      expect(await term.exited).toBe(3);
    } finally {
      await proxy.close();
    }
  });
});

describe("ids, options and messages", () => {
  it("accepts the start of a session or task id (as the console shows it) when it is unique", async () => {
    const created = await call(cli.gw.url, "POST", "/v1/sessions", {
      workspace: cli.workspace,
      agent: "simulated",
    });
    const sessionId: string = created.body.id;
    const short = sessionId.slice(0, 8);
    const ran = await runCli(runArgs("--session", short, "--json", "hello"), { env: env() });
    expect(ran.code).toBe(0);
    const result = jsonLines(ran.stdout).at(-1);
    expect(result.task.sessionId).toBe(sessionId);
    const taskId: string = result.task.id;

    const got = await runCli(["sessions", "get", short, "--json"], { env: env() });
    expect(got.code).toBe(0);
    expect(JSON.parse(got.stdout).id).toBe(sessionId);
    const task = await runCli(["tasks", "get", taskId.slice(0, 8), "--json"], { env: env() });
    expect(JSON.parse(task.stdout).id).toBe(taskId);
    const listed = await runCli(["tasks", "list", "--session", short, "--json"], { env: env() });
    expect(jsonLines(listed.stdout).map((t) => t.id)).toEqual([taskId]);
    const attached = await runCli(["attach", taskId.slice(0, 8), "--from-start"], { env: env() });
    expect(attached.code).toBe(0);
    expect(attached.stdout).toBe("You said: hello");
  });

  it("a start that matches nothing, or more than one id, is a usage error saying what to pass", async () => {
    const none = await runCli(["sessions", "get", "ffffffff"], { env: env() });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no session id starts with "ffffffff".*pass the full id/);
    // 17 sessions over 16 hex digits: at least two of them start with the same one.
    for (let i = 0; i < 17; i++)
      await call(cli.gw.url, "POST", "/v1/sessions", { workspace: cli.workspace, agent: "simulated" });
    const ids: string[] = (await call(cli.gw.url, "GET", "/v1/sessions?limit=200")).body.items.map(
      (s: any) => s.id,
    );
    const digit = [..."0123456789abcdef"].find((d) => ids.filter((id) => id.startsWith(d)).length > 1)!;
    const many = await runCli(["tasks", "list", "--session", digit], { env: env() });
    expect(many.code).toBe(2);
    expect(many.stderr).toMatch(
      new RegExp(`"${digit}" is the start of more than one session id .*pass more of it`),
    );
  });

  it("rejects a --limit that is not a whole number of at least 1", async () => {
    for (const limit of ["abc", "0", "-3", "2.5"]) {
      const result = await runCli(["sessions", "list", "--limit", limit], { env: env() });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`--limit must be a whole number of at least 1, got "${limit}"`);
    }
    const ok = await runCli(["sessions", "list", "--limit", "1", "--json"], { env: env() });
    expect(ok.code).toBe(0);
    expect(jsonLines(ok.stdout)).toHaveLength(1);
  });

  it("--version prints the package's version", async () => {
    const { version } = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8"));
    for (const flag of ["--version", "-V"]) {
      const result = await runCli([flag]);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(`${version}\n`);
    }
  });

  it('an unreachable gateway is "cannot reach <url>: why", not "fetch failed"', async () => {
    const closed = await closedPort();
    const url = `http://127.0.0.1:${closed}`;
    for (const args of [runArgs("hi"), ["tasks", "list"]]) {
      const result = await runCli([...args, "--connect-timeout", "0"], { env: env({ MOORING_URL: url }) });
      expect(result.code).toBe(5);
      expect(result.stderr).toBe(
        `mooring: cannot reach ${url}: connection refused (is the gateway running? \`npm start\` starts one)\n`,
      );
    }
  });
});

/** A port nothing listens on: one the OS just gave out and took back. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
