/**
 * A checkpoint snapshot against real git: the tree it records is the working tree as a user sees
 * it (HEAD's files, ignored or not; other files no ignore rule matches; deletions), whatever its
 * kept index (checkpointIndexFile) remembers from the snapshot before; the user's own index is
 * never written; a kept index that no longer fits the repository is started again.
 */
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkpointIndexFile, repoFor, snapshot } from "../../src/checkpoints/snapshot.js";
import { userGit } from "../support/user-git.js";

const limits = { maxFileBytes: 1024, maxFiles: 1000 };
const folders: string[] = [];

afterEach(async () => {
  await Promise.all(folders.splice(0).map((f) => rm(f, { recursive: true, force: true })));
});

async function folder(prefix: string): Promise<string> {
  const f = await mkdtemp(join(tmpdir(), prefix));
  folders.push(f);
  return f;
}

/** path → blob content of a checkpoint commit (gitlinks as "commit <sha>"). */
function treeOf(gitDir: string, commit: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of userGit(gitDir, [`--git-dir=${gitDir}`, "ls-tree", "-r", commit])
    .split("\n")
    .filter(Boolean)) {
    const [meta, path] = line.split("\t") as [string, string];
    const [, type, sha] = meta.split(" ") as [string, string, string];
    out[path] =
      type === "blob" ? userGit(gitDir, [`--git-dir=${gitDir}`, "cat-file", "blob", sha]) : `${type} ${sha}`;
  }
  return out;
}

async function userRepo(): Promise<string> {
  const ws = await folder("mooring-snap-");
  userGit(ws, ["init", "-q", "-b", "main"]);
  await writeFile(join(ws, ".gitignore"), "*.log\n");
  await writeFile(join(ws, "a.txt"), "alpha\n");
  await writeFile(join(ws, "kept.log"), "tracked although ignored\n");
  userGit(ws, ["add", "-A"]);
  userGit(ws, ["add", "-f", "kept.log"]);
  userGit(ws, ["commit", "-q", "-m", "first"]);
  return ws;
}

describe("snapshot", () => {
  it("records the working tree as it is each time, with the kept index carried between snapshots", async () => {
    const ws = await userRepo();
    const repo = await repoFor(ws, await folder("mooring-data-"));
    expect(repo.store).toBe("workspace");
    const userIndex = await readFile(join(ws, ".git", "index"));
    await writeFile(join(ws, "new.txt"), "untracked\n");
    await writeFile(join(ws, "noise.log"), "ignored, untracked\n");

    const first = await snapshot(repo, limits, "one\n");
    expect(treeOf(repo.gitDir, first.commit)).toEqual({
      ".gitignore": "*.log\n",
      "a.txt": "alpha\n",
      "kept.log": "tracked although ignored\n",
      "new.txt": "untracked\n",
    });
    expect((await stat(checkpointIndexFile(repo))).isFile()).toBe(true);

    // Same size, same second: git's stat check alone cannot tell; the content must still be read.
    await writeFile(join(ws, "a.txt"), "ALPHA\n");
    await rm(join(ws, "new.txt"));
    await writeFile(join(ws, "later.txt"), "x".repeat(2000)); // over maxFileBytes
    await writeFile(join(ws, ".gitignore"), "*.log\nnew2.txt\n");
    await writeFile(join(ws, "new2.txt"), "ignored from now on\n");
    const second = await snapshot(repo, limits, "two\n");
    expect(treeOf(repo.gitDir, second.commit)).toEqual({
      ".gitignore": "*.log\nnew2.txt\n",
      "a.txt": "ALPHA\n",
      "kept.log": "tracked although ignored\n",
    });
    expect(second.skipped).toEqual([{ path: "later.txt", reason: "too_large" }]);

    // A file the last snapshot held that an ignore rule matches now goes out.
    await writeFile(join(ws, "was.txt"), "in\n");
    const third = await snapshot(repo, limits, "three\n");
    expect(Object.keys(treeOf(repo.gitDir, third.commit))).toContain("was.txt");
    await writeFile(join(ws, ".gitignore"), "*.log\nnew2.txt\nwas.txt\n");
    const fourth = await snapshot(repo, limits, "four\n");
    expect(Object.keys(treeOf(repo.gitDir, fourth.commit))).not.toContain("was.txt");

    expect(await readFile(join(ws, ".git", "index"))).toEqual(userIndex);
    expect(userGit(ws, ["status", "--porcelain"]).split("\n")).toContain(" M a.txt");
  });

  it("keeps HEAD's submodules as HEAD has them", async () => {
    const ws = await userRepo();
    const sub = join(ws, "sub");
    await mkdir(sub);
    userGit(sub, ["init", "-q", "-b", "main"]);
    await writeFile(join(sub, "s.txt"), "inside\n");
    userGit(sub, ["add", "-A"]);
    userGit(sub, ["commit", "-q", "-m", "sub"]);
    userGit(ws, ["-c", "advice.addEmbeddedRepo=false", "add", "sub"]);
    userGit(ws, ["commit", "-q", "-m", "with a submodule"]);
    const subHead = userGit(sub, ["rev-parse", "HEAD"]).trim();
    const repo = await repoFor(ws, await folder("mooring-data-"));
    for (const message of ["one\n", "two\n"]) {
      const snap = await snapshot(repo, limits, message);
      const tree = treeOf(repo.gitDir, snap.commit);
      expect(tree.sub).toBe(`commit ${subHead}`);
      expect(tree["sub/s.txt"]).toBeUndefined();
    }
  });

  it("starts a kept index again when it is not an index git can read", async () => {
    const ws = await folder("mooring-plain-");
    await writeFile(join(ws, "f.txt"), "plain folder\n");
    const repo = await repoFor(ws, await folder("mooring-data-"));
    expect(repo.store).toBe("shadow");
    await snapshot(repo, limits, "one\n");
    await writeFile(checkpointIndexFile(repo), "not an index");
    await writeFile(join(ws, "g.txt"), "second\n");
    const snap = await snapshot(repo, limits, "two\n");
    expect(treeOf(repo.gitDir, snap.commit)).toEqual({ "f.txt": "plain folder\n", "g.txt": "second\n" });
  });
});
