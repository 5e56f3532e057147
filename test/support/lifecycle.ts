/**
 * Helpers for the crash and restart tests (issue 5): real gateway processes with short timers,
 * their JSON logs (create, submit and wait are in turns.ts).
 */
import { once } from "node:events";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll } from "vitest";
import { createTestDatabase, type TestDatabase } from "./db.js";
import { type GatewayProcess, type GatewayCommand, spawnGateway, testEnv } from "./gateway.js";

/**
 * The hooks every process test file needs: a fresh database and workspace before the tests, every
 * spawned gateway killed after each test (printing its warnings when the test failed), everything
 * removed at the end. `ready` receives the database and workspace once they exist.
 */
export function useProcessSuite(
  workspacePrefix: string,
  procs: Processes,
  ready: (db: TestDatabase, workspace: string) => void,
): void {
  let db: TestDatabase | undefined;
  let workspace: string | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    workspace = await tempDir(workspacePrefix);
    ready(db, workspace);
  });
  afterEach(async (ctx) => {
    await procs.killAll(ctx.task.result?.state === "fail");
  });
  afterAll(async () => {
    await procs.killAll();
    await db?.drop();
    if (workspace) await rm(workspace, { recursive: true, force: true });
  });
}

/** Short lease/heartbeat/sweep/poll timers so takeover happens within seconds. */
export const fastTimers: Record<string, string> = {
  MOORING_LEASE_MS: "1500",
  MOORING_HEARTBEAT_MS: "300",
  MOORING_SWEEP_MS: "500",
  MOORING_POLL_MS: "100",
  MOORING_SHUTDOWN_GRACE_MS: "1000",
};

/** Env of a spawned gateway: the test database, fast timers, JSON logs at info. */
export function gatewayEnv(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return testEnv(databaseUrl, { ...fastTimers, LOG_LEVEL: "info", ...extra });
}

const outputClosed = new WeakMap<GatewayProcess, Promise<unknown>>();

/** Every process a test file spawns, so afterEach/afterAll can kill what is left. */
export class Processes {
  private readonly all: GatewayProcess[] = [];

  async spawn(env: Record<string, string>, launcher?: GatewayCommand): Promise<GatewayProcess> {
    const gw = await spawnGateway(env, launcher);
    outputClosed.set(gw, once(gw.child, "close"));
    this.all.push(gw);
    return gw;
  }

  /**
   * Kill what is left. When the test failed, print the warnings and errors every process logged
   * (and the end of the output of one that died on its own), so a failure explains itself.
   */
  async killAll(failed = false): Promise<void> {
    await Promise.all(
      this.all.map(async (gw) => {
        const diedOnItsOwn = !alive(gw);
        if (!diedOnItsOwn) gw.kill("SIGKILL");
        await exitedWithOutput(gw);
        if (!failed) return;
        const notable = logLines(gw).filter((l) => l.level >= 40 && l.msg !== "sweep failed; next tick retries");
        const tail = diedOnItsOwn ? gw.output().split("\n").slice(-30).join("\n") : "";
        console.log(
          `gateway pid ${gw.child.pid} (${gw.url}): warnings/errors:\n${notable
            .slice(-60)
            .map((l) => JSON.stringify(l).slice(0, 400))
            .join("\n")}${tail ? `\nlast output:\n${tail}` : ""}`,
        );
      }),
    );
    this.all.length = 0;
  }
}

/** Resolves with the exit code once the process exited and all of its output was read. */
export async function exitedWithOutput(gw: GatewayProcess): Promise<number | string> {
  const code = await gw.exited;
  await outputClosed.get(gw);
  return code;
}

export function alive(gw: GatewayProcess): boolean {
  return gw.child.exitCode === null && gw.child.signalCode === null;
}

/** The JSON log lines a spawned gateway wrote so far. */
export function logLines(gw: GatewayProcess): Record<string, any>[] {
  const lines: Record<string, any>[] = [];
  for (const line of gw.output().split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      lines.push(JSON.parse(line));
    } catch {
      // a line cut by the read; ignore
    }
  }
  return lines;
}

/** Log lines whose message contains `text`. */
export function logsWith(gw: GatewayProcess, text: string): Record<string, any>[] {
  return logLines(gw).filter((l) => typeof l.msg === "string" && l.msg.includes(text));
}

/** A temporary folder usable as a session workspace or a data dir (also by a `postgres` user when root). */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  await chmod(dir, 0o755);
  return dir;
}
