/**
 * git as a user runs it in a test's repository: this machine's own configuration (system and
 * global) left out, a fixed author, HOME where the test says (the repository itself by default).
 */
import { execFileSync } from "node:child_process";

export function userGit(cwd: string, args: string[], env: Record<string, string> = {}): string {
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: {
      PATH: process.env.PATH ?? "",
      HOME: cwd,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      // Reads (status) must not refresh and rewrite the index: tests compare it byte for byte.
      GIT_OPTIONAL_LOCKS: "0",
      GIT_AUTHOR_NAME: "u",
      GIT_AUTHOR_EMAIL: "u@example.com",
      GIT_COMMITTER_NAME: "u",
      GIT_COMMITTER_EMAIL: "u@example.com",
      ...env,
    },
  });
}
