/**
 * Whether the CLI was started by a launcher that forwards signals to it (npx, `npm exec`,
 * `npm run`, pnpm, yarn). On a terminal one Ctrl-C then reaches the CLI twice: the terminal
 * signals the whole foreground process group, and the launcher sends its own copy. Linux tells
 * through /proc which program the parent is; elsewhere npm's environment has to do.
 */
import { readFileSync } from "node:fs";

const launchers = /^(npm|npx|pnpm|yarn)\b/;

export function parentForwardsSignals(
  ppid: number = process.ppid,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  try {
    // npm sets its process title ("npm exec mooring run …"), which is what cmdline shows.
    return launchers.test(readFileSync(`/proc/${ppid}/cmdline`, "utf8"));
  } catch {
    return env.npm_command === "exec" || env.npm_lifecycle_event !== undefined;
  }
}
