import type { Reporter, TestModule } from 'vitest/node' with { 'resolution-mode': 'import' };

/**
 * Ends a run with the plain line "N passed, N failed, N skipped" on a line of its own, which CI
 * reads whatever the runner (vitest's own summary is decorated and not machine-readable).
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      if (module.state() === 'failed' && [...module.children.allTests()].length === 0) failed++;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
