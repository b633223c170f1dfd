import path from 'node:path';
import type { Reporter, TestModule, Vitest } from 'vitest/node' with { 'resolution-mode': 'import' };
import { isCI } from '../scripts/ci.cjs';
import { judgeSkips, type Skipped } from './skip-policy';

/**
 * Ends a run with the plain line "N passed, N failed, N skipped" on a line of its own, which CI
 * reads whatever the runner (vitest's own summary is decorated and not machine-readable).
 *
 * Before it, every skipped test with its reason. In CI a skip that test/skip-policy.ts does not
 * allow counts as failed, and fails the run: there a missing program is installed or the test fails.
 */
export default class SummaryReporter implements Reporter {
  private root = process.cwd();
  /** `-t`: the tests it leaves out are no skips of theirs, and neither counted nor judged. */
  private namePattern: RegExp | undefined;

  onInit(vitest: Vitest): void {
    this.root = vitest.config.root;
    this.namePattern = vitest.config.testNamePattern;
  }

  private filteredOut(fullName: string): boolean {
    if (this.namePattern === undefined) return false;
    const pattern = new RegExp(this.namePattern.source, this.namePattern.flags.replace('g', ''));
    return !pattern.test(fullName) && !pattern.test(fullName.replaceAll(' > ', ' '));
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    const skipped: Skipped[] = [];
    for (const module of testModules) {
      const file = path.relative(this.root, module.moduleId);
      for (const test of module.children.allTests()) {
        const result = test.result();
        if (result.state !== 'passed' && result.state !== 'failed' && this.filteredOut(test.fullName)) continue;
        if (result.state === 'passed') passed++;
        else if (result.state === 'failed') failed++;
        else skipped.push({ file, test: test.fullName, note: result.state === 'skipped' ? result.note : 'not run' });
      }
      if (module.state() === 'failed' && [...module.children.allTests()].length === 0) failed++;
    }
    const { allowed, unlisted } = judgeSkips(skipped);
    const ci = isCI();
    const lines = [
      ...allowed.map((s) => `skipped (allowed in CI: ${s.why}): ${s.file} > ${s.test}: ${s.note}`),
      ...unlisted.map(
        (s) =>
          `${ci ? 'FAILED, a skip CI does not allow' : 'skipped (allowed outside CI only)'}: ${s.file} > ${s.test}: ${s.note ?? 'no reason given'}`,
      ),
    ];
    if (ci && unlisted.length > 0) {
      lines.push(
        `${unlisted.length} skipped test(s) are not on the allow-list of test/skip-policy.ts — fix: make the test install what it ` +
          'needs (test/helpers/tools.ts) or run where it can, or add the skip to ALLOWED_SKIPS with the reason it may stand',
      );
      failed += unlisted.length;
      // vitest keeps an exit code set by a reporter (it only ever sets 1 itself).
      process.exitCode = 1;
    }
    const skips = ci ? allowed.length : skipped.length;
    process.stdout.write(`\n${lines.map((l) => `${l}\n`).join('')}${passed} passed, ${failed} failed, ${skips} skipped\n`);
  }
}
