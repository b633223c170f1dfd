import { defineConfig } from 'vitest/config';

// The mutation tier's tests (`npm run mutation`, docs/testing.md): what StrykerJS runs against each
// mutant of the safety code (stryker.config.mjs), per set. The example tests that judge the gates
// and the agent's refusals, pure or on temp directories. Left out: the property and fuzz tests
// (10^4 cases each, minutes per run, so minutes per mutant), and tests that read source or dist/
// rather than run the code (lint zones, dist requires, docs).
const TESTS = {
  // The example tests that run a decision (decide, a pass, the gates or authorization by name).
  domain: [
    'attributes',
    'cas',
    'gate-bounds',
    'ladder',
    'ledger-audit',
    'loop',
    'probe-lost',
    'redact',
    'repair-deadline',
    'repeated-drift',
    'retry-budget',
    'seed-scenarios',
    'targets',
    'unit-spec',
    'work-items',
  ].map((name) => `test/unit/${name}.test.ts`),
  agent: [
    'test/agent/refusals.test.ts',
    'test/agent/targets.test.ts',
    'test/agent/cas.test.ts',
    'test/agent/file-flag.test.ts',
    'test/agent/paths.test.ts',
    'test/agent/directory.test.ts',
    'test/agent/marker-upgrade.test.ts',
    'test/agent/release.test.ts',
    // Attacks on real files with the real agent activities, no Temporal: the refusals of an entry
    // whose target is lost (4a) and of one target under two spellings (4c).
    'test/adversarial/lost-datum-binding.test.ts',
    'test/adversarial/symlinked-dir-alias.test.ts',
  ],
};

const set = /** @type {keyof typeof TESTS} */ (process.env.DATUM_MUTATION_SET || 'domain');

export default defineConfig({
  test: {
    include: TESTS[set] ?? TESTS.domain,
    exclude: ['**/node_modules/**', 'dist/**'],
    testTimeout: 30_000,
    // One module graph for every test file of a run: each mutant's run imports the code once, not
    // once per file. The code under test is pure or works on temp directories of its own.
    isolate: false,
  },
});
