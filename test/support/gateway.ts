/** Start a gateway for a test: in this process (fast) or as a real child process (restart tests). */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { loadConfig } from "../../src/config.js";
import { type Gateway, startGateway } from "../../src/gateway.js";
import { TestClock } from "./fake-clock.js";
import { track } from "./leaks.js";

export const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

/** Env for a test gateway: loopback, any free port, the test database, fast timers. */
export function testEnv(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "silent",
    MOORING_POLL_MS: "200",
    // Workspace checkpoints run git before and after every turn: off unless a test asks for them
    // (test/process/checkpoints*.test.ts, test/cli/cli-checkpoints.test.ts, response-schemas).
    MOORING_CHECKPOINTS: "false",
    ...extra,
  };
}

export interface TestGatewayOptions {
  /**
   * Receives every log record as parsed JSON (pino's own output, so fields are as an operator sees
   * them). The level is `logLevel`, else TEST_LOG_LEVEL, else `info`.
   */
  onLog?: (record: Record<string, any>) => void;
  logLevel?: string;
  /** The gateway's clock; a fresh TestClock (real time, steppable) when not given. */
  clock?: TestClock;
}

/** An in-process test gateway and the clock it runs on (`clock.advance(ms)` steps its time). */
export type TestGateway = Gateway & { clock: TestClock };

export async function startTestGateway(
  databaseUrl: string,
  extra: Record<string, string> = {},
  options: TestGatewayOptions = {},
): Promise<TestGateway> {
  const config = loadConfig(testEnv(databaseUrl, extra));
  const clock = options.clock ?? new TestClock();
  const { onLog } = options;
  const log = onLog
    ? pino(
        { level: options.logLevel ?? process.env.TEST_LOG_LEVEL ?? "info" },
        { write: (line: string) => onLog(JSON.parse(line)) },
      )
    : pino({ level: options.logLevel ?? process.env.TEST_LOG_LEVEL ?? "silent" });
  const gateway = await startGateway(config, log, { clock });
  let stopped = false;
  const stop = gateway.stop;
  gateway.stop = () => {
    stopped = true;
    return stop();
  };
  track({
    kind: "gateway",
    what: `in-process gateway ${gateway.url}`,
    alive: () => !stopped,
    release: () => gateway.stop(),
    timers: () => clock.pending(),
  });
  await gateway.started;
  return Object.assign(gateway, { clock });
}

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  /** Resolves with the exit code (or signal name). */
  exited: Promise<number | string>;
  waitReady(): Promise<void>;
  kill(signal?: NodeJS.Signals): void;
}

/**
 * How a gateway process is started: from the sources through tsx (the default), as `npm start`
 * does (scripts/start.mjs: the compiled bundle), or as `npx mooring serve` does (bin/mooring.js).
 */
export const gatewayCommands = {
  tsx: ["--import", "tsx", "src/main.ts"],
  npmStart: ["scripts/start.mjs"],
  serve: ["bin/mooring.js", "serve"],
} as const;
export type GatewayCommand = keyof typeof gatewayCommands;

/**
 * A real gateway process (`node --import tsx src/main.ts`, or `command`). Its URL is read from the
 * "listening" log line, so PORT=0 works.
 */
export async function spawnGateway(
  env: Record<string, string>,
  command: GatewayCommand = "tsx",
): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [...gatewayCommands[command]], {
    cwd: repoRoot,
    env: { ...process.env, MOORING_LOG_FORMAT: "json", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let resolveUrl: (url: string) => void;
  const urlPromise = new Promise<string>((resolve) => {
    resolveUrl = resolve;
  });
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    const match = output.match(/"url":"(http:\/\/[^"]+)"/);
    if (match) resolveUrl(match[1]);
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  track({
    kind: "process",
    what: `gateway process pid ${child.pid} (${gatewayCommands[command].join(" ")})`,
    alive: () => child.exitCode === null && child.signalCode === null,
    release: async () => {
      child.kill("SIGKILL");
      await once(child, "exit").catch(() => {});
    },
  });
  const exited = once(child, "exit").then(([code, signal]) => (code ?? signal) as number | string);
  const url = await Promise.race([
    urlPromise,
    exited.then((code) => {
      throw new Error(`gateway exited (${code}) before listening:\n${output}`);
    }),
  ]);
  return {
    child,
    url,
    output: () => output,
    exited,
    async waitReady() {
      for (;;) {
        const res = await fetch(`${url}/readyz`).catch(() => null);
        if (res?.status === 200) return;
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`gateway exited before ready:\n${output}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    kill(signal = "SIGKILL") {
      child.kill(signal);
    },
  };
}

export interface Answer<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** A small JSON client. */
export async function call<T = any>(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer<T>> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text === "" ? null : JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** Poll `fn` until it returns a truthy value (for state that has no event to await). */
export async function eventually<T>(
  fn: () => Promise<T | null | undefined | false>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value as T;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`condition not met in ${timeoutMs} ms${last ? `: ${String(last)}` : ""}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * A gateway whose database never answers (a closed port): live, never ready, for tests of what a
 * not-ready gateway answers. Stop it as any other.
 */
export async function startUnreadyGateway(): Promise<Gateway> {
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
  return startGateway(
    loadConfig(testEnv(`postgres://nobody@127.0.0.1:${port}/none`)),
    pino({ level: "silent" }),
  );
}
