/**
 * Whether the installed postgres.js carries mooring's fix for porsager/postgres#1223 (a closed
 * connection replays its last server error onto the next query, which then fails without being
 * sent: a 503 right after the database came back). `scripts/patch-postgres.mjs` applies it on
 * every `npm install` / `npm ci` (package.json `postinstall`); an install with `--ignore-scripts`
 * lacks it, and the gateway says so at start (docs/operations.md).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** The comment the patch leaves in the driver's code (the same text as in the script). */
const MARKER = "mooring-patch: forget a closed connection's query and error";

/** True when the build this process imports (ESM, `<root>/src`) is patched; the others are not loaded. */
export function postgresDriverPatched(): boolean {
  try {
    // "postgres" resolves, for require, to <root>/cjs/src/index.js; its package.json is not exported.
    const root = join(dirname(createRequire(import.meta.url).resolve("postgres")), "..", "..");
    return readFileSync(join(root, "src", "connection.js"), "utf8").includes(MARKER);
  } catch {
    return false;
  }
}
