/**
 * A pristine cluster, exactly as initdb made it, kept so that a new data folder is a copy of it
 * rather than another initdb run: initdb took ~1.4 s of a ~2.2 s cold start on the test machine
 * (two configuration probes, bootstrap, then system views, information_schema and collations in
 * single-user mode), a copy of its ~40 MB ~0.1 s (bench/README.md). The first cold start on a
 * machine still runs initdb, and leaves its output here before the postmaster ever touches it.
 *
 * The folder's name is a hash of everything initdb's output depends on: the initdb binary (path,
 * size, mtime), its options, the locale environment it reads, and the account that owns the
 * files. Another Postgres build, other options or another locale find no template and make their
 * own. Nothing of a run is in a template: no schema (the migrations run on the copy as on a fresh
 * cluster), no data. Delete the folder at any time; the next cold start makes it again.
 *
 * Concurrent starts are safe: a template is written under a temporary name and renamed into
 * place (a second writer's rename fails and its copy is removed), and only a renamed one is read.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { statSync } from "node:fs";
import { mkdir, rename, rm, rmdir, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The environment variables initdb takes its locale and encoding from. */
const LOCALE_VARIABLES = ["LC_ALL", "LC_COLLATE", "LC_CTYPE", "LC_MONETARY", "LC_NUMERIC", "LC_TIME", "LANG"];

/** Where the template for this initdb, these options and this owner lives under `cacheDir`. */
export function templatePath(cacheDir: string, initdbPath: string, options: string[], owner: number): string {
  const binary = statSync(initdbPath);
  const key = JSON.stringify({
    initdb: [initdbPath, binary.size, binary.mtimeMs],
    options,
    locale: LOCALE_VARIABLES.map((name) => process.env[name] ?? null),
    owner,
  });
  return join(cacheDir, `pg-cluster-${createHash("sha256").update(key).digest("hex").slice(0, 16)}`);
}

/**
 * Copy the template into `databaseDir` (which must not exist, or be empty). False when there is no
 * template yet. `cp -a` keeps modes and owners: Postgres insists its data folder is 0700 and owned
 * by the account it runs as. `onSpawn` is told when the copy runs (the gateway loads meanwhile).
 */
export async function copyTemplate(template: string, databaseDir: string, onSpawn: () => void): Promise<boolean> {
  const found = await stat(join(template, "PG_VERSION")).then(
    () => true,
    () => false,
  );
  if (!found) return false;
  await rmdir(databaseDir).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== "ENOENT") throw err;
  });
  const copying = run("cp", ["-a", template, databaseDir]);
  onSpawn();
  try {
    await copying;
  } catch (err) {
    // A half copy would look like a cluster to the next start: leave nothing behind.
    await rm(databaseDir, { recursive: true, force: true });
    throw err;
  }
  return true;
}

/** Keep a copy of the cluster initdb just made in `databaseDir` as the template (before it is started). */
export async function saveTemplate(databaseDir: string, template: string): Promise<void> {
  await mkdir(dirname(template), { recursive: true });
  const partial = `${template}.partial-${process.pid}-${Date.now()}`;
  try {
    await run("cp", ["-a", databaseDir, partial]);
    await rename(partial, template).catch((err: NodeJS.ErrnoException) => {
      // Another start saved one first: it is as good as this one.
      if (err.code !== "ENOTEMPTY" && err.code !== "EEXIST") throw err;
    });
  } finally {
    // Renamed: nothing is left under the partial name. Not renamed (another start made the
    // template first, or the copy failed): the partial copy goes.
    await rm(partial, { recursive: true, force: true });
  }
}
