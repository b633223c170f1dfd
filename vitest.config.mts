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
    // The client SDK's retry interceptor (@temporalio/client lib/grpc-retry.js) schedules a retry
    // with setTimeout and, when it fires after the connection was closed (a test's teardown closes
    // it while a call made by a loop's activity waits out its backoff), throws "Channel has been
    // shut down" from that timer, outside any promise. It belongs to a call nobody awaits any more
    // and says nothing about the test; bench/run.mjs treats it the same way. Anything else still fails the run.
    onUnhandledError: (error) =>
      !(/Channel has been shut down/.test(error.message ?? '') && /grpc-retry/.test(error.stack ?? '')),
  },
});
