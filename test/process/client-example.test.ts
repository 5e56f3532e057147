/**
 * The SDK as a newcomer meets it: the example that opens docs/client.md,
 * compiled under `tsc --strict` in a project of its own that installs mooring from this clone,
 * against the declarations `npm start`'s build ships (scripts/start.mjs), with no cast: the
 * events' `data` is typed by their `type`. Then run against a real gateway.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { repoRoot } from "../support/gateway.js";
import { useGateway } from "../support/use-gateway.js";

const run = promisify(execFile);
let project: string;
const t = useGateway();

/** The first TypeScript block of docs/client.md. */
function docsExample(): string {
  const doc = readFileSync(join(repoRoot, "docs", "client.md"), "utf8");
  const block = /```ts\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error("docs/client.md has no ts block");
  return block;
}

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), "mooring-sdk-user-"));
  await mkdir(join(project, "node_modules"), { recursive: true });
  await symlink(repoRoot, join(project, "node_modules", "mooring"), "dir");
  await writeFile(join(project, "package.json"), JSON.stringify({ type: "module", private: true }));
  await writeFile(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        noEmit: true,
        skipLibCheck: true,
        types: ["node"],
        typeRoots: [join(repoRoot, "node_modules", "@types")],
      },
      include: ["turn.ts"],
    }),
  );
}, 120_000);

afterAll(async () => {
  if (project) await rm(project, { recursive: true, force: true });
});

it("npm start's build ships the client's declarations", async () => {
  await run(process.execPath, ["scripts/start.mjs", "--build-only"], { cwd: repoRoot });
  const declarations = join(repoRoot, "dist", "client", "index.d.ts");
  expect(existsSync(declarations)).toBe(true);
  expect(readFileSync(declarations, "utf8")).toContain("MooringClient");
}, 120_000);

it("the docs' example compiles under tsc --strict with no cast, and runs", async () => {
  const example = docsExample();
  expect(example).not.toMatch(/\bas\s+(?!const\b)\w/); // no `x as T`
  expect(example).not.toContain("<any>");
  await writeFile(join(project, "turn.ts"), example);
  const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");
  const compiled = await run(process.execPath, [tsc, "-p", project]).then(
    () => "",
    (err: { stdout: string }) => err.stdout,
  );
  expect(compiled).toBe("");

  // Typed `data` is no stub: the same program, pointed at a test gateway, streams a turn.
  await writeFile(join(project, "turn.ts"), example.replace("http://127.0.0.1:8787", t.url));
  const { stdout } = await run(process.execPath, ["--import", "tsx", join(project, "turn.ts")], {
    cwd: repoRoot,
    env: { ...process.env },
  });
  expect(stdout.trim().split("\n").at(-1)).toBe("completed");
}, 120_000);
