/**
 * The setting of a CLI test file, registered as its hooks: a database of its own, a real gateway
 * on it, a workspace folder, a private `XDG_STATE_HOME` for saved cursors, and every CLI and
 * terminal the file started killed after each test.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll } from "vitest";
import type { Gateway } from "../../src/gateway.js";
import { killAllClis } from "./cli.js";
import { createTestDatabase, type TestDatabase } from "./db.js";
import { startTestGateway } from "./gateway.js";
import { killAllTerminals } from "./terminal.js";

export interface CliFixture {
  gw: Gateway;
  workspace: string;
  stateHome: string;
  /** The CLI's environment: this gateway, this state folder, and `extra`. */
  env(extra?: Record<string, string | undefined>): Record<string, string | undefined>;
  /** `mooring run` on the workspace with the simulated agent, then `more`. */
  runArgs(...more: string[]): string[];
}

export function cliFixture(gatewayEnv: Record<string, string> = {}): CliFixture {
  let db: TestDatabase | undefined;
  const fixture = {
    env(extra: Record<string, string | undefined> = {}) {
      return { XDG_STATE_HOME: fixture.stateHome, MOORING_URL: fixture.gw.url, ...extra };
    },
    runArgs: (...more: string[]) => [
      "run",
      "--workspace",
      fixture.workspace,
      "--agent",
      "simulated",
      ...more,
    ],
  } as Partial<CliFixture> as CliFixture;
  beforeAll(async () => {
    db = await createTestDatabase();
    fixture.gw = await startTestGateway(db.url, gatewayEnv);
    fixture.workspace = await mkdtemp(join(tmpdir(), "mooring-cli-"));
    fixture.stateHome = await mkdtemp(join(tmpdir(), "mooring-cli-state-"));
  });
  afterEach(() => {
    killAllClis();
    killAllTerminals();
  });
  afterAll(async () => {
    await fixture.gw?.stop();
    await db?.drop();
    if (fixture.workspace) await rm(fixture.workspace, { recursive: true, force: true });
    if (fixture.stateHome) await rm(fixture.stateHome, { recursive: true, force: true });
  });
  return fixture;
}
