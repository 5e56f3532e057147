/**
 * Workspace normalization (docs/api.md, Resources and states): two spellings of one folder are one workspace, and a
 * workspace outside every configured root is refused even when it escapes through `..` or a symlink.
 *
 * Resolution is asynchronous (realpath runs off the event loop) and bounded: a path longer than
 * MAX_WORKSPACE_CHARS or with more than MAX_WORKSPACE_COMPONENTS parts is refused before any file
 * system call (a 2,000-component path took ~33 ms of event loop per request when resolved inline).
 */
import { lstat, readlink, realpath, stat } from "node:fs/promises";
import { isAbsolute, join, normalize, resolve, sep } from "node:path";
import type { Logger } from "pino";
import { AgentFailure } from "../agents/driver.js";
import { errors } from "../errors.js";

/** Linux's PATH_MAX. */
export const MAX_WORKSPACE_CHARS = 4096;
/** Far more than any real project nests; each missing one costs a realpath call. */
export const MAX_WORKSPACE_COMPONENTS = 256;

const invalidWorkspace = errors.invalidWorkspace;

/** Clean `.`, `..`, `//` and the trailing slash; resolve symlinks where the path exists. */
export async function normalizeWorkspace(input: string): Promise<string> {
  if (typeof input !== "string" || input.trim() === "") {
    throw invalidWorkspace("workspace must be a non-empty absolute path");
  }
  if (input.length > MAX_WORKSPACE_CHARS) {
    throw invalidWorkspace(`workspace must be at most ${MAX_WORKSPACE_CHARS} characters`);
  }
  if (input.includes("\0")) throw invalidWorkspace("workspace must not contain NUL bytes");
  if (!isAbsolute(input)) {
    throw invalidWorkspace(`workspace must be an absolute path, got ${JSON.stringify(input)}`);
  }
  const cleaned = stripTrailingSeparator(normalize(input));
  if (cleaned.split(sep).length - 1 > MAX_WORKSPACE_COMPONENTS) {
    throw invalidWorkspace(`workspace must have at most ${MAX_WORKSPACE_COMPONENTS} path components`);
  }
  return resolveExistingPrefix(cleaned);
}

/**
 * realpath only works on paths that exist. For a folder not created yet, resolve its deepest
 * existing ancestor so a symlinked parent still counts as the folder it points to; the rest stays
 * clean-only.
 */
async function resolveExistingPrefix(cleaned: string): Promise<string> {
  let head = cleaned;
  let tail = "";
  for (;;) {
    try {
      const real = await realpath(head);
      return stripTrailingSeparator(tail === "" ? real : `${real === sep ? "" : real}${tail}`);
    } catch {
      const cut = head.lastIndexOf(sep);
      if (cut <= 0) return cleaned;
      tail = head.slice(cut) + tail;
      head = head.slice(0, cut);
    }
  }
}

function stripTrailingSeparator(path: string): string {
  return path.length > 1 && path.endsWith(sep) ? path.slice(0, -1) : path;
}

/** Roots are normalized the same way, so a symlinked root still contains its real children. */
export function normalizeRoots(roots: string[]): Promise<string[]> {
  return Promise.all(roots.map((root) => normalizeWorkspace(root)));
}

export function isInsideRoots(workspace: string, roots: readonly string[]): boolean {
  if (roots.length === 0) return true;
  return roots.some((root) => workspace === root || workspace.startsWith(root === sep ? sep : root + sep));
}

/**
 * The kernel's pseudo-filesystems: never a workspace, whatever the roots say. `/proc/self/cwd`
 * resolves to the gateway's own folder and `/proc/self/fd/1` to its log, so both the path as sent
 * and the path it resolves to are checked.
 */
export const SYSTEM_FOLDERS: readonly string[] = ["/proc", "/sys", "/dev"];

const inSystemFolder = (...paths: string[]) => paths.some((p) => SYSTEM_FOLDERS.some((d) => isInsideRoots(p, [d])));

