/**
 * The setting of a CLI test file, registered as its hooks: useGateway's bundle (a pooled database,
 * an in-process gateway on it, a workspace folder) plus a private `XDG_STATE_HOME` for saved
 * cursors, and every CLI and terminal the file started killed after each test.
 *
 *   const t = cliFixture({ MOORING_API_TOKENS: token });
 *   it("…", async () => {
 *     const result = await runCli(t.runArgs("[deltas 1]"), { env: t.env() });
 *   });
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll } from "vitest";
import { killAllClis } from "./cli.js";
import { killAllTerminals } from "./terminal.js";
import { type GatewayBundle, type UseGatewayOptions, useGateway } from "./use-gateway.js";

export interface CliFixture extends GatewayBundle {
  /** The CLI's private state folder (its saved cursors). */
  readonly stateHome: string;
  /** The CLI's environment: this gateway, this state folder, and `extra`. */
  env(extra?: Record<string, string | undefined>): Record<string, string | undefined>;
  /** `mooring run` on the workspace with the simulated agent, then `more`. */
  runArgs(...more: string[]): string[];
}

export function cliFixture(
  gatewayEnv: Record<string, string> = {},
  options: Pick<UseGatewayOptions, "agents" | "gateway"> = {},
): CliFixture {
  const t = useGateway({ ...options, env: gatewayEnv, workspace: true });
  let stateHome: string | undefined;
  beforeAll(async () => {
    stateHome = await mkdtemp(join(tmpdir(), "mooring-cli-state-"));
  });
  afterEach(() => {
    killAllClis();
    killAllTerminals();
  });
  afterAll(async () => {
    if (stateHome) await rm(stateHome, { recursive: true, force: true });
  });
  // The bundle's getters read its hooks' state, so the fixture inherits them instead of copying.
  const fixture: CliFixture = Object.create(t, {
    stateHome: {
      get() {
        if (!stateHome) throw new Error("the CLI's state folder is there only in a test or a hook");
        return stateHome;
      },
    },
    env: {
      value: (extra: Record<string, string | undefined> = {}) => ({
        XDG_STATE_HOME: fixture.stateHome,
        MOORING_URL: t.url,
        ...extra,
      }),
    },
    runArgs: {
      value: (...more: string[]) => ["run", "--workspace", t.workspace, "--agent", "simulated", ...more],
    },
  });
  return fixture;
}
