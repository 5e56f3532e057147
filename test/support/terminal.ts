/**
 * Runs the real `mooring` command (bin/mooring.js) on a pseudo-terminal, as a user's terminal
 * would see it: util-linux `script` gives it a pty for stdin, stdout and stderr, and what reaches
 * that terminal (both streams, in order, with the pty's CR LF line ends) is collected.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { cliBin } from "./cli.js";
import { repoRoot } from "./gateway.js";

export interface TerminalRun {
  code: number | string;
  /** Every byte the terminal received, decoded as UTF-8. */
  screen: string;
}

export async function runCliOnTerminal(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<TerminalRun> {
  // Arguments travel as variables, so escape sequences in them reach the CLI byte for byte,
  // never through a shell's quoting.
  const argEnv = Object.fromEntries(args.map((a, i) => [`MOORING_TEST_ARG${i}`, a]));
  const command = `exec "$MOORING_TEST_NODE" "$MOORING_TEST_BIN" ${args.map((_, i) => `"$MOORING_TEST_ARG${i}"`).join(" ")}`;
  const child = spawn("script", ["-qfec", command, "/dev/null"], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
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
  const chunks: Buffer[] = [];
  child.stdout!.on("data", (c: Buffer) => chunks.push(c));
  child.stderr!.on("data", (c: Buffer) => chunks.push(c));
  const [code, signal] = await once(child, "close");
  return { code: (code ?? signal) as number | string, screen: Buffer.concat(chunks).toString("utf8") };
}
