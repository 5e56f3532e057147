/**
 * The CLI never lets a string from the gateway drive the user's terminal. On
 * a pseudo-terminal every control character of agent text, a prompt shown in a table, a tool name
 * in the status line and an error message is made visible (`\xHH`); with `--raw`, or stdout piped,
 * the bytes pass unchanged. Real gateway, the simulated agent echoing a prompt of escape sequences,
 * and a rewriting proxy in front of it as the hostile gateway.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { call } from "../support/gateway.js";
import { RewritingProxy } from "../support/rewriting-proxy.js";
import { runCliOnTerminal } from "../support/terminal.js";

/** Each sequence of the report, and what the terminal must show instead. */
const attacks = {
  clipboard: ["\x1b]52;c;cHduZWQ=\x07", "\\x1b]52;c;cHduZWQ=\\x07"],
  link: [
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "\\x1b]8;;https://evil.example/\\x1b\\click\\x1b]8;;\\x1b\\",
  ],
  clear: ["\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"],
  title: ["\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"],
  c1Csi: ["\u009b2J", "\\x9b2J"],
  overwrite: ["safe\rfake", "safe\\x0dfake"],
  del: ["a\x7fb", "a\\x7fb"],
} as const;
const hostile = Object.values(attacks)
  .map(([raw]) => raw)
  .join(" ");

/** Nothing a terminal would obey but the CLI's own status-line codes (erase line, colours). */
function expectInert(screen: string): void {
  const own = /\x1b\[(?:2K|[0-9;]*m)/g;
  expect(screen.replace(own, "")).not.toMatch(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/);
}

function expectAllVisible(screen: string): void {
  for (const [, shown] of Object.values(attacks)) expect(screen).toContain(shown);
  expectInert(screen);
}

function expectAllRaw(output: string): void {
  for (const [raw] of Object.values(attacks)) expect(output).toContain(raw);
}

const cli = cliFixture();
const env = (url?: string, extra: Record<string, string | undefined> = {}) =>
  cli.env({ MOORING_URL: url ?? cli.gw.url, ...extra });
const runArgs = cli.runArgs;

describe("agent text on stdout (the simulated agent echoes the prompt)", () => {
  it("a terminal sees every sequence made visible, with the live status line and without colour", async () => {
    for (const extra of [{}, { NO_COLOR: "1" }]) {
      const { code, screen } = await runCliOnTerminal(runArgs(hostile), env(cli.gw.url, extra));
      expect(code).toBe(0);
      expect(screen).toContain("You said: ");
      expectAllVisible(screen);
    }
  });

  it("--raw on a terminal, and a piped stdout, get the bytes unchanged", async () => {
    const onTerminal = await runCliOnTerminal(runArgs("--raw", hostile), env(cli.gw.url, { NO_COLOR: "1" }));
    expect(onTerminal.code).toBe(0);
    // The pty turns each lone LF into CR LF; the answer's own bytes are otherwise as sent.
    expectAllRaw(onTerminal.screen);
    const piped = await runCli(runArgs(hostile), { env: env() });
    expect(piped.code).toBe(0);
    expect(piped.stdout).toBe(`You said: ${hostile}`);
  });

  it("--json on a terminal keeps the same JSON value with DEL and C1 escaped", async () => {
    const { code, screen } = await runCliOnTerminal(
      runArgs("--json", hostile),
      env(cli.gw.url, { NO_COLOR: "1" }),
    );
    expect(code).toBe(0);
    expectInert(screen);
    const lines = screen.split("\r\n").filter((l) => l.startsWith("{"));
    const deltas = lines.map((l) => JSON.parse(l)).filter((e) => e.type === "message.delta");
    expect(deltas.map((e) => e.data.text).join("")).toBe(`You said: ${hostile}`);
  });

  it("another user's prompt in a shared session, followed with attach, is made visible too", async () => {
    const created = await call(cli.gw.url, "POST", "/v1/sessions", {
      workspace: cli.workspace,
      agent: "simulated",
    });
    const submitted = await call(cli.gw.url, "POST", `/v1/sessions/${created.body.id}/turns`, {
      prompt: hostile,
    });
    expect(submitted.status).toBe(202);
    const { code, screen } = await runCliOnTerminal(["attach", submitted.body.id], env());
    expect(code).toBe(0);
    expectAllVisible(screen);
  });
});

describe("table cells", () => {
  it("a prompt in `tasks list` and `sessions get` is made visible on a terminal, raw when piped", async () => {
    const created = await call(cli.gw.url, "POST", "/v1/sessions", {
      workspace: cli.workspace,
      agent: "simulated",
    });
    const sessionId = created.body.id;
    const attack = attacks.title[0];
    await call(cli.gw.url, "POST", `/v1/sessions/${sessionId}/turns`, { prompt: `${attack} list` });
    for (const args of [
      ["tasks", "list", "--session", sessionId],
      ["sessions", "get", sessionId],
    ]) {
      const { code, screen } = await runCliOnTerminal(args, env());
      expect(code).toBe(0);
      expect(screen).toContain(`${attacks.title[1]} list`);
      expectInert(screen);
      const piped = await runCli(args, { env: env() });
      expect(piped.stdout).toContain(`${attack} list`);
    }
  });
});

describe("a hostile gateway (a proxy rewriting its answers)", () => {
  let proxy: RewritingProxy;
  beforeAll(async () => {
    const evil = RewritingProxy.jsonText(hostile);
    proxy = await RewritingProxy.start(cli.gw.url, (body) =>
      body
        .replaceAll("simulated_command", `tool${evil}`)
        .replaceAll("does not exist", `does not exist ${evil}`),
    );
  });
  afterAll(() => proxy?.stop());

  it("a tool name in the status line is made visible, live and plain", async () => {
    for (const extra of [{}, { NO_COLOR: "1" }]) {
      const { code, screen } = await runCliOnTerminal(
        runArgs("--transport", "poll", "[tool 10] [sleep 300] [deltas 1]"),
        env(proxy.url, extra),
      );
      expect(code).toBe(0);
      expect(screen).toContain("tool tool");
      expectAllVisible(screen);
    }
  });

  it("an error message on stderr is made visible on a terminal, unchanged when piped", async () => {
    const missing = "00000000-0000-4000-8000-000000000000";
    const { code, screen } = await runCliOnTerminal(["tasks", "get", missing], env(proxy.url));
    expect(code).toBe(2);
    expect(screen).toContain("does not exist");
    expectAllVisible(screen);
    const attached = await runCliOnTerminal(["attach", missing], env(proxy.url));
    expect(attached.code).toBe(2);
    expectAllVisible(attached.screen);
    const piped = await runCli(["tasks", "get", missing], { env: env(proxy.url) });
    expect(piped.code).toBe(2);
    expectAllRaw(piped.stderr);
  });
});
