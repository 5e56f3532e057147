/**
 * A checkpoint: the whole working tree of a workspace (tracked and untracked files, `.gitignore`
 * honoured) as a commit, built through an index of mooring's own (GIT_INDEX_FILE) so the user's
 * HEAD, index, branches, stash and reflog are never touched, and kept alive by a hidden ref
 * (`refs/mooring/<session>/<name>`). A workspace that is the top of a git work tree keeps its
 * checkpoints in its own repository; any other folder gets a shadow repository under the data
 * folder (`<dataDir>/checkpoints/<sha256 of the path>.git`, bare, never pushed).
 */
import { createHash } from "node:crypto";
import { lstat, mkdir, realpath, rm } from "node:fs/promises";
import { join } from "node:path";
import { filterOverrides, GitError, type GitTarget, git } from "./git.js";

export interface CheckpointLimits {
  /** Files larger than this are left out of a checkpoint (with a notice). */
  maxFileBytes: number;
  /** At most this many files go into a checkpoint; the rest are left out (with a notice). */
  maxFiles: number;
}

/** Where a workspace's checkpoints live. */
export interface CheckpointRepo extends GitTarget {
  store: "workspace" | "shadow";
  /** Settings disarming the repository's filter drivers. */
  settings: string[];
}

export interface Snapshot {
  commit: string;
  /** Paths left out, and why. */
  skipped: { path: string; reason: "too_large" | "too_many" }[];
}

/**
 * The repository a workspace's checkpoints go to: its own when the workspace is the top of a git
 * work tree, else a shadow one under `dataDir` (made on first use).
 */
export async function repoFor(workspace: string, dataDir: string): Promise<CheckpointRepo> {
  const top = await git({ cwd: workspace }, ["rev-parse", "--show-toplevel", "--absolute-git-dir"], {
    okCodes: [128],
  }).catch(() => null);
  const lines = top?.code === 0 ? top.stdout.toString("utf8").trim().split("\n") : [];
  if (lines.length === 2 && lines[0] && lines[1]) {
    const real = await realpath(lines[0]).catch(() => lines[0] as string);
    if (real === workspace) {
      const target = { gitDir: lines[1], workTree: workspace };
      return { ...target, store: "workspace", settings: await filterOverrides(target) };
    }
  }
  const folder = join(dataDir, "checkpoints");
  const gitDir = join(folder, `${createHash("sha256").update(workspace).digest("hex").slice(0, 40)}.git`);
  const exists = await lstat(join(gitDir, "HEAD")).catch(() => null);
  if (!exists) {
    await mkdir(folder, { recursive: true });
    await git({ cwd: folder }, ["init", "--bare", "--quiet", gitDir]);
  }
  return { gitDir, workTree: workspace, store: "shadow", settings: [] };
}

/**
 * The index a repository's checkpoints are built in: kept between snapshots (beside the
 * repository's own files, never the user's index), so `update-index` finds each unchanged file's
 * stat data there and hashes only what changed since the last checkpoint. A temporary index made
 * every time rehashed the whole tree twice a turn (20,000 files: over a second a snapshot). Only
 * the holder of the workspace's lock uses it (docs/architecture.md, Workspace checkpoints).
 */
export function checkpointIndexFile(repo: GitTarget): string {
  return join(repo.gitDir, "mooring-checkpoint-index");
}

const nul = (paths: readonly string[]) => (paths.length ? `${paths.join("\0")}\0` : "");
const lines = (out: Buffer) =>
  out
    .toString("utf8")
    .split("\0")
    .filter((p) => p !== "");

/** How many files are looked at (lstat) at once. */
const STAT_BATCH = 256;

/**
 * The working tree now as a commit (not yet under any ref). What goes in: HEAD's files (tracked
 * files stay in even when a .gitignore rule matches them) and every other file no ignore rule
 * matches, each as it is on disk; a file gone from disk goes out.
 */
export async function snapshot(
  repo: CheckpointRepo,
  limits: CheckpointLimits,
  message: string,
): Promise<Snapshot> {
  const indexFile = checkpointIndexFile(repo);
  try {
    return await snapshotIn(repo, limits, message, indexFile);
  } catch (error) {
    // A kept index that no longer fits the repository (written by another git, or naming objects
    // a `git gc` pruned since): start it again, once.
    if (!(error instanceof GitError)) throw error;
    await rm(indexFile, { force: true });
    return snapshotIn(repo, limits, message, indexFile);
  }
}