/** More symlinks than Linux follows (40) in one path: stop there. */
const MAX_LINK_HOPS = 40;

/**
 * Whether resolving `path` passes through a system folder on the way: a link to `/proc/self/cwd`
 * resolves to an ordinary folder (the gateway's own), so only the links followed tell. Each
 * component is looked at with lstat and every link target is checked before it is followed.
 */
async function passesSystemFolder(path: string): Promise<boolean> {
  let pending = path.split(sep).filter(Boolean);
  let done: string = sep;
  for (let hops = 0; pending.length > 0; ) {
    const next = join(done, pending[0] as string);
    if (inSystemFolder(next)) return true;
    const info = await lstat(next).catch(() => null);
    if (!info?.isSymbolicLink()) {
      if (!info) return false;
      done = next;
      pending = pending.slice(1);
      continue;
    }
    if (++hops > MAX_LINK_HOPS) return false;
    const target = resolve(done, await readlink(next));
    if (inSystemFolder(target)) return true;
    pending = [...target.split(sep).filter(Boolean), ...pending.slice(1)];
    done = sep;
  }
  return false;
}

/**
 * Normalize a client's workspace and check it against the roots. Logs when the input changed. A
 * refusal names only what the client sent, never what it resolved to (`/proc/self/cwd` would
 * otherwise tell a client the gateway's folder). A path that does not exist yet is accepted (the
 * folder may be made later; the turn fails at start while it is missing), one that exists must be
 * a folder.
 */
export async function acceptWorkspace(input: string, roots: string[], log: Logger): Promise<string> {
  const workspace = await normalizeWorkspace(input);
  if (workspace !== input) log.debug({ original: input, normalized: workspace }, "workspace path normalized");
  if (!isInsideRoots(workspace, roots)) throw workspaceNotAllowed(input);
  if (inSystemFolder(stripTrailingSeparator(normalize(input)), workspace) || (await passesSystemFolder(input))) {
    throw invalidWorkspace(`workspace ${JSON.stringify(input)} is inside ${SYSTEM_FOLDERS.join(", ")}, which are never workspaces`);
  }
  const info = await stat(workspace).catch(() => null);
  if (info && !info.isDirectory()) throw invalidWorkspace(`workspace ${JSON.stringify(input)} is not a folder`);
  return workspace;
}

/** The refusal of a workspace outside the roots (the global ones or a tenant's: one wording). */
export const workspaceNotAllowed = errors.workspaceNotAllowed;

/**
 * The folder an agent may run in now: the stored workspace resolved again (it may have been
 * replaced by a symlink, or created as one, since the session was made) and checked against the
 * global roots and the session's tenant's roots (either empty: no bound of that kind). Called at
 * every turn and right before every spawn; the agent runs in the path returned. A turn fails with
 * WORKSPACE_NOT_ALLOWED when it now resolves outside the roots or into a system folder, and with
 * AGENT_START_FAILED when it is not an existing folder. Messages name the stored path only.
 */
export async function resolveWorkspaceForSpawn(
  stored: string,
  roots: readonly string[],
  tenantRoots: readonly string[] = [],
): Promise<string> {
  let real: string;
  try {
    real = await realpath(stored);
  } catch {
    throw new AgentFailure("AGENT_START_FAILED", `The workspace ${stored} does not exist.`, "workspace_missing");
  }
  const system = inSystemFolder(stored, real) || (await passesSystemFolder(stored));
  if (!isInsideRoots(real, roots) || !isInsideRoots(real, tenantRoots) || system) {
    throw new AgentFailure(
      "WORKSPACE_NOT_ALLOWED",
      `The workspace ${stored} now resolves outside the allowed roots; the agent was not started there.`,
    );
  }
  const info = await stat(real).catch(() => null);
  if (!info?.isDirectory()) {
    throw new AgentFailure("AGENT_START_FAILED", `The workspace ${stored} is not a folder.`, "workspace_missing");
  }
  return real;
}
