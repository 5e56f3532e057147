/**
 * Whether the CLI was started by a launcher that forwards signals to it (npx, `npm exec`,
 * `npm run`, pnpm, yarn). On a terminal one Ctrl-C then reaches the CLI twice: the terminal
 * signals the whole foreground process group, and the launcher sends its own copy. Linux tells
 * through /proc which program the parent is; elsewhere npm's environment has to do.
 */
import { readFileSync } from "node:fs";

// npm sets its process title ("npm exec mooring run …"), which is what cmdline then shows; other
// launchers show as `node /…/bin/yarn.js …`: the program or the script it runs names it.
const launcher = /(^|\/)(npm|npx|pnpm|yarn)(-cli)?(\.c?js)?(\s|$)/;

export function parentForwardsSignals(
  ppid: number = process.ppid,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  try {
    const argv = readFileSync(`/proc/${ppid}/cmdline`, "utf8").split("\0");
    return argv.slice(0, 2).some((arg) => launcher.test(arg));
  } catch {
    return env.npm_command === "exec" || env.npm_lifecycle_event !== undefined;
  }
}
