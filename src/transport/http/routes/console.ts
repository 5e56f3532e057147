/**
 * The operator console (docs/console.md): `/` redirects to `/console/`, which serves the browser
 * bundle from dist/console/ through @fastify/static. Hashed assets are cached for a year
 * (immutable), index.html is revalidated every time (no-cache), and every file is sent
 * pre-compressed (br or gzip) when the browser accepts it.
 *
 * The bundle is checked shortly after start (or at the first console request, if sooner) and
 * rebuilt when its sources changed (scripts/build-console.mjs); console requests wait for that
 * check, startup does not. The pages carry no data and need no token: the API calls they make do.
 */
import { mkdirSync } from "node:fs";
import { access } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { importModule } from "../../../lib/import-module.js";
import { packageRoot } from "../../../package-root.js";

/** What the page needs and nothing more: its own scripts, styles and API (fetch, WebSocket, SSE). */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Paths the console serves without a token (pages and assets only; they hold no data). */
export function isConsolePath(path: string): boolean {
  return path === "/" || path === "/console" || path.startsWith("/console/");
}

const bundleDir = join(packageRoot, "dist", "console");

/** Build the bundle if its sources changed; whatever happens, say where it is and whether it is there. */
async function checkConsoleBuild(log: Logger): Promise<boolean> {
  try {
    // A computed URL: the script is plain JavaScript next to the sources, absent from the Docker image.
    const script = pathToFileURL(join(packageRoot, "scripts", "build-console.mjs")).href;
    const { ensureConsoleBuilt } = await importModule<{
      ensureConsoleBuilt(root: string): Promise<{ built: boolean }>;
    }>(script);
    const t0 = Date.now();
    const { built } = await ensureConsoleBuilt(packageRoot);
    if (built) log.info({ ms: Date.now() - t0 }, "console: sources changed; rebuilt the bundle");
  } catch (err) {
    if ((err as NodeJS.ErrnoException)?.code !== "ERR_MODULE_NOT_FOUND") {
      log.warn({ err: String(err) }, "console: could not build the bundle; serving what dist/console holds");
    }
  }
  const present = await access(join(bundleDir, "index.html")).then(
    () => true,
    () => false,
  );
  if (!present) log.warn("console: no bundle in dist/console (run `node scripts/build-console.mjs`)");
  return present;
}

/**
 * After this long the check starts anyway (unless a console request started it sooner): not on
 * the start's path to ready, where its hashing and imports competed with the gateway's own steps.
 */
const CHECK_AFTER_START_MS = 2000;

export async function registerConsoleRoutes(app: FastifyInstance, log: Logger): Promise<void> {
  let checked: Promise<boolean> | undefined;
  const built = () => (checked ??= checkConsoleBuild(log));
  const timer = setTimeout(built, CHECK_AFTER_START_MS).unref();
  app.addHook("onClose", async () => clearTimeout(timer));
  // @fastify/static checks its root when registered; the build fills it in.
  mkdirSync(bundleDir, { recursive: true });
  app.get("/", { schema: { hide: true } }, (_req, reply) => reply.redirect("/console/", 302));
  app.get("/console", { schema: { hide: true } }, (_req, reply) => reply.redirect("/console/", 301));
  await app.register(async (scope) => {
    scope.addHook("onRequest", async (_req, reply) => {
      if (!(await built())) {
        return reply
          .status(503)
          .header("content-type", "text/plain; charset=utf-8")
          .send("The console is not built: run `node scripts/build-console.mjs` (or `npm start`).\n");
      }
    });
    await scope.register(fastifyStatic, {
      root: bundleDir,
      prefix: "/console/",
      preCompressed: true,
      cacheControl: false,
      etag: true,
      lastModified: false,
      // The build's stamp and the compressed twins are served only through the files they belong to.
      allowedPath: (path) => !path.includes("/.") && !/\.(gz|br|tmp)$/.test(path),
      setHeaders: (res, path) => {
        res.header("x-content-type-options", "nosniff");
        res.header("referrer-policy", "no-referrer");
        // A content-hashed name never changes content; anything else (index.html) is revalidated.
        if (/-[A-Z0-9]{8}\.(js|css)(\.gz|\.br)?$/.test(path)) {
          res.header("cache-control", "public, max-age=31536000, immutable");
        } else {
          res.header("cache-control", "no-cache");
          res.header("content-security-policy", CONSOLE_CSP);
        }
      },
    });
  });
}
