/**
 * Issue 34, item 4: the CLI as a newcomer meets it. Ctrl-C once under `npx mooring run` on a real
 * terminal exits 3 as documented (npx forwards the signal too); ...
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../src/gateway.js";
import { killAllClis, runCli } from "./support/cli.js";
import { createTestDatabase, type TestDatabase } from "./support/db.js";
import { call, startTestGateway } from "./support/gateway.js";
import { TcpProxy } from "./support/tcp-proxy.js";
import { killAllTerminals, openTerminal } from "./support/terminal.js";

let db: TestDatabase;
let gw: Gateway;
let workspace: string;
let stateHome: string;

beforeAll(async () => {
  db = await createTestDatabase();
  gw = await startTestGateway(db.url);
  workspace = await mkdtemp(join(tmpdir(), "mooring-cli-new-"));
  stateHome = await mkdtemp(join(tmpdir(), "mooring-cli-state-"));
});
afterEach(() => {
  killAllClis();
  killAllTerminals();
});
afterAll(async () => {
  await gw?.stop();
  await db?.drop();
  await rm(workspace, { recursive: true, force: true });
  await rm(stateHome, { recursive: true, force: true });
});

const env = (extra: Record<string, string | undefined> = {}) => ({
  XDG_STATE_HOME: stateHome,
  MOORING_URL: gw.url,
  ...extra,
});
const runArgs = (...more: string[]) => ["run", "--workspace", workspace, "--agent", "simulated", ...more];

describe("Ctrl-C on a terminal", () => {
  it("once under npx: cancels the task and exits 3, though npx forwards its own copy of the signal", async () => {
    // npm runs the command through `script-shell`; bash execs it, so the CLI is npm's own child and
    // gets the terminal's SIGINT and npm's forwarded one (dash cannot be made to: docs/cli.md).
    const term = openTerminal(runArgs("[deltas 2] [hang]"), env({ NO_COLOR: "1", npm_config_script_shell: "bash" }), "npx");
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
    const proxy = await TcpProxy.start(gw.url);
    try {
      const term = openTerminal(runArgs("[deltas 2] [hang]"), env({ MOORING_URL: proxy.url }));
      await term.waitFor("chunk 2 ");
      proxy.refuse = true;
      proxy.cutAll();
      await term.waitFor(/chunk 2 \r\n[^]*reconnecting/);
      proxy.refuse = false;
      const taskId = (await call(gw.url, "GET", "/v1/tasks?limit=1")).body.items[0].id;
      await call(gw.url, "POST", `/v1/tasks/${taskId}/cancel`);
      expect(await term.exited).toBe(3);
    } finally {
      await proxy.close();
    }
  });
});
