import { defineConfig } from 'vitest/config';

// The fast tier (`npm run test:unit`): the pure domain tests and the agent's providers on temp
// directories, in seconds. No Temporal server, no PostgreSQL, no child process, and no global
// set-up: nothing here runs dist/, so src/ is not compiled first. `npm test` runs these too.
export default defineConfig({
  test: {
    include: [
      'test/unit/**/*.test.ts',
      'test/agent/file-flag.test.ts',
      'test/agent/paths.test.ts',
      'test/agent/refusals.test.ts',
      'test/agent/release.test.ts',
      'test/agent/targets.test.ts',
      'test/agent/cas.test.ts',
      'test/agent/marker-upgrade.test.ts',
      'test/agent/removal.test.ts',
      'test/metrics/actions.test.ts',
      // The fuzz tier (issue 10, must-show 2): 10^4 cases per input surface, pure or on temp dirs.
      'test/fuzz/**/*.test.ts',
    ],
    exclude: ['**/node_modules/**', 'dist/**'],
    testTimeout: 30_000,
  },
});
