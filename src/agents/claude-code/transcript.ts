/**
 * Finding a Claude Code transcript on disk: the only way to learn, after a restart, whether a
 * conversation we started was ever saved (docs/api.md, Restarts, resume and recovery). Claude Code stores each conversation at
 * `<config dir>/projects/<cwd with non-alphanumerics as "-">/<id>.jsonl`, and its `--resume` looks
 * in every project folder, so a moved workspace still resumes: the scan must search them all too.
 */
import { readdir, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

export type TranscriptLookup =
  | { state: "found"; path: string; bytes: number }
  | { state: "absent" }
  /** The check could not prove anything; callers resume as if the transcript existed. */
  | { state: "unknown"; reason: string };

export interface LookupLimits {
  maxFolders: number;
  timeoutMs: number;
}

export const defaultLookupLimits: LookupLimits = { maxFolders: 10_000, timeoutMs: 10_000 };

/** The config dir the agent process will use: its own env first, as Claude Code reads it. */
export function claudeConfigDir(env: Record<string, string | undefined>): string {
  const configured = env.CLAUDE_CONFIG_DIR;
  return configured && configured !== "" ? configured : join(homedir(), ".claude");
}

export function projectFolderName(cwd: string): string {
  return cwd.replace(/[^A-Za-z0-9]/g, "-");
}

export function expectedTranscriptPath(configDir: string, cwd: string, agentSessionId: string): string {
  return join(configDir, "projects", projectFolderName(cwd), `${agentSessionId}.jsonl`);
}

class Unknown extends Error {}

const missing = (err: unknown) => {
  const code = (err as NodeJS.ErrnoException).code;
  return code === "ENOENT" || code === "ENOTDIR";
};

/** Stat a candidate: its size when present, null when proven missing, Unknown otherwise. */
async function sizeOf(path: string): Promise<number | null> {
  try {
    const info = await stat(path);
    return info.isFile() ? info.size : null;
  } catch (err) {
    if (missing(err)) return null;
    throw new Unknown(`cannot check ${path}: ${(err as Error).message}`);
  }
}

async function scan(
  configDir: string,
  cwd: string,
  id: string,
  limits: LookupLimits,
  stopped: () => boolean,
) {
  const expected = expectedTranscriptPath(configDir, cwd, id);
  const expectedSize = await sizeOf(expected);
  if (expectedSize !== null) return { state: "found", path: expected, bytes: expectedSize } as const;

  const projects = join(configDir, "projects");
  let entries: import("node:fs").Dirent[];
  try {
    entries = await readdir(projects, { withFileTypes: true });
  } catch (err) {
    if (missing(err)) return { state: "absent" } as const;
    throw new Unknown(`cannot list ${projects}: ${(err as Error).message}`);
  }
  const folders = entries.filter((e) => e.isDirectory() || e.isSymbolicLink()).map((e) => e.name);
  if (folders.length > limits.maxFolders) {
    throw new Unknown(`${folders.length} project folders exceed the limit of ${limits.maxFolders}`);
  }
  const batch = 64;
  for (let i = 0; i < folders.length; i += batch) {
    if (stopped()) throw new Unknown("timed out");
    const paths = folders.slice(i, i + batch).map((f) => join(projects, f, `${id}.jsonl`));
    const sizes = await Promise.all(paths.map(sizeOf));
    const hit = sizes.findIndex((s) => s !== null);
    if (hit >= 0) return { state: "found", path: paths[hit], bytes: sizes[hit] as number } as const;
  }
  return { state: "absent" } as const;
}

/**
 * Look for the transcript of `agentSessionId`, trying the folder of `cwd` first and then every
 * project folder. Never throws: anything that is not a clean "found" or "absent" is "unknown".
 */
export async function findTranscript(
  configDir: string,
  cwd: string,
  agentSessionId: string,
  limits: LookupLimits = defaultLookupLimits,
): Promise<TranscriptLookup> {
  // The id becomes a file name; anything that could climb out of the folder proves nothing.
  if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(agentSessionId)) {
    return { state: "unknown", reason: "session id is not a plain file name" };
  }
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<TranscriptLookup>((resolve) => {
    timer = setTimeout(() => {
      timedOut = true;
      resolve({ state: "unknown", reason: `no answer within ${limits.timeoutMs} ms` });
    }, limits.timeoutMs);
  });
  const lookup = scan(configDir, cwd, agentSessionId, limits, () => timedOut).catch(
    (err): TranscriptLookup => ({
      state: "unknown",
      reason: err instanceof Unknown ? err.message : `lookup failed: ${(err as Error).message}`,
    }),
  );
  try {
    return await Promise.race([lookup, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
