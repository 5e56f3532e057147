/**
 * git, run the one way checkpoints run it (docs/architecture.md, Workspace checkpoints): a fixed
 * environment that reads no system or user configuration, runs no hook, no fsmonitor, no pager,
 * no filter or external diff a repository's own `.git/config` names, no prompt, no network; the
 * user's index is never used (every command that needs one gets an index of mooring's own in GIT_INDEX_FILE).
 * Arguments are ours only: paths a client chose go through stdin, after validation
 * (checkpoints/paths.ts), never onto the command line.
 */
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";

/** Where git runs: the repository (`--git-dir`) and the work tree it snapshots. */
export interface GitTarget {
  gitDir: string;
  workTree: string;
}

export class GitError extends Error {
  constructor(
    message: string,
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(message);
    this.name = "GitError";
  }
}

/** Settings that beat whatever a repository's config says (given with `-c`, they win). */
const FIXED_SETTINGS = [
  "core.hooksPath=/dev/null",
  "core.fsmonitor=false",
  "core.untrackedCache=false",
  "core.pager=cat",
  "core.sshCommand=false",
  "core.quotePath=false",
  "core.autocrlf=false",
  "core.safecrlf=false",
  "core.symlinks=true",
  "core.splitIndex=false",
  "core.logAllRefUpdates=false",
  "core.commitGraph=false",
  "index.threads=1",
  "commit.gpgSign=false",
  "tag.gpgSign=false",
  "gc.auto=0",
  "maintenance.auto=false",
  "protocol.allow=never",
  "diff.noprefix=false",
  "diff.mnemonicPrefix=false",
  "diff.renames=false",
  "color.ui=false",
  "submodule.recurse=false",
];

/** The environment every checkpoint git command gets; the gateway's own is not passed on. */
export function gitEnvironment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: tmpdir(),
    XDG_CONFIG_HOME: tmpdir(),
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_PAGER: "cat",
    PAGER: "cat",
    GIT_OPTIONAL_LOCKS: "0",
    // Every pathspec we pass is a literal path: no glob or magic a client could slip in.
    GIT_LITERAL_PATHSPECS: "1",
    GIT_ADVICE: "0",
    LC_ALL: "C",
    GIT_AUTHOR_NAME: "mooring",
    GIT_AUTHOR_EMAIL: "checkpoints@mooring.invalid",
    GIT_COMMITTER_NAME: "mooring",
    GIT_COMMITTER_EMAIL: "checkpoints@mooring.invalid",
    ...extra,
  };
}

export interface RunOptions {
  /** An index file of mooring's own (never the repository's). */
  indexFile?: string;
  input?: string | Buffer;
  /** Exit codes that are answers, not failures (`diff --quiet` answers 1). */
  okCodes?: number[];
  /** Settings added for this call (filter overrides). */
  settings?: readonly string[];
}

/** Cap on what one command's stdout may grow to in memory. */
const MAX_OUTPUT_BYTES = 256 * 1024 * 1024;

export async function git(
  target: GitTarget | { cwd: string },
  args: readonly string[],
  options: RunOptions = {},
): Promise<{ stdout: Buffer; code: number }> {
  const settings = [...FIXED_SETTINGS, ...(options.settings ?? [])].flatMap((s) => ["-c", s]);
  const where = "gitDir" in target ? [`--git-dir=${target.gitDir}`, `--work-tree=${target.workTree}`] : [];
  const extra: Record<string, string> = {};
  if (options.indexFile) extra.GIT_INDEX_FILE = options.indexFile;
  const cwd = "gitDir" in target ? target.workTree : target.cwd;
  const child = spawn("git", ["--no-pager", ...settings, ...where, ...args], {
    cwd,
    env: gitEnvironment(extra),
    stdio: ["pipe", "pipe", "pipe"],
  });
  const out: Buffer[] = [];
  let outBytes = 0;
  let err = "";
  child.stdout.on("data", (chunk: Buffer) => {
    outBytes += chunk.length;
    if (outBytes > MAX_OUTPUT_BYTES) {
      child.kill("SIGKILL");
      return;
    }
    out.push(chunk);
  });
  child.stderr.on("data", (chunk: Buffer) => {
    if (err.length < 8192) err += chunk.toString("utf8");
  });
  child.stdin.on("error", () => {});
  child.stdin.end(options.input ?? "");
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (c) => resolve(c));
  });
  if (code === 0 || (code !== null && options.okCodes?.includes(code))) {
    return { stdout: Buffer.concat(out), code };
  }
  throw new GitError(`git ${args[0]} failed (exit ${code}): ${err.trim().slice(0, 500)}`, code, err);
}

/** Settings that disarm every filter driver the repository configures (clean/smudge/process). */
export async function filterOverrides(target: GitTarget): Promise<string[]> {
  const { stdout } = await git(target, ["config", "--name-only", "--list"], { okCodes: [1] });
  const names = new Set<string>();
  for (const line of stdout.toString("utf8").split("\n")) {
    const match = /^filter\.(.+)\.(clean|smudge|process|required)$/i.exec(line);
    if (match?.[1]) names.add(match[1]);
  }
  return [...names].flatMap((n) => [
    `filter.${n}.clean=`,
    `filter.${n}.smudge=`,
    `filter.${n}.process=`,
    `filter.${n}.required=false`,
  ]);
}
