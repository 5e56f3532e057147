#!/usr/bin/env node
// The `mooring` command (docs/cli.md), runnable from a clone right after `npm ci`, no build step.
//
// The CLI's TypeScript (src/cli, src/client) is bundled by esbuild (tsx's own dependency) into
// .cache/mooring-cli/, keyed by the sources' paths, sizes and mtimes, and that plain JavaScript is
// imported. Why not tsx's loader: its hooks run on a loader thread that makes every exit take
// 40–250 ms, and the CLI must exit within 100 ms of the terminal event. The bundle sits in the
// repository so its bare imports (commander, ws) resolve from the clone's node_modules.
//
// `mooring serve` is the gateway itself, long-running: it goes through tsx as `npm start` does.
import { createHash } from "node:crypto";
import * as nodeModule from "node:module";
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { setFlagsFromString } from "node:v8";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

// Node 22's compile cache (absent on Node 20: nothing happens): the CLI bundle and the modules it
// loads are compiled from V8's cache instead of from source on every start after the first.
try {
  nodeModule.enableCompileCache?.(join(root, ".cache", "node-compile-cache"));
} catch {}

async function viaTsx(entry) {
  const { register } = await import("tsx/esm/api");
  register();
  return import(pathToFileURL(join(root, entry)).href);
}

async function bundledCli() {
  const dirs = ["src/cli", "src/client", "src/acp-server"];
  const hash = createHash("sha256");
  for (const dir of dirs) {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const s = statSync(join(root, dir, name));
      hash.update(`${dir}/${name}:${s.size}:${s.mtimeMs}\n`);
    }
  }
  const cacheDir = join(root, ".cache", "mooring-cli");
  const out = join(cacheDir, `cli-${hash.digest("hex").slice(0, 16)}.mjs`);
  if (!existsSync(out)) {
    const { build } = await import("esbuild");
    mkdirSync(cacheDir, { recursive: true });
    const tmp = `${out}.${process.pid}.tmp`;
    await build({
      entryPoints: [join(root, "src/cli/main.ts")],
      outfile: tmp,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      // serve is handled above, through tsx; the gateway is never part of the CLI bundle.
      external: ["../main.js"],
      logLevel: "error",
    });
    renameSync(tmp, out); // atomic: a CLI started meanwhile never imports half a file
  }
  return import(pathToFileURL(out).href);
}

if (process.argv[2] === "serve" && process.argv.length === 3) {
  await viaTsx("src/main.ts");
} else {
  // fetch's HTTP parser is WebAssembly; V8 joins its background optimizing compiles at exit, which
  // made every exit take 150–250 ms after the first request. Baseline-compiled Wasm is plenty for
  // a CLI and exits in ~10 ms. Set before anything loads undici.
  setFlagsFromString("--liftoff-only");
  let cli;
  try {
    cli = await bundledCli();
  } catch {
    cli = await viaTsx("src/cli/main.ts"); // no esbuild, or a read-only clone: slower exits, same CLI
  }
  await cli.main();
}
