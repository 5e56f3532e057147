/**
 * Putting files of a checkpoint back into the working tree: the versions in the checkpoint are
 * written by `git checkout-index` from a temporary index (which refuses to write through a
 * symlinked folder), the files the checkpoint does not have are removed. Paths come from git's own
 * listing of the two commits, and each is checked to stay inside the workspace before anything
 * is written or removed.
 */
import { lstat, mkdtemp, realpath, rm, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, normalize, sep } from "node:path";
import { git } from "./git.js";
import type { CheckpointRepo } from "./snapshot.js";

/**
 * A relative path inside the workspace, in git's form (`/` separated, no `.`/`..` parts), or null
 * for one that is not: absolute, escaping with `..`, empty, or with a NUL.
 */
export function workspacePath(input: string): string | null {
  if (typeof input !== "string" || input === "" || input.includes("\0") || isAbsolute(input)) return null;
  const clean = normalize(input).split(sep).join("/").replace(/\/+$/, "");
  if (clean === "" || clean === "." || clean === ".." || clean.startsWith("../")) return null;
  if (clean.split("/").some((part) => part === ".git")) return null;
  return clean;
}

/** Whether `path` is `scope` or inside it (scope a folder or a file, in git's form). */
export function inScope(path: string, scopes: readonly string[] | undefined): boolean {
  if (!scopes) return true;
  return scopes.some((s) => path === s || path.startsWith(`${s}/`));
}

/** Whether the folder that would hold `path` resolves inside the workspace (no symlinked escape). */
async function parentInside(workTree: string, path: string): Promise<boolean> {
  let dir = dirname(join(workTree, path));
  for (;;) {
    const real = await realpath(dir).catch(() => null);
    if (real) return real === workTree || real.startsWith(workTree + sep);
    if (dir === workTree || dir === dirname(dir)) return false;
    dir = dirname(dir);
  }
}

/** Write `present` (paths in `commit`) from it and remove `absent` (paths it does not have). */
export async function restoreFiles(
  repo: CheckpointRepo,
  commit: string,
  present: readonly string[],
  absent: readonly string[],
): Promise<void> {
  for (const path of [...present, ...absent]) {
    if (!(await parentInside(repo.workTree, path))) {
      throw new Error(`checkpoint path ${JSON.stringify(path)} resolves outside the workspace`);
    }
  }
  for (const path of absent) {
    const full = join(repo.workTree, path);
    const info = await lstat(full).catch(() => null);
    if (!info) continue;
    if (info.isDirectory()) await rm(full, { recursive: true, force: true });
    else await unlink(full);
  }
  if (present.length === 0) return;
  const dir = await mkdtemp(join(tmpdir(), "mooring-index-"));
  try {
    const opts = { indexFile: join(dir, "index"), settings: repo.settings };
    await git(repo, ["read-tree", commit], opts);
    // A file now where the checkpoint has a folder (or the reverse) is removed first.
    for (const path of present) {
      const info = await lstat(join(repo.workTree, path)).catch(() => null);
      if (info?.isDirectory()) await rm(join(repo.workTree, path), { recursive: true, force: true });
    }
    await git(repo, ["checkout-index", "-f", "-z", "--stdin"], { ...opts, input: `${present.join("\0")}\0` });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
