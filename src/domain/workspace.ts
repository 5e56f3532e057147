/**
 * Workspace normalization (SPEC section 2): two spellings of one folder are one workspace, and a
 * workspace outside every configured root is refused even when it escapes through `..` or a symlink.
 */
import { realpathSync } from "node:fs";
import { isAbsolute, normalize, sep } from "node:path";
import type { Logger } from "pino";
import { MooringError } from "../errors.js";

/** Clean `.`, `..`, `//` and the trailing slash; resolve symlinks where the path exists. */
export function normalizeWorkspace(input: string): string {
  if (typeof input !== "string" || input.trim() === "") {
    throw new MooringError("INVALID_WORKSPACE", "workspace must be a non-empty absolute path", {
      details: { field: "workspace" },
    });
  }
  if (input.includes("\0")) {
    throw new MooringError("INVALID_WORKSPACE", "workspace must not contain NUL bytes", {
      details: { field: "workspace" },
    });
  }
  if (!isAbsolute(input)) {
    throw new MooringError("INVALID_WORKSPACE", `workspace must be an absolute path, got ${JSON.stringify(input)}`, {
      details: { field: "workspace" },
    });
  }
  const cleaned = stripTrailingSeparator(normalize(input));
  return resolveExistingPrefix(cleaned);
}

/**
 * realpath only works on paths that exist. For a folder not created yet, resolve its deepest
 * existing ancestor so a symlinked parent still counts as the folder it points to; the rest stays
 * clean-only.
 */
function resolveExistingPrefix(cleaned: string): string {
  let head = cleaned;
  let tail = "";
  for (;;) {
    try {
      const real = realpathSync.native(head);
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
export function normalizeRoots(roots: string[]): string[] {
  return roots.map((root) => normalizeWorkspace(root));
}

export function isInsideRoots(workspace: string, roots: string[]): boolean {
  if (roots.length === 0) return true;
  return roots.some((root) => workspace === root || workspace.startsWith(root === sep ? sep : root + sep));
}

/** Normalize a client's workspace and check it against the roots. Logs when the input changed. */
export function acceptWorkspace(input: string, roots: string[], log: Logger): string {
  const workspace = normalizeWorkspace(input);
  if (workspace !== input) log.debug({ original: input, normalized: workspace }, "workspace path normalized");
  if (!isInsideRoots(workspace, roots)) {
    throw new MooringError("WORKSPACE_NOT_ALLOWED", `workspace ${workspace} is outside the allowed roots`, {
      details: { field: "workspace" },
    });
  }
  return workspace;
}
