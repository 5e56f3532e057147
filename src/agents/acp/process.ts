/**
 * The agent's OS process: spawn, stderr capture, exit tracking and escalating shutdown. Knows
 * nothing about ACP; the connection module speaks the protocol over its stdio.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { Logger } from "pino";
import type { AgentEntry } from "../registry.js";
import { describeSpawnError } from "../spawn-error.js";

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the program could not be started at all (e.g. ENOENT). */
  spawnError?: Error;
}

/** Lines of stderr kept for the crash log; the rest only went to debug logging. */
const STDERR_TAIL_LINES = 20;
/** How long after `exit` the process's pipes may stay open before it counts as gone anyway. */
const STDIO_DRAIN_MS = 200;

export class AgentProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** Settles once, when the process is gone (or never started). */
  readonly exited: Promise<ExitInfo>;
  private exit: ExitInfo | null = null;
  private readonly tail: string[] = [];
  private stopping: Promise<void> | null = null;

  constructor(entry: AgentEntry, cwd: string, env: NodeJS.ProcessEnv, log: Logger) {
    this.child = spawn(entry.command ?? "", entry.args, {
      cwd,
      env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.exited = new Promise<ExitInfo>((resolve) => {
      // `close` comes once stdout and stderr are drained too, so the crash log has the last words;
      // a grandchild holding the pipes open must not delay it for long, hence the fallback.
      let fallback: NodeJS.Timeout | undefined;
      const settle = (code: number | null, signal: NodeJS.Signals | null) => {
        clearTimeout(fallback);
        this.exit ??= { code, signal };
        resolve(this.exit);
      };
      this.child.once("close", settle);
      this.child.once("exit", (code, signal) => {
        fallback = setTimeout(() => settle(code, signal), STDIO_DRAIN_MS);
      });
      this.child.on("error", (err) => {
        // `error` also reports failed kills of a live process; only a missing pid means it never ran.
        if (this.child.pid === undefined && !this.exit) {
          // The whole error (with the program's path) for the operator; clients get spawn-error.ts.
          log.error({ err: err.message, command: entry.command, cwd }, "agent could not be started");
          this.exit = { code: null, signal: null, spawnError: err };
          resolve(this.exit);
        }
      });
    });
    // A write racing the agent's exit fails with EPIPE; the exit itself is what we report.
    this.child.stdin.on("error", () => {});
    createInterface({ input: this.child.stderr }).on("line", (line) => {
      this.tail.push(line);
      if (this.tail.length > STDERR_TAIL_LINES) this.tail.shift();
      log.debug({ stderr: line }, "agent stderr");
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get exitInfo(): ExitInfo | null {
    return this.exit;
  }

  stderrTail(): string {
    return this.tail.join("\n");
  }

  /** Ask the agent to finish (stdin EOF), then SIGTERM, then SIGKILL; resolves once it is gone. */
  stop(eofGraceMs: number, termGraceMs: number): Promise<void> {
    this.stopping ??= (async () => {
      this.child.stdin.end();
      if (await this.exitsWithin(eofGraceMs)) return;
      await this.terminate(termGraceMs);
    })();
    return this.stopping;
  }

  /** SIGTERM, then SIGKILL if the agent is still there after `graceMs`. */
  async terminate(graceMs: number): Promise<void> {
    this.send("SIGTERM");
    if (await this.exitsWithin(graceMs)) return;
    await this.kill();
  }

  async kill(): Promise<void> {
    this.send("SIGKILL");
    await this.exited;
  }

  private send(signal: NodeJS.Signals): void {
    if (this.exit || this.child.pid === undefined) return;
    try {
      this.child.kill(signal);
    } catch {
      // Already reaped between the check and the kill: nothing left to stop.
    }
  }

  /** The exit, if it happens within `ms` (stdout EOF usually comes a moment before `exit`). */
  async waitForExit(ms: number): Promise<ExitInfo | null> {
    if (this.exit) return this.exit;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), ms);
    });
    const info = await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    return info;
  }

  private async exitsWithin(ms: number): Promise<boolean> {
    return (await this.waitForExit(ms)) !== null;
  }
}

/** A short human description of how the process ended, for failure messages. */
export function describeExit(info: ExitInfo | null): string {
  if (!info) return "it is no longer responding";
  if (info.spawnError) return `it could not be started (${describeSpawnError(info.spawnError)})`;
  if (info.signal) return `it was killed by ${info.signal}`;
  return `it exited with code ${info.code}`;
}
