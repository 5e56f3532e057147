/**
 * Ends every test run with the plain line `N passed, N failed`, the line CI reads. A test file
 * that failed without a failed test (it did not load, a file-level hook failed) and an unhandled
 * error each count as one failure, so a run that vitest calls failed never prints `0 failed`.
 * Above it, the ten slowest test files (a file over 60 s is a bug to look at); the summary stays
 * the last line.
 */
import type { Reporter, TestModule } from "vitest/node";

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failedHere++;
      }
      // A file that failed with no failed test (it did not load, or a file-level hook or the leak
      // guard's end-of-file check failed) is one failure.
      if (failedHere === 0 && module.state() === "failed") failedHere = 1;
      failed += failedHere;
    }
    const slowest = testModules
      .map((m) => ({ file: m.moduleId.replace(`${process.cwd()}/`, ""), ms: m.diagnostic().duration }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 10);
    if (slowest.length > 0) {
      const lines = slowest.map(
        (s) => `${(s.ms / 1000).toFixed(1).padStart(7)} s  ${s.file}${s.ms > 60_000 ? "  (over 60 s)" : ""}`,
      );
      process.stdout.write(`\nslowest test files:\n${lines.join("\n")}\n`);
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
  }
}
