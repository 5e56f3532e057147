/**
 * The folder holding package.json and migrations/, found from this module's own location: the
 * same answer whether the code runs as sources (src/), as compiled files (dist/…) or from the
 * one-file bundle `npm start` runs (dist/main.bundle.js), which sit at different depths.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "migrations"))) return dir;
    if (dirname(dir) === dir) throw new Error(`mooring: no package root (package.json and migrations/) above ${from}`);
  }
}

export const packageRoot: string = findPackageRoot(dirname(fileURLToPath(import.meta.url)));
