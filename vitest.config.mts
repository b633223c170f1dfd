import { defineConfig } from 'vitest/config';

// Integration files each start their own Temporal server (dev server or time-skipping test
// server) plus a worker, and bundling workflow code is CPU-heavy: on a 2-core machine more than
// two files at once only makes every one of them slower and flakier. DATUM_TEST_WORKERS overrides.
const maxWorkers = Number(process.env.DATUM_TEST_WORKERS ?? 2);

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    reporters: ['default', './test/summary-reporter.ts'],
    exclude: ['**/node_modules/**', 'dist/**', '.venv/**', 'test-artifacts/**'],
    // Child processes, not threads: the Temporal native runtime is a per-process singleton and
    // worker_threads cannot give each file its own.
    pool: 'forks',
    maxWorkers: Number.isInteger(maxWorkers) && maxWorkers > 0 ? maxWorkers : 2,
    // Generous: starting a server and bundling workflows takes seconds, far more on a loaded CI box.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
  },
});
