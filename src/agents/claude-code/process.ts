/**
 * One Claude Code CLI process: spawn, newline-delimited JSON in and out, a stderr tail for
 * diagnostics, and stopping it by escalation.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { Logger } from "pino";
import { parseLine, type StreamLine } from "./protocol.js";

export interface SpawnSpec {
  command: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the program could not be started at all (e.g. not found). */
  startError?: Error;
}

const stderrTailBytes = 4096;
/** How long a graceful close waits after closing stdin, and after SIGTERM, before escalating. */
const closeStepMs = 2000;

export class AgentProcess {
  private readonly child: ChildProcess;
  private exit: ProcessExit | null = null;
  private stderr = "";
  private handler: ((line: StreamLine) => void) | null = null;
  readonly exited: Promise<ProcessExit>;

  constructor(
    spec: SpawnSpec,
    private readonly log: Logger,
  ) {
    // Its own process group, so stopping the agent also stops the tools it runs.
    this.child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    this.exited = new Promise((resolve) => {
      const settle = (exit: ProcessExit) => {
        if (this.exit) return;
        this.exit = exit;
        resolve(exit);
      };
      this.child.once("error", (err) => {
        if (this.child.pid !== undefined) return;
        // The whole error (with the program's path) for the operator; clients get spawn-error.ts.
        this.log.error({ err: err.message, command: spec.command, cwd: spec.cwd }, "claude-code could not be started");
        settle({ code: null, signal: null, startError: err });
      });
      // `close` waits for stdout to drain, so a final `result` line is never lost to `exit`.
      this.child.once("close", (code, signal) => settle({ code, signal }));
    });
    // A write to a process that just died must fail the turn through `exited`, not crash mooring.
    this.child.stdin?.on("error", (err) => this.log.debug({ err }, "claude-code stdin closed"));
    this.child.stderr?.setEncoding("utf8");
    this.child.stderr?.on("data", (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-stderrTailBytes);
    });
    if (this.child.stdout) {
      createInterface({ input: this.child.stdout }).on("line", (text) => {
        const line = parseLine(text);
        if (!line) {
          this.log.debug({ line: text.slice(0, 500) }, "claude-code printed a non-JSON line");
          return;
        }
        this.handler?.(line);
      });
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return this.exit === null;
  }

  /** Where parsed stdout lines go; one consumer at a time (the conversation). */
  onLine(handler: (line: StreamLine) => void): void {
    this.handler = handler;
  }

  send(message: unknown): void {
    const stdin = this.child.stdin;
    if (!this.alive || !stdin || stdin.destroyed || stdin.writableEnded) return;
    stdin.write(`${JSON.stringify(message)}\n`);
  }

  stderrTail(): string {
    return this.stderr;
  }

  signal(signal: NodeJS.Signals): void {
    if (!this.alive || this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // The group may already be gone; try the process itself.
      this.child.kill(signal);
    }
  }

  /** `graceful`: close stdin so the CLI finishes and saves, then SIGTERM, then SIGKILL. */
  async close(mode: "graceful" | "kill"): Promise<void> {
    if (!this.alive) return;
    if (mode === "graceful") {
      this.child.stdin?.end();
      if (await this.exitsWithin(closeStepMs)) return;
      this.signal("SIGTERM");
      if (await this.exitsWithin(closeStepMs)) return;
    }
    this.signal("SIGKILL");
    await this.exited;
  }

  exitsWithin(ms: number): Promise<boolean> {
    if (!this.alive) return Promise.resolve(true);
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      this.exited.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      }),
    ]).finally(() => clearTimeout(timer));
  }
}
