/**
 * Whether the installed postgres.js carries mooring's fix for porsager/postgres#1223 (a closed
 * connection replays its last server error onto the next query, which then fails without being
 * sent: a 503 right after the database came back). `scripts/patch-postgres.mjs` applies it on
 * every `npm install` / `npm ci` (package.json `postinstall`); an install with `--ignore-scripts`
 * lacks it, and the gateway says so at start (docs/operations.md).
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** The comment the patch leaves in the driver's code (the same text as in the script). */
const MARKER = "mooring-patch: forget a closed connection's query and error";

/** True when the ESM build this process imports (and the CommonJS one beside it) are patched. */
export function postgresDriverPatched(): boolean {
  try {
    // "postgres" resolves, for require, to <root>/cjs/src/index.js; its package.json is not exported.
    const root = join(dirname(createRequire(import.meta.url).resolve("postgres")), "..", "..");
    const files = ["src", "cjs/src"].map((d) => join(root, d, "connection.js")).filter((f) => existsSync(f));
    return files.length > 0 && files.every((f) => readFileSync(f, "utf8").includes(MARKER));
  } catch {
    return false;
  }
}
