/**
 * A checkpoint: the whole working tree of a workspace (tracked and untracked files, `.gitignore`
 * honoured) as a commit, built through a temporary index (GIT_INDEX_FILE) so the user's HEAD,
 * index, branches, stash and reflog are never touched, and kept alive by a hidden ref
 * (`refs/mooring/<session>/<name>`). A workspace that is the top of a git work tree keeps its
 * checkpoints in its own repository; any other folder gets a shadow repository under the data
 * folder (`<dataDir>/checkpoints/<sha256 of the path>.git`, bare, never pushed).
 */
import { createHash } from "node:crypto";
import { lstat, mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { filterOverrides, type GitTarget, git } from "./git.js";

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

/** A temporary index file for the length of `work`. */
async function withTempIndex<T>(work: (indexFile: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "mooring-index-"));
  try {
    return await work(join(dir, "index"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const nul = (paths: readonly string[]) => (paths.length ? `${paths.join("\0")}\0` : "");

/** The working tree now as a commit (not yet under any ref). */
export async function snapshot(
  repo: CheckpointRepo,
  limits: CheckpointLimits,
  message: string,
): Promise<Snapshot> {
  const settings = repo.settings;
  return withTempIndex(async (indexFile) => {
    const opts = { indexFile, settings };
    // Seed with HEAD's tree: tracked files stay in even when a .gitignore rule matches them.
    if (repo.store === "workspace") {
      const head = await git(repo, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], {
        okCodes: [1, 128],
      });
      if (head.code === 0) await git(repo, ["read-tree", "HEAD"], opts);
    }
    const listed = await git(repo, ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], opts);
    const paths = [
      ...new Set(
        listed.stdout
          .toString("utf8")
          .split("\0")
          .filter((p) => p !== ""),
      ),
    ].sort();
    const keep: string[] = [];
    const drop: string[] = [];
    const skipped: Snapshot["skipped"] = [];
    for (const path of paths) {
      if (path.endsWith("/")) continue; // a nested repository: not ours to snapshot
      const info = await lstat(join(repo.workTree, path)).catch(() => null);
      if (!info) {
        keep.push(path); // gone: update-index --remove takes it out
        continue;
      }
      if (info.isDirectory()) continue;
      if (info.isFile() && info.size > limits.maxFileBytes) {
        skipped.push({ path, reason: "too_large" });
        drop.push(path);
        continue;
      }
      if (keep.length >= limits.maxFiles) {
        skipped.push({ path, reason: "too_many" });
        drop.push(path);
        continue;
      }
      keep.push(path);
    }
    if (keep.length)
      await git(repo, ["update-index", "-z", "--add", "--remove", "--stdin"], { ...opts, input: nul(keep) });
    if (drop.length)
      await git(repo, ["update-index", "-z", "--force-remove", "--stdin"], { ...opts, input: nul(drop) });
    const tree = (await git(repo, ["write-tree"], opts)).stdout.toString("utf8").trim();
    const commit = (await git(repo, ["commit-tree", tree], { settings, input: message })).stdout
      .toString("utf8")
      .trim();
    return { commit, skipped };
  });
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
