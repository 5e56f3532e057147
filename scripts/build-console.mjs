/**
 * The operator console's browser bundle (docs/console.md): console/ (Preact + JSX) and the client
 * SDK it is built on (src/client/), bundled by esbuild into dist/console/ with content-hashed file
 * names, each also written gzip- and brotli-compressed for @fastify/static's `preCompressed`.
 *
 * Rebuilt only when its inputs changed: a SHA-256 over every file under console/ and src/client/,
 * this script and preact's version, compared with the stamp the last build left. Called by
 * scripts/start.mjs (so `npm start` builds it next to the server code) and by the gateway itself
 * at start (transport/http/console.ts), so `mooring serve` and a test's gateway serve a current
 * console too. Without esbuild (an install with --omit=dev) or without the sources (the Docker
 * image, which builds it in its build stage) the bundle already in dist/console/ is served as is.
 *
 * Safe to run from several processes at once (parallel test workers): every file is written to a
 * temporary name and renamed into place, the outputs of one input hash are identical, and the
 * stamp is written last.
 *
 * Plain JavaScript so it runs without a compiler. `node scripts/build-console.mjs [root]` builds.
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const STAMP = ".console-build.json";

async function filesUnder(dir) {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath ?? e.path, e.name))
    .sort();
}

async function fingerprint(root) {
  const own = await filesUnder(join(root, "console"));
  const inputs = [...own, ...(await filesUnder(join(root, "src", "client")))];
  const hash = createHash("sha256");
  for (const file of inputs) {
    const content = await readFile(file);
    hash.update(`${relative(root, file).split(sep).join("/")}\0${content.length}\0`).update(content);
  }
  hash.update(await readFile(fileURLToPath(import.meta.url)));
  hash.update(await readFile(join(root, "node_modules", "preact", "package.json")).catch(() => Buffer.alloc(0)));
  return { hash: hash.digest("hex"), count: own.length };
}

async function readStamp(outDir) {
  try {
    return JSON.parse(await readFile(join(outDir, STAMP), "utf8"));
  } catch {
    return null;
  }
}

/** Write through a temporary file and a rename: a reader never sees half a file. */
async function writeAtomic(path, content) {
  const tmp = `${path}.${randomUUID().slice(0, 8)}.tmp`;
  await writeFile(tmp, content);
  await rename(tmp, path);
}

/**
 * The page: the hashed script and stylesheet, nothing inline (the Content-Security-Policy allows
 * only 'self' for scripts and styles).
 */
function indexHtml(script, style) {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mooring console</title>
<link rel="icon" href="data:,">
${style ? `<link rel="stylesheet" href="${style}">\n` : ""}<script type="module" src="${script}"></script>
</head>
<body>
<div id="app"><noscript>The mooring console needs JavaScript.</noscript></div>
</body>
</html>
`;
}

/**
 * Build `root`/console into `root`/dist/console when its inputs changed. Resolves
 * `{ built: true|false, dir }`, or `{ built: null, dir }` when it cannot build (no console sources
 * or no esbuild); then whatever dist/console holds is what there is.
 */
export async function ensureConsoleBuilt(root) {
  const outDir = join(root, "dist", "console");
  const entry = join(root, "console", "main.tsx");
  const { hash, count } = await fingerprint(root);
  if (count === 0) return { built: null, dir: outDir };
  const stamp = await readStamp(outDir);
  if (stamp?.hash === hash) return { built: false, dir: outDir };
  let esbuild;
  try {
    esbuild = await import("esbuild");
  } catch {
    return { built: null, dir: outDir };
  }
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [entry],
    bundle: true,
    write: false,
    outdir: outDir,
    entryNames: "[name]-[hash]",
    assetNames: "[name]-[hash]",
    format: "esm",
    platform: "browser",
    target: ["es2022", "chrome110", "firefox110", "safari16"],
    jsx: "automatic",
    jsxImportSource: "preact",
    minify: true,
    sourcemap: false,
    legalComments: "none",
    metafile: true,
    logLevel: "error",
  });
  await mkdir(outDir, { recursive: true });
  const outputs = [];
  let script = "";
  let style = "";
  for (const file of result.outputFiles) {
    const name = relative(outDir, file.path).split(sep).join("/");
    if (name.endsWith(".js")) script = name;
    if (name.endsWith(".css")) style = name;
    outputs.push(name);
  }
  const html = Buffer.from(indexHtml(script, style));
  const files = [...result.outputFiles.map((f) => [relative(outDir, f.path), Buffer.from(f.contents)]), ["index.html", html]];
  for (const [name, content] of files) {
    await writeAtomic(join(outDir, name), content);
    await writeAtomic(join(outDir, `${name}.gz`), gzipSync(content, { level: 9 }));
    await writeAtomic(
      join(outDir, `${name}.br`),
      brotliCompressSync(content, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
    );
  }
  // Assets of an earlier build are removed; index.html now points at the new ones.
  const kept = new Set(["index.html", ...outputs]);
  await Promise.all(
    (stamp?.outputs ?? [])
      .filter((o) => !kept.has(o))
      .flatMap((o) => [o, `${o}.gz`, `${o}.br`])
      .map((o) => rm(join(outDir, o), { force: true })),
  );
  await writeAtomic(join(outDir, STAMP), JSON.stringify({ hash, outputs }));
  return { built: true, dir: outDir };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = process.argv[2] ?? dirname(dirname(fileURLToPath(import.meta.url)));
  const { built } = await ensureConsoleBuilt(root);
  if (built === null) {
    process.stderr.write("mooring: cannot build the console (no console/ sources or no esbuild)\n");
    process.exit(1);
  }
  process.stderr.write(built ? "mooring: built the console into dist/console/\n" : "mooring: console up to date\n");
}
