/** Spawn the real `mooring` command (bin/mooring.js) and collect what it writes and how it exits. */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { repoRoot } from "./gateway.js";

export const cliBin = join(repoRoot, "bin", "mooring.js");

export interface CliProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or the signal name) once all output was read. */
  exited: Promise<number | string>;
  /** Resolves once stdout (or stderr) contains `text`; rejects if the process ends first. */
  waitFor(text: string | RegExp, stream?: "stdout" | "stderr"): Promise<void>;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  /** "ignore" (default), "pipe" (left open unless `input` is given), or text written then closed. */
  stdin?: "ignore" | "pipe";
  input?: string;
}

/** Every CLI a test file spawned, so an afterEach can kill what is left. */
export const spawned = new Set<ChildProcess>();

export function spawnCli(args: string[], options: CliOptions = {}): CliProcess {
  const child = spawn(process.execPath, [cliBin, ...args], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: undefined, FORCE_COLOR: undefined, ...options.env } as NodeJS.ProcessEnv,
    stdio: [options.input !== undefined ? "pipe" : (options.stdin ?? "ignore"), "pipe", "pipe"],
  });
  spawned.add(child);
  let out = "";
  let err = "";
  const waiters: (() => void)[] = [];
  child.stdout!.setEncoding("utf8").on("data", (c: string) => {
    out += c;
    for (const w of waiters) w();
  });
  child.stderr!.setEncoding("utf8").on("data", (c: string) => {
    err += c;
    for (const w of waiters) w();
  });
  if (options.input !== undefined) child.stdin!.end(options.input);
  const closed = once(child, "close").then(([code, signal]) => {
    spawned.delete(child);
    return (code ?? signal) as number | string;
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited: closed,
    waitFor(text, stream = "stdout") {
      const has = () => {
        const s = stream === "stdout" ? out : err;
        return typeof text === "string" ? s.includes(text) : text.test(s);
      };
      return new Promise<void>((resolve, reject) => {
        if (has()) return resolve();
        waiters.push(() => {
          if (has()) resolve();
        });
        closed.then(() => {
          if (has()) resolve();
          else
            reject(
              new Error(
                `exited before ${String(text)} on ${stream}\nstdout: ${out.slice(-2000)}\nstderr: ${err.slice(-2000)}`,
              ),
            );
        });
      });
    },
  };
}

export function killAllClis(): void {
  for (const child of spawned) child.kill("SIGKILL");
  spawned.clear();
}

/** Runs the CLI to its end. */
export async function runCli(
  args: string[],
  options: CliOptions = {},
): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const cli = spawnCli(args, options);
  const code = await cli.exited;
  return { code, stdout: cli.stdout(), stderr: cli.stderr() };
}

/** The JSON lines of a --json run. */
export const jsonLines = (stdout: string): any[] =>
  stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l));
