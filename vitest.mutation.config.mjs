import { defineConfig } from 'vitest/config';

// The mutation tier's tests (`npm run mutation`, docs/testing.md): what StrykerJS runs against each
// mutant of the safety code (stryker.config.mjs), per set. The example tests that judge the gates
// and the agent's refusals, pure or on temp directories. Left out: the property and fuzz tests
// (10^4 cases each, minutes per run, so minutes per mutant), and tests that read source or dist/
// rather than run the code (lint zones, dist requires, docs).
const TESTS = {
  domain: ['test/unit/**/*.test.ts'],
  agent: [
    'test/agent/refusals.test.ts',
    'test/agent/targets.test.ts',
    'test/agent/cas.test.ts',
    'test/agent/file-flag.test.ts',
    'test/agent/paths.test.ts',
    'test/agent/directory.test.ts',
    'test/agent/marker-upgrade.test.ts',
    'test/agent/release.test.ts',
  ],
};

const set = /** @type {keyof typeof TESTS} */ (process.env.DATUM_MUTATION_SET || 'domain');

export default defineConfig({
  test: {
    include: TESTS[set] ?? TESTS.domain,
    exclude: [
      '**/node_modules/**',
      'dist/**',
      'test/unit/properties*.test.ts',
      'test/unit/agent-zones.test.ts',
      'test/unit/dist-requires.test.ts',
      'test/unit/guards.test.ts',
      'test/unit/no-cycle.test.ts',
      'test/unit/docs.test.ts',
    ],
    testTimeout: 30_000,
  },
});
