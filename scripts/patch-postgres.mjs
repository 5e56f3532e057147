#!/usr/bin/env node
/**
 * Patches postgres.js 3.4.9 after every install (package.json `postinstall`), until upstream fixes
 * porsager/postgres#1223 (open; the code is unchanged on its master).
 *
 * The bug: when a connection closes while a query is in flight (the database stops, or a backend
 * is terminated), the connection keeps that query and the server's last error (`57P01 terminating
 * connection due to administrator command`) in its state. The next query to reconnect it is then
 * rejected with that old error at the new connection's first ReadyForQuery, without ever being
 * sent. Seen in mooring as a 503 NOT_READY right after the database came back and `/readyz` said
 * ready (test/process/database-loss.test.ts, test/db/db-reconnect.test.ts).
 *
 * The fix: forget the in-flight query and the error when the socket closes; the query itself was
 * already rejected (CONNECTION_CLOSED) just before. A connection lost during its own startup (its
 * `fetch_types` query, porsager/postgres#1192) is left as it was: the entry point's handling of
 * that rejection (main.ts, `isDroppedTypeFetch`) stays in charge of it, test/process/db-type-fetch.test.ts.
 *
 * Idempotent; fails loudly when the code it patches is not there (another postgres.js version),
 * so an upgrade is noticed instead of silently losing the fix.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const MARKER = "mooring-patch: forget a closed connection's query and error";

const before = `    if (initial)
      return reconnect()

    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))
`;
const after = `    if (initial)
      return reconnect()

    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))
    query = errorResponse = null // ${MARKER} (porsager/postgres#1223)
`;

/** The connection.js files of the installed postgres.js (ESM, CommonJS and Cloudflare builds). */
function driverFiles() {
  let root;
  try {
    // "postgres" resolves (for require) to <root>/cjs/src/index.js; its package.json is not exported.
    root = join(dirname(createRequire(join(process.cwd(), "package.json")).resolve("postgres")), "..", "..");
  } catch {
    return [];
  }
  return ["src", "cjs/src", "cf/src"].map((d) => join(root, d, "connection.js")).filter((f) => existsSync(f));
}

function patch(file) {
  const text = readFileSync(file, "utf8");
  if (text.includes(MARKER)) return "already patched";
  if (!text.includes(before)) {
    throw new Error(
      `${file}: the code this patch fixes is not there (postgres.js upgraded?). Check whether porsager/postgres#1223 is fixed in that version and update or remove scripts/patch-postgres.mjs.`,
    );
  }
  writeFileSync(file, text.replace(before, after));
  return "patched";
}

const files = driverFiles();
if (files.length === 0) console.log("patch-postgres: postgres.js is not installed here; nothing to patch");
try {
  for (const file of files) console.log(`patch-postgres: ${patch(file)} ${file}`);
} catch (err) {
  console.error(`patch-postgres: ${err.message}`);
  process.exit(1);
}
