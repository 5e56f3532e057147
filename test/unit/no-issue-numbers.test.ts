/**
 * Comments say what was found, not an issue number: a clone holds no issue tracker, so "(issue 13)"
 * explains nothing to the one reading it. Checked over the code a newcomer reads.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const repoRoot = join(import.meta.dirname, "..", "..");
const roots = ["src", "console", "bench", "scripts", "bin"];
/** The fast project's test folders (vitest.config.ts), whose headers say what each test guards. */
const testRoots = [
  "sql",
  "changes",
  "api",
  "client",
  "stream",
  "unit",
  "db",
  "tracing",
  "agents/mooring",
].map((folder) => join("test", folder));
/** This file names the pattern it looks for. */
const self = relative(repoRoot, import.meta.filename);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "results" ? [] : files(path);
    return /\.(ts|tsx|mjs|js)$/.test(name) ? [path] : [];
  });
}

describe("comments", () => {
  it("name no issue numbers", () => {
    const found = [...roots, ...testRoots]
      .flatMap((root) => files(join(repoRoot, root)))
      .filter((path) => relative(repoRoot, path) !== self)
      .flatMap((path) =>
        readFileSync(path, "utf8")
          .split("\n")
          .flatMap((line, i) =>
            /\bissue #?\d+/i.test(line) ? [`${relative(repoRoot, path)}:${i + 1}`] : [],
          ),
      );
    expect(found).toEqual([]);
  });
});
