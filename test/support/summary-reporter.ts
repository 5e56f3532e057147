/**
 * Ends every test run with the plain line `N passed, N failed`, the line CI reads. A test file
 * that fails to load and an unhandled error each count as one failure, so a run that vitest
 * calls failed never prints `0 failed`.
 */
import type { Reporter, TestModule } from "vitest/node";

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    for (const module of testModules) {
      let tests = 0;
      for (const test of module.children.allTests()) {
        tests++;
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
      }
      if (tests === 0 && module.state() === "failed") failed++;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
  }
}