async function snapshotIn(
  repo: CheckpointRepo,
  limits: CheckpointLimits,
  message: string,
  indexFile: string,
): Promise<Snapshot> {
  const settings = repo.settings;
  const opts = { indexFile, settings };
  const wanted = new Set<string>();
  // HEAD's submodules, kept as HEAD has them (their folders are not ours to snapshot).
  const gitlinks: string[] = [];
  if (repo.store === "workspace") {
    const head = await git(repo, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], {
      okCodes: [1, 128],
    });
    if (head.code === 0) {
      for (const entry of lines((await git(repo, ["ls-tree", "-r", "-z", "HEAD"], opts)).stdout)) {
        const tab = entry.indexOf("\t");
        const path = entry.slice(tab + 1);
        if (entry.startsWith("160000 "))
          gitlinks.push(`${entry.slice(0, tab).replace(" commit ", " ")}\t${path}`);
        else wanted.add(path);
      }
    }
  }
  const submodules = new Set(gitlinks.map((g) => g.slice(g.indexOf("\t") + 1)));
  // The kept index's entries (last checkpoint's files) and the files it does not hold yet that no
  // ignore rule matches; then the kept entries an ignore rule matches now (unless HEAD has them).
  const listed = lines(
    (await git(repo, ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], opts)).stdout,
  );
  const ignored = new Set(
    lines((await git(repo, ["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"], opts)).stdout),
  );
  for (const path of listed) if (!ignored.has(path)) wanted.add(path);
  const drop = [...ignored].filter((p) => !wanted.has(p) && !submodules.has(p));
  // A folder ending in "/" is a nested repository: not ours to snapshot.
  const paths = [...wanted].filter((p) => !p.endsWith("/") && !submodules.has(p)).sort();
  const infos = new Array<Awaited<ReturnType<typeof lstat>> | null>(paths.length);
  for (let i = 0; i < paths.length; i += STAT_BATCH) {
    await Promise.all(
      paths.slice(i, i + STAT_BATCH).map(async (path, j) => {
        infos[i + j] = await lstat(join(repo.workTree, path)).catch(() => null);
      }),
    );
  }
  const keep: string[] = [];
  const skipped: Snapshot["skipped"] = [];
  paths.forEach((path, i) => {
    const info = infos[i];
    if (!info) {
      keep.push(path); // gone: update-index --remove takes it out
      return;
    }
    if (info.isDirectory()) {
      drop.push(path); // a submodule HEAD no longer has
      return;
    }
    if (info.isFile() && info.size > limits.maxFileBytes) {
      skipped.push({ path, reason: "too_large" });
      drop.push(path);
      return;
    }
    if (keep.length >= limits.maxFiles) {
      skipped.push({ path, reason: "too_many" });
      drop.push(path);
      return;
    }
    keep.push(path);
  });
  if (keep.length)
    await git(repo, ["update-index", "-z", "--add", "--remove", "--stdin"], { ...opts, input: nul(keep) });
  if (drop.length)
    await git(repo, ["update-index", "-z", "--force-remove", "--stdin"], { ...opts, input: nul(drop) });
  if (gitlinks.length)
    await git(repo, ["update-index", "-z", "--index-info"], { ...opts, input: nul(gitlinks) });
  const tree = (await git(repo, ["write-tree"], opts)).stdout.toString("utf8").trim();
  const commit = (await git(repo, ["commit-tree", tree], { settings, input: message })).stdout
    .toString("utf8")
    .trim();
  return { commit, skipped };
}

/** Point `ref` (ours, under refs/mooring/) at `commit`. */
export async function setRef(repo: CheckpointRepo, ref: string, commit: string): Promise<void> {
  await git(repo, ["update-ref", "--no-deref", ref, commit], { settings: repo.settings });
}

/** Delete every ref under `prefix` (a session's, when it is garbage-collected). */
export async function deleteRefs(repo: CheckpointRepo, prefix: string): Promise<number> {
  const { stdout } = await git(repo, ["for-each-ref", "--format=%(refname)", prefix], {
    settings: repo.settings,
  });
  const refs = stdout.toString("utf8").split("\n").filter(Boolean);
  if (refs.length) {
    await git(repo, ["update-ref", "--stdin", "-z"], {
      settings: repo.settings,
      input: refs.map((r) => `delete ${r}\0\0`).join(""),
    });
  }
  return refs.length;
}

/**
 * Deletes a session's refs from every repository its checkpoints were written to (garbage
 * collection at archive, and a purge), where that repository is on this host: another host's
 * instance does it there. Answers how many refs went, and how many repositories are not here.
 */
export async function removeSessionRefs(
  repos: readonly { gitDir: string; store: string }[],
  sessionId: string,
): Promise<{ removed: number; elsewhere: number }> {
  let removed = 0;
  let elsewhere = 0;
  for (const { gitDir, store } of repos) {
    if (!(await lstat(gitDir).catch(() => null))) {
      elsewhere++;
      continue;
    }
    const repo = { gitDir, workTree: gitDir, store: store as CheckpointRepo["store"], settings: [] };
    removed += await deleteRefs(repo, `refs/mooring/${sessionId}/`);
  }
  return { removed, elsewhere };
}

/** Whether `commit` still exists in the repository. */
export async function hasCommit(repo: CheckpointRepo, commit: string): Promise<boolean> {
  const r = await git(repo, ["cat-file", "-e", `${commit}^{commit}`], {
    settings: repo.settings,
    okCodes: [1, 128],
  });
  return r.code === 0;
}
