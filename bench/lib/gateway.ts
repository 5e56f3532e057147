/**
 * Real gateway processes for the benchmarks: `node --import tsx src/main.ts`, like
 * test/support/gateway.ts spawns them, on a port picked here (LOG_LEVEL=warn prints no URL).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { sleep, wallMs } from "./stats.js";

export const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

/** Every child a benchmark started; killed if the runner exits early (Ctrl-C, a crash). */
const children = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

/** Remember a child process so an early exit of the runner does not leave it behind. */
export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

export interface GatewayProcess {
  child: ChildProcess;
  pid: number;
  url: string;
  /** Wall-clock ms when the process was spawned. */
  spawnedAt: number;
  output(): string;
  exited: Promise<number | string>;
  /** Polls /readyz every `everyMs`; resolves with the wall-clock ms of the first 200. */
  waitReady(timeoutMs?: number, everyMs?: number): Promise<number>;
  /** Resident set size of the process, in bytes (Linux /proc). */
  rss(): number;
  /** SIGTERM and wait for the exit (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<void>;
  /** kill -9, and wait for the exit. */
  kill9(): Promise<void>;
}

export interface SpawnOptions {
  env: Record<string, string>;
  /**
   * Working directory: a production build folder for `dist/main.js`; by default BENCH_APP_DIR
   * (another checkout, e.g. an older commit, for before/after figures), else this checkout.
   */
  cwd?: string;
  /** Command and args; default `node --import tsx src/main.ts`. */
  command?: string[];
  /** Extra node flags before `--import tsx` (e.g. --cpu-prof). */
  nodeFlags?: string[];
}

/** The gateway's node flags for BENCH_CPU_PROF=<dir>: a V8 CPU profile written there when it stops. */
export function cpuProfileFlags(): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

export async function spawnGateway(options: SpawnOptions): Promise<GatewayProcess> {
  const port = options.env.PORT ?? String(await freePort());
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    HOST: "127.0.0.1",
    LOG_LEVEL: "warn",
    MOORING_LOG_FORMAT: "json",
    // Workspace checkpoints off: the benchmarks measure the turn's own path, and their sessions
    // work in /tmp, which a checkpoint would snapshot whole (git processes per turn). A benchmark
    // that measures checkpoints turns them on in its own env.
    MOORING_CHECKPOINTS: "false",
    ...options.env,
    PORT: port,
  };
  const [cmd, ...args] = options.command ?? [
    process.execPath,
    ...(options.nodeFlags ?? []),
    "--import",
    "tsx",
    "src/main.ts",
  ];
  const spawnedAt = wallMs();
  const child = track(
    spawn(cmd, args, {
      cwd: options.cwd ?? process.env.BENCH_APP_DIR ?? repoRoot,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  let output = "";
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = once(child, "exit").then(([code, signal]) => (code ?? signal) as number | string);
  const url = `http://127.0.0.1:${port}`;
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    child,
    pid: child.pid!,
    url,
    spawnedAt,
    output: () => output,
    exited,
    async waitReady(timeoutMs = 60_000, everyMs = 10) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const status = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
          (r) => {
            void r.arrayBuffer();
            return r.status;
          },
          () => 0,
        );
        if (status === 200) return wallMs();
        if (!alive()) throw new Error(`gateway exited before ready:\n${output.slice(-4000)}`);
        if (Date.now() > deadline)
          throw new Error(`gateway not ready after ${timeoutMs} ms:\n${output.slice(-4000)}`);
        await sleep(everyMs);
      }
    },
    rss() {
      return readRss(child.pid!);
    },
    async stop(graceMs = 15_000) {
      if (!alive()) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
    async kill9() {
      if (!alive()) return;
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/** VmRSS of a process in bytes. */
export function readRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const match = status.match(/VmRSS:\s+(\d+)\s+kB/);
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}

/**
 * Environment for a benchmark gateway on `databaseUrl`. BENCH_GATEWAY_ENV (a JSON object) is
 * added to every gateway a benchmark starts, to try a setting: `BENCH_GATEWAY_ENV='{"MOORING_EVENT_FLUSH_MS":"5"}'`.
 */
export function gatewayEnv(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  const tried = process.env.BENCH_GATEWAY_ENV
    ? (JSON.parse(process.env.BENCH_GATEWAY_ENV) as Record<string, string>)
    : {};
  return { DATABASE_URL: databaseUrl, ...extra, ...tried };
}
