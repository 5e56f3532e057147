/**
 * Runs the real `mooring` command (bin/mooring.js, or `npx mooring`) on a pseudo-terminal, as a
 * user's terminal would see it: util-linux `script` gives it a pty for stdin, stdout and stderr,
 * and what reaches that terminal (both streams, in order, with the pty's CR LF line ends) is
 * collected. Keys typed on it (`type("\x03")` is Ctrl-C) reach it through the pty's line
 * discipline, so Ctrl-C signals the whole foreground process group, as a real terminal does.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { cliBin } from "./cli.js";
import { repoRoot } from "./gateway.js";

export interface TerminalRun {
  code: number | string;
  /** Every byte the terminal received, decoded as UTF-8. */
  screen: string;
}

export interface Terminal {
  child: ChildProcess;
  screen: () => string;
  /** Resolves with the exit code of the command (or its signal name). */
  exited: Promise<number | string>;
  /** Resolves once the screen shows `text`; rejects if the command ends first. */
  waitFor(text: string | RegExp): Promise<void>;
  /** Types on the terminal's keyboard. */
  type(keys: string): void;
}

/** Every terminal a test file opened, so an afterEach can kill what is left. */
const opened = new Set<ChildProcess>();

export function openTerminal(
  args: string[],
  env: Record<string, string | undefined> = {},
  launcher: "node" | "npx" = "node",
): Terminal {
  // Arguments travel as variables, so escape sequences in them reach the CLI byte for byte,
  // never through a shell's quoting.
  const argEnv = Object.fromEntries(args.map((a, i) => [`MOORING_TEST_ARG${i}`, a]));
  const argList = args.map((_, i) => `"$MOORING_TEST_ARG${i}"`).join(" ");
  const command =
    launcher === "npx"
      ? `exec npx --offline mooring ${argList}`
      : `exec "$MOORING_TEST_NODE" "$MOORING_TEST_BIN" ${argList}`;
  const child = spawn("script", ["-qfec", command, "/dev/null"], {
    cwd: repoRoot,
    stdio: ["pipe", "pipe", "pipe"],
    env: {
      ...process.env,
      NO_COLOR: undefined,
      FORCE_COLOR: undefined,
      TERM: "xterm-256color",
      ...env,
      ...argEnv,
      MOORING_TEST_NODE: process.execPath,
      MOORING_TEST_BIN: cliBin,
    } as NodeJS.ProcessEnv,
  });
  opened.add(child);
  const chunks: Buffer[] = [];
  const waiters: (() => void)[] = [];
  const screen = () => Buffer.concat(chunks).toString("utf8");
  const onData = (c: Buffer) => {
    chunks.push(c);
    for (const w of waiters) w();
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = once(child, "close").then(([code, signal]) => {
    opened.delete(child);
    return (code ?? signal) as number | string;
  });
  return {
    child,
    screen,
    exited,
    waitFor(text) {
      const has = () => (typeof text === "string" ? screen().includes(text) : text.test(screen()));
      return new Promise<void>((resolve, reject) => {
        if (has()) return resolve();
        waiters.push(() => has() && resolve());
        exited.then(() =>
          has()
            ? resolve()
            : reject(new Error(`exited before ${String(text)}\nscreen: ${screen().slice(-2000)}`)),
        );
      });
    },
    type(keys) {
      child.stdin!.write(keys);
    },
  };
}

/** Runs the command on a terminal to its end, typing nothing. */
export async function runCliOnTerminal(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<TerminalRun> {
  const terminal = openTerminal(args, env);
  const code = await terminal.exited;
  return { code, screen: terminal.screen() };
}

export function killAllTerminals(): void {
  for (const child of opened) child.kill("SIGKILL");
  opened.clear();
}
