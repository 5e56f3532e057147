/**
 * The embedded Postgres's cluster template (src/db/cluster-template.ts): the first new cluster is
 * initdb's and is kept as the template; the next new data folder is a copy of it, a working
 * cluster of its own, and running it never changes the template. A template folder that cannot be
 * written costs the speed-up only.
 */
import { createHash } from "node:crypto";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import postgres from "postgres";
import { afterAll, expect, it } from "vitest";
import { templatePath } from "../../src/db/cluster-template.js";
import { type EmbeddedDatabase, startEmbeddedPostgres } from "../../src/db/embedded.js";
import { tempDir } from "../support/lifecycle.js";

/** Every line the embedded Postgres logged (JSON), for what it says it did. */
function recordingLog() {
  const lines: { msg: string; template?: string }[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, said: (text: string) => lines.some((l) => l.msg.includes(text)) };
}

const running: EmbeddedDatabase[] = [];
afterAll(async () => {
  await Promise.all(running.map((db) => db.stop()));
});

async function start(dataDir: string, templateDir: string) {
  const { log, said } = recordingLog();
  const db = await startEmbeddedPostgres(dataDir, log, { templateDir });
  running.push(db);
  return { db, said };
}

/** Names and contents of every file under `dir`, hashed: equal before and after means untouched. */
async function fingerprint(dir: string): Promise<string> {
  const hash = createHash("sha256");
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile()).map((e) => join(e.parentPath ?? e.path, e.name));
  for (const file of files.sort()) hash.update(file).update(await readFile(file));
  return hash.digest("hex");
}

it("keeps the first new cluster as the template and copies it into the next data folder", async () => {
  const templateDir = await tempDir("mooring-template-");
  const first = await start(await tempDir("mooring-tpl-a-"), templateDir);
  expect(first.said("initialising embedded postgres")).toBe(true);
  expect(first.said("kept the new cluster as the template")).toBe(true);
  const [template] = await readdir(templateDir);
  expect(template).toMatch(/^pg-cluster-[0-9a-f]{16}$/);
  const before = await fingerprint(join(templateDir, template));

  const second = await start(await tempDir("mooring-tpl-b-"), templateDir);
  expect(second.said("new cluster copied from the template")).toBe(true);
  expect(second.said("initialising embedded postgres")).toBe(false);

  // Two clusters of their own: what one holds, the other does not.
  const a = postgres(first.db.url, { max: 1, onnotice: () => {} });
  const b = postgres(second.db.url, { max: 1, onnotice: () => {} });
  try {
    await a`create table only_in_a (x int)`;
    await b`create table only_in_b (x int)`;
    const tables = async (sql: postgres.Sql) =>
      (await sql<{ name: string }[]>`select tablename as name from pg_tables where tablename like 'only_in_%'`).map(
        (r) => r.name,
      );
    expect(await tables(a)).toEqual(["only_in_a"]);
    expect(await tables(b)).toEqual(["only_in_b"]);
  } finally {
    await a.end();
    await b.end();
  }
  // Running a copy never writes to the template.
  expect(await fingerprint(join(templateDir, template))).toBe(before);
}, 120_000);

it("starts with initdb when the template folder cannot be made, and says why", async () => {
  const blocker = join(await tempDir("mooring-template-blocked-"), "a-file");
  await writeFile(blocker, "not a folder");
  const { db, said } = await start(await tempDir("mooring-tpl-c-"), join(blocker, "templates"));
  expect(said("initialising embedded postgres")).toBe(true);
  expect(said("could not keep a cluster template")).toBe(true);
  const sql = postgres(db.url, { max: 1, onnotice: () => {} });
  try {
    expect(await sql`select 1 as one`).toEqual([{ one: 1 }]);
  } finally {
    await sql.end();
  }
}, 120_000);

it("keys the template on initdb's options, the locale and the owner", () => {
  const initdb = process.execPath; // any existing file stands in for the binary
  const base = templatePath("/cache", initdb, ["--auth=password"], 0);
  expect(templatePath("/cache", initdb, ["--auth=password"], 0)).toBe(base);
  expect(templatePath("/cache", initdb, ["--auth=trust"], 0)).not.toBe(base);
  expect(templatePath("/cache", initdb, ["--auth=password"], 1000)).not.toBe(base);
  const lang = process.env.LANG;
  try {
    process.env.LANG = lang === "C.UTF-8" ? "en_US.UTF-8" : "C.UTF-8";
    expect(templatePath("/cache", initdb, ["--auth=password"], 0)).not.toBe(base);
  } finally {
    if (lang === undefined) delete process.env.LANG;
    else process.env.LANG = lang;
  }
});
