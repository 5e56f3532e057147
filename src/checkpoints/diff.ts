/**
 * What changed between two checkpoints: per file its status, line counts and unified diff (a
 * binary file as "binary, N bytes"), computed by git from the two commits alone (no work tree, no
 * index, no external diff or textconv a repository configures).
 */
import type { CheckpointRepo } from "./snapshot.js";
import { git } from "./git.js";

export interface FileChange {
  path: string;
  status: "added" | "modified" | "deleted" | "type_changed";
  additions: number;
  deletions: number;
  binary: boolean;
  /** Size of the new version (the old one for a deleted file), in bytes. */
  bytes: number;
  /** The unified diff; for a binary file "binary, N bytes". */
  patch: string;
}

const statusOf: Record<string, FileChange["status"]> = {
  A: "added",
  M: "modified",
  D: "deleted",
  T: "type_changed",
};
const ZERO = /^0+$/;

/** The files that differ between two commits, with stats, in path order; no patches. */
export async function changedFiles(
  repo: CheckpointRepo,
  from: string,
  to: string,
): Promise<Omit<FileChange, "patch">[]> {
  const settings = repo.settings;
  const base = ["diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", from, to];
  const [raw, numstat] = await Promise.all([
    git(repo, [...base.slice(0, 2), "--raw", ...base.slice(2)], { settings }),
    git(repo, [...base.slice(0, 2), "--numstat", ...base.slice(2)], { settings }),
  ]);
  // --raw -z: ":<mode> <mode> <sha> <sha> <status>\0<path>\0"
  const rawParts = raw.stdout.toString("utf8").split("\0");
  const entries: { path: string; status: string; oldSha: string; newSha: string }[] = [];
  for (let i = 0; i + 1 < rawParts.length; i += 2) {
    const head = rawParts[i] as string;
    if (!head.startsWith(":")) break;
    const [, , oldSha, newSha, status] = head.slice(1).split(" ");
    entries.push({
      path: rawParts[i + 1] as string,
      status: (status ?? "M").charAt(0),
      oldSha: oldSha ?? "",
      newSha: newSha ?? "",
    });
  }
  // --numstat -z: "<added>\t<deleted>\t<path>\0" ("-\t-" for binary)
  const stats = new Map<string, { additions: number; deletions: number; binary: boolean }>();
  for (const line of numstat.stdout.toString("utf8").split("\0")) {
    const match = /^(-|\d+)\t(-|\d+)\t(.*)$/s.exec(line);
    if (!match) continue;
    const binary = match[1] === "-";
    stats.set(match[3] as string, {
      additions: binary ? 0 : Number(match[1]),
      deletions: binary ? 0 : Number(match[2]),
      binary,
    });
  }
  const sizes = await blobSizes(
    repo,
    entries.map((e) => (ZERO.test(e.newSha) ? e.oldSha : e.newSha)),
  );
  return entries.map((e, i) => {
    const s = stats.get(e.path) ?? { additions: 0, deletions: 0, binary: false };
    return { path: e.path, status: statusOf[e.status] ?? "modified", ...s, bytes: sizes[i] ?? 0 };
  });
}

async function blobSizes(repo: CheckpointRepo, shas: string[]): Promise<number[]> {
  if (shas.length === 0) return [];
  const { stdout } = await git(repo, ["cat-file", "--batch-check=%(objectsize)"], {
    settings: repo.settings,
    input: `${shas.join("\n")}\n`,
  });
  return stdout
    .toString("utf8")
    .split("\n")
    .slice(0, shas.length)
    .map((n) => Number.parseInt(n, 10) || 0);
}

/**
 * The unified diffs of `paths` (files of changedFiles) between two commits, in the same order,
 * each cut at `maxBytes`.
 */
export async function patchesOf(
  repo: CheckpointRepo,
  from: string,
  to: string,
  files: readonly Omit<FileChange, "patch">[],
  maxBytes: number,
): Promise<{ patch: string; truncated: boolean }[]> {
  const text = files.filter((f) => !f.binary);
  const patches = new Map<string, string>();
  if (text.length > 0) {
    // The paths come from git's own listing of the two commits (never from a client); literal
    // pathspecs (GIT_LITERAL_PATHSPECS) after `--`, in chunks that stay far below ARG_MAX.
    const chunks: string[][] = [[]];
    let size = 0;
    for (const f of text) {
      if (size > 64 * 1024) {
        chunks.push([]);
        size = 0;
      }
      chunks[chunks.length - 1]?.push(f.path);
      size += f.path.length + 1;
    }
    const outputs = await Promise.all(
      chunks.map((paths) =>
        git(
          repo,
          [
            "diff-tree",
            "-r",
            "-p",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            from,
            to,
            "--",
            ...paths,
          ],
          { settings: repo.settings },
        ),
      ),
    );
    const stdout = Buffer.concat(outputs.map((o) => o.stdout));
    // Each file's part starts with a "diff --git " line; no content line can (they start with
    // ' ', '+', '-' or '\'), and git lists the files in the order changedFiles did.
    const all = stdout.toString("utf8");
    const starts: number[] = [];
    let at = all.startsWith("diff --git ") ? 0 : all.indexOf("\ndiff --git ");
    if (at > 0) at += 1;
    while (at >= 0) {
      starts.push(at);
      const next = all.indexOf("\ndiff --git ", at);
      at = next < 0 ? -1 : next + 1;
    }
    starts.forEach((start, i) => {
      const file = text[i];
      if (file) patches.set(file.path, all.slice(start, starts[i + 1] ?? all.length));
    });
  }
  return files.map((f) => {
    if (f.binary) return { patch: `binary, ${f.bytes} bytes`, truncated: false };
    const patch = patches.get(f.path) ?? "";
    if (Buffer.byteLength(patch) <= maxBytes) return { patch, truncated: false };
    return {
      patch: Buffer.from(patch)
        .subarray(0, maxBytes)
        .toString("utf8")
        .replace(/\uFFFD$/, ""),
      truncated: true,
    };
  });
}
