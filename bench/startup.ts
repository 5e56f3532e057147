/**
 * Startup of `npm start` with the embedded Postgres, to /readyz 200: the first start on a machine
 * (a fresh MOORING_DATA_DIR and no cluster template yet: initdb, start, migrate), cold (another
 * fresh data folder, its cluster copied from the template the first start kept: start, migrate)
 * and warm (that folder again). Reference in the same run: how long `node -e ""` takes to start
 * and exit.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, repoRoot, track } from "./lib/gateway.js";
import { median, sleep, wallMs } from "./lib/stats.js";
import { type Benchmark, ratio, type Row, type Sample } from "./lib/types.js";

export const startup: Benchmark = {
  id: "startup",
  title: "Startup (npm start, embedded Postgres)",
  describe: () =>
    '`npm start` to /readyz 200: first start on a machine (fresh MOORING_DATA_DIR, no cluster template: initdb), cold (another fresh MOORING_DATA_DIR, cluster from the template) and warm (that folder again); reference: `node -e ""`',
  async run(ctx) {
    const dir = await mkdtemp(join(tmpdir(), "mooring-bench-startup-"));
    try {
      const templates = join(dir, "templates");
      const first = await npmStart(join(dir, "first"), templates);
      const cold = await npmStart(join(dir, "data"), templates);
      const warm = await npmStart(join(dir, "data"), templates);
      const node = await nodeBaseline();
      ctx.log(
        `  first ${first.toFixed(0)} ms, cold ${cold.toFixed(0)} ms, warm ${warm.toFixed(0)} ms, node -e "" ${node.toFixed(0)} ms`,
      );
      return { first, cold, warm, node };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
  rows(m: Sample): Row[] {
    const benchmark = "Startup (npm start)";
    const reference = { label: 'node -e ""', value: m.node, unit: "ms" };
    return [
      {
        benchmark,
        figure: "first start on a machine: initdb + start → ready",
        value: m.first,
        unit: "ms",
        reference,
        ratio: ratio(m.first, m.node),
        // Once per install (initdb's ~1.4 s of CPU on this machine); informative, no target.
        target: null,
        met: null,
      },
      {
        benchmark,
        figure: "cold: new data folder (template copy) + start → ready",
        value: m.cold,
        unit: "ms",
        reference,
        ratio: ratio(m.cold, m.node),
        // npm start runs compiled output (scripts/start.mjs) instead of compiling with tsx.
        target: "≤ 2500 ms",
        met: m.cold <= 2500,
      },
      {
        benchmark,
        figure: "warm: start → ready",
        value: m.warm,
        unit: "ms",
        reference,
        ratio: ratio(m.warm, m.node),
        target: "≤ 1000 ms",
        met: m.warm <= 1000,
      },
    ];
  },
};

const STARTUP_TOKEN = "bench-startup-token";

/** Spawn `npm start`, time it to /readyz 200, then stop the gateway (SIGTERM) and wait for everything to exit. */
async function npmStart(dataDir: string, clusterTemplates: string): Promise<number> {
  const port = await freePort();
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  delete env.DATABASE_URL;
  Object.assign(env, {
    MOORING_DATA_DIR: dataDir,
    MOORING_CLUSTER_TEMPLATE_DIR: clusterTemplates,
    PORT: String(port),
    HOST: "127.0.0.1",
    LOG_LEVEL: "warn",
    MOORING_LOG_FORMAT: "json",
    // /readyz tells the gateway's pid (to stop it below, not npm) only to a valid token.
    MOORING_API_TOKENS: STARTUP_TOKEN,
  });
  const t0 = wallMs();
  const child = track(
    spawn("npm", ["start", "--silent"], { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] }),
  );
  let output = "";
  child.stdout!.on("data", (c) => (output += c));
  child.stderr!.on("data", (c) => (output += c));
  const exited = once(child, "exit");
  let pid = 0;
  let readyAt = 0;
  const deadline = Date.now() + 120_000;
  while (!readyAt) {
    const answer = await fetch(`http://127.0.0.1:${port}/readyz`, {
      headers: { authorization: `Bearer ${STARTUP_TOKEN}` },
      signal: AbortSignal.timeout(2000),
    }).then(
      async (r) => ({ status: r.status, body: (await r.json().catch(() => ({}))) as { pid?: number } }),
      () => null,
    );
    if (answer?.status === 200) {
      readyAt = wallMs();
      pid = answer.body.pid ?? 0;
      break;
    }
    if (child.exitCode !== null) throw new Error(`npm start exited before ready:\n${output.slice(-3000)}`);
    if (Date.now() > deadline) throw new Error(`npm start not ready in 120 s:\n${output.slice(-3000)}`);
    await sleep(10);
  }
  // Stop the gateway itself (it stops its embedded Postgres), then let npm exit.
  if (pid > 0) process.kill(pid, "SIGTERM");
  const stopped = await Promise.race([exited.then(() => true), sleep(30_000).then(() => false)]);
  if (!stopped) {
    child.kill("SIGKILL");
    throw new Error(`npm start did not stop after SIGTERM:\n${output.slice(-3000)}`);
  }
  return readyAt - t0;
}

async function nodeBaseline(): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = wallMs();
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await once(child, "exit");
    times.push(wallMs() - t0);
  }
  return median(times);
}
