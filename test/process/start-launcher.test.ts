/**
 * The `npm start` launcher (scripts/start.mjs): it compiles src/ to dist/ when the
 * sources changed, and not when they did not (a touch that changes nothing included), removes the
 * output of a deleted source, and runs the compiled entry (bundled into one file, compiled with
 * V8's code cache when a valid one is there). Run against a small tree of its own.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { repoRoot } from "../support/gateway.js";

const run = promisify(execFile);
const launcher = join(repoRoot, "scripts", "start.mjs");
let root: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "mooring-start-"));
  await mkdir(join(root, "src", "lib"), { recursive: true });
  await writeFile(
    join(root, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext" } }),
  );
  await writeFile(
    join(root, "src", "main.ts"),
    'import { greeting } from "./lib/greet.js";\nconst n: number = 1;\nconsole.log(greeting(n));\n',
  );
  await writeFile(
    join(root, "src", "lib", "greet.ts"),
    'export const greeting = (n: number): string => "hello " + n;\n',
  );
  await writeFile(join(root, "src", "lib", "gone.ts"), "export const gone = true;\n");
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Run the launcher on the temp tree: what it printed, and whether it compiled. */
async function start(...args: string[]): Promise<{ stdout: string; compiled: boolean }> {
  const { stdout, stderr } = await run(process.execPath, [launcher, "--root", root, ...args]);
  return { stdout, compiled: stderr.includes("compiled src/ to dist/") };
}

const builtAt = async () => (await stat(join(root, "dist", "main.js"))).mtimeMs;

it("compiles on the first start and runs the compiled entry", async () => {
  const first = await start();
  expect(first.compiled).toBe(true);
  expect(first.stdout).toBe("hello 1\n");
  expect(await readFile(join(root, "dist", "lib", "greet.js"), "utf8")).not.toContain(": number");
  // What runs is one file: the entry with its imports inlined.
  const bundle = await readFile(join(root, "dist", "main.bundle.cjs"), "utf8");
  expect(bundle).toContain('"hello "');
  expect(bundle).not.toContain("./lib/greet.js");
});

it("does not compile again while the sources are unchanged, even when touched", async () => {
  const before = await builtAt();
  const again = await start();
  expect(again.compiled).toBe(false);
  expect(again.stdout).toBe("hello 1\n");
  const later = new Date(Date.now() + 60_000);
  await utimes(join(root, "src", "lib", "greet.ts"), later, later);
  expect((await start("--build-only")).compiled).toBe(false);
  expect(await builtAt()).toBe(before);
});

it("compiles again after a source changed, and runs the new code", async () => {
  await writeFile(
    join(root, "src", "lib", "greet.ts"),
    'export const greeting = (n: number): string => "hello " + (n + 1);\n',
  );
  const changed = await start();
  expect(changed.compiled).toBe(true);
  expect(changed.stdout).toBe("hello 2\n");
  expect((await start()).compiled).toBe(false);
});

it("removes the output of a deleted source", async () => {
  await expect(stat(join(root, "dist", "lib", "gone.js"))).resolves.toBeTruthy();
  await rm(join(root, "src", "lib", "gone.ts"));
  expect((await start("--build-only")).compiled).toBe(true);
  await expect(stat(join(root, "dist", "lib", "gone.js"))).rejects.toThrow(/ENOENT/);
  await expect(stat(join(root, "dist", "lib", "greet.js"))).resolves.toBeTruthy();
});

it("runs the bundle all the same when V8 rejects its code cache, and a build deletes the cache", async () => {
  // What a cache from another Node or V8 version amounts to: data V8 refuses (it then compiles).
  const cache = join(root, "dist", "main.bundle.cjs.v8cache");
  await writeFile(cache, "not a code cache");
  const run = await start();
  expect(run.compiled).toBe(false);
  expect(run.stdout).toBe("hello 2\n");
  await writeFile(
    join(root, "src", "lib", "greet.ts"),
    'export const greeting = (n: number): string => "hi " + n;\n',
  );
  expect((await start("--build-only")).compiled).toBe(true);
  await expect(stat(cache)).rejects.toThrow(/ENOENT/);
  expect((await start()).stdout).toBe("hi 1\n");
});
