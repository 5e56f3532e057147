/**
 * The setting of a test file that runs the real Claude Code CLI through gateways, as one setup
 * call: a pooled database and the loopback fake of the Anthropic API for the file; for every test
 * a fresh folder (`root`) with the CLI's config folder and a workspace, the fake answering nothing
 * until the test says what; and after it, every gateway it booted stopped and every CLI a gateway
 * spawned (or a killed gateway left behind) killed.
 *
 *   const t = useClaudeCode("mooring-claude-fork-");
 *   it("…", async () => {
 *     t.fake.respond((r) => ({ text: `Answer to ${r.lastUserText}` }));
 *     const { url, logs } = await t.boot();
 *     const session = await createSessionWith(url, { workspace: t.workspace, agent: "claude" });
 *   });
 */
import { realpathSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { isRunning, LogRecorder } from "./agent-gateway.js";
import { claimTestDatabase, type TestDatabase } from "./db.js";
import { type FakeAnthropic, startFakeAnthropic } from "./fake-anthropic.js";
import { repoRoot, startTestGateway, type TestGateway } from "./gateway.js";

export const claudeBin = join(repoRoot, "node_modules/.bin/claude");

export interface ClaudeCodeBundle {
  readonly db: TestDatabase;
  readonly fake: FakeAnthropic;
  /** This test's folder (its real path). */
  readonly root: string;
  /** `root/config`: the CLI's CLAUDE_CONFIG_DIR. */
  readonly configDir: string;
  /** `root/ws`, made before the test. */
  readonly workspace: string;
  /** CLIs the gateways spawned (from their `claude-code spawned` lines); killed after the test. */
  readonly agentPids: Set<number>;
  /** The `claude` registry entry: the real CLI on this fake and config folder, `more` over it. */
  entry(more?: Record<string, unknown>): Record<string, unknown>;
  /**
   * An in-process gateway with `agents` (default: `claude` as entry() makes it) and a 500 ms
   * heartbeat, `env` over them; its log records kept in `logs`. Stopped after the test.
   */
  boot(
    env?: Record<string, string>,
    agents?: Record<string, unknown>,
  ): Promise<{ gw: TestGateway; url: string; logs: LogRecorder }>;
  /** Stop a gateway boot() started, before the test ends. */
  stop(gw: TestGateway): Promise<void>;
  /** Note the CLI of a `claude-code spawned` record, for a gateway started some other way. */
  notePid(record: Record<string, any>): void;
}

export function useClaudeCode(prefix = "mooring-claude-"): ClaudeCodeBundle {
  let db: TestDatabase | undefined;
  let fake: FakeAnthropic | undefined;
  let root: string | undefined;
  const gateways: TestGateway[] = [];
  const agentPids = new Set<number>();

  beforeAll(async () => {
    [db, fake] = await Promise.all([claimTestDatabase(), startFakeAnthropic()]);
  });
  afterAll(async () => {
    await fake?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    fake?.respond(() => undefined);
    root = realpathSync(await mkdtemp(join(tmpdir(), prefix)));
    await mkdir(join(root, "ws"), { recursive: true });
  });
  afterEach(async () => {
    await Promise.all(gateways.splice(0).map((g) => g.stop()));
    // A CLI a killed gateway left behind exits on stdin EOF; make sure none outlives the test.
    for (const pid of agentPids) if (isRunning(pid)) process.kill(pid, "SIGKILL");
    agentPids.clear();
    if (root) await rm(root, { recursive: true, force: true });
    root = undefined;
  });

  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is there only in a test or a hook`);
    return value;
  };
  const notePid = (record: Record<string, any>) => {
    if (record.msg === "claude-code spawned" && typeof record.agentPid === "number")
      agentPids.add(record.agentPid);
  };
  const bundle: ClaudeCodeBundle = {
    get db() {
      return need(db, "the database");
    },
    get fake() {
      return need(fake, "the fake Anthropic API");
    },
    get root() {
      return need(root, "the test's folder");
    },
    get configDir() {
      return join(bundle.root, "config");
    },
    get workspace() {
      return join(bundle.root, "ws");
    },
    agentPids,
    entry: (more = {}) => ({
      driver: "claude-code",
      command: claudeBin,
      env: {
        ANTHROPIC_BASE_URL: bundle.fake.url,
        ANTHROPIC_API_KEY: "test",
        CLAUDE_CONFIG_DIR: bundle.configDir,
      },
      ...more,
    }),
    async boot(env = {}, agents = { claude: bundle.entry() }) {
      const logs = new LogRecorder();
      const gw = await startTestGateway(
        bundle.db.url,
        { MOORING_AGENTS: JSON.stringify(agents), MOORING_HEARTBEAT_MS: "500", ...env },
        {
          onLog: (record) => {
            notePid(record);
            logs.push(record as never);
          },
        },
      );
      gateways.push(gw);
      return { gw, url: gw.url, logs };
    },
    async stop(gw) {
      const at = gateways.indexOf(gw);
      if (at >= 0) gateways.splice(at, 1);
      await gw.stop();
    },
    notePid,
  };
  return bundle;
}
