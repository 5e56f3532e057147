/**
 * The production build (`tsc -p tsconfig.build.json`, what `npm run start:dist` runs), compiled into
 * a temp folder laid out like the repo (dist/, package.json, migrations/, node_modules/) so the
 * checkout's own dist/ is left alone. Built once per bench run.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "./gateway.js";

let built: Promise<string> | null = null;
const folders: string[] = [];

/** The folder to run `node dist/main.js` in. */
export function productionBuild(): Promise<string> {
  built ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "mooring-bench-dist-"));
    folders.push(dir);
    const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");
    const output = await new Promise<string>((resolve) => {
      execFile(
        process.execPath,
        [tsc, "-p", "tsconfig.build.json", "--outDir", join(dir, "dist")],
        { cwd: repoRoot },
        (_err, stdout, stderr) => resolve(stdout + stderr),
      );
    });
    // tsc emits even with type errors (e.g. a file someone is editing); only a missing entry point is fatal.
    if (!existsSync(join(dir, "dist", "main.js"))) throw new Error(`production build failed:\n${output}`);
    for (const name of ["package.json", "migrations", "node_modules"])
      await symlink(join(repoRoot, name), join(dir, name));
    return dir;
  })();
  return built;
}

export async function removeBuilds(): Promise<void> {
  for (const dir of folders.splice(0)) await rm(dir, { recursive: true, force: true });
  built = null;
}
