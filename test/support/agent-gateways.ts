/**
 * What every test file that runs real agents (Claude Code, ACP) through in-process gateways sets
 * up, as one call: a pooled database for the file; for every test a fresh folder (`root`, its real
 * path) with a workspace in it; and after the test every gateway it booted stopped and every agent
 * process a gateway spawned (or a stopped gateway left behind) killed. test/support/claude-code.ts
 * and acp-gateway.ts add their agent's registry entries.
 */
import { realpathSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, vi } from "vitest";
import { isRunning, LogRecorder } from "./agent-gateway.js";
import { claimTestDatabase, type TestDatabase } from "./db.js";
import { startTestGateway, type TestGateway } from "./gateway.js";

export interface AgentGatewaysBundle {
  readonly db: TestDatabase;
  /** This test's folder (its real path). */
  readonly root: string;
  /** `root/ws`, made before the test. */
  readonly workspace: string;
  /** Agent processes the gateways spawned (from their spawn log lines); killed after the test. */
  readonly agentPids: Set<number>;
  /**
   * An in-process gateway with `agents` as its registry and a 500 ms heartbeat, `env` over them;
   * its log records kept in `logs`. Stopped after the test.
   */
  boot(
    agents: Record<string, unknown>,
    env?: Record<string, string>,
  ): Promise<{ gw: TestGateway; url: string; logs: LogRecorder }>;
  /** Stop a gateway boot() started, before the test ends. */
  stop(gw: TestGateway): Promise<void>;
  /** Note the agent of a spawn log record, for a gateway started some other way. */
  notePid(record: Record<string, any>): void;
}

/** `spawnedMsg`: the log line a gateway writes with `agentPid` when it starts an agent. */
export function useAgentGateways(prefix: string, spawnedMsg: string): AgentGatewaysBundle {
  let db: TestDatabase | undefined;
  let root: string | undefined;
  const gateways: TestGateway[] = [];
  const agentPids = new Set<number>();

  beforeAll(async () => {
    db = await claimTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  beforeEach(async () => {
    root = realpathSync(await mkdtemp(join(tmpdir(), prefix)));
    await mkdir(join(root, "ws"), { recursive: true });
  });
  afterEach(async () => {
    await Promise.all(gateways.splice(0).map((g) => g.stop()));
    // An agent a killed gateway left behind exits on stdin EOF; make sure none outlives the test.
    for (const pid of agentPids) if (isRunning(pid)) process.kill(pid, "SIGKILL");
    // Not our children, so no exit event: wait until each is gone (reaped) before removing the
    // folders it wrote in (a write still settling made rm fail with ENOTEMPTY in CI).
    await Promise.all(
      [...agentPids].map((pid) =>
        vi.waitFor(
          () => {
            if (isRunning(pid)) throw new Error(`agent ${pid} still running after SIGKILL`);
          },
          { timeout: 10_000, interval: 20 },
        ),
      ),
    );
    agentPids.clear();
    // Its own children (a CLI's helpers) may outlive it a moment: rm retries on ENOTEMPTY.
    if (root) await rm(root, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
    root = undefined;
  });

  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is there only in a test or a hook`);
    return value;
  };
  const notePid = (record: Record<string, any>) => {
    if (record.msg === spawnedMsg && typeof record.agentPid === "number") agentPids.add(record.agentPid);
  };
  const bundle: AgentGatewaysBundle = {
    get db() {
      return need(db, "the database");
    },
    get root() {
      return need(root, "the test's folder");
    },
    get workspace() {
      return join(bundle.root, "ws");
    },
    agentPids,
    async boot(agents, env = {}) {
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
