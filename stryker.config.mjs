// @ts-check
// The mutation check on the safety code (`npm run mutation`, docs/testing.md): StrykerJS changes
// one operator, condition or value at a time in the code that decides whether Datum may act, runs
// the tests that reach it (vitest.mutation.config.mjs), and reports each change no test noticed.
// Not part of `npm test` or CI: a run takes tens of minutes of one core.
//
// Two sets, run on their own with DATUM_MUTATION_SET (`npm run mutation:domain`, `mutation:agent`):
//   domain  the controller's gates: the seven gates and snapshot freshness (gates.ts), the causes
//           that withhold a planned action (authorize.ts), and the repair deadline's decision
//   agent   the agent's refusals at the write: the refusal table (refusals.ts), and the fence,
//           stale-snapshot and compare-and-swap checks at the write (write-checks.ts)
// A line range picks the deadline's clock out of deadline.ts; keep it in step when that file moves.

const SETS = {
  domain: ['src/domain/gates.ts', 'src/domain/authorize.ts', 'src/domain/deadline.ts:25-59'],
  agent: ['src/agent/activities/refusals.ts', 'src/agent/activities/write-checks.ts'],
};

// Unset: domain, so that `npx stryker run` and the tools that load this file (knip) get a set.
const set = process.env.DATUM_MUTATION_SET || 'domain';
if (!(set in SETS)) {
  throw new Error(
    `DATUM_MUTATION_SET=${JSON.stringify(set)} is not a mutation set — fix: give one of ${Object.keys(SETS).join(', ')} (npm run mutation runs each)`,
  );
}

export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'vitest.mutation.config.mjs' },
  mutate: SETS[/** @type {keyof typeof SETS} */ (set)],
  // Each mutant runs only the tests that reach it; module-level mutants (the gate and refusal
  // tables' own wording) would each need the whole tier, and are left out and counted as ignored.
  coverageAnalysis: 'perTest',
  ignoreStatic: true,
  // A changed string is a changed sentence: the detail, recheck and refusal wording, which the
  // ladder's and refusals' tables check by text. Where a string is compared (a mode, a kind), the
  // comparison's own mutants (operator, condition) make the same change cheaper.
  mutator: { excludedMutations: ['StringLiteral'] },
  // The machine is shared: one test process, and slack for a loaded core before a mutant counts as a timeout.
  concurrency: 1,
  timeoutMS: 20_000,
  timeoutFactor: 2,
  // The first run, of every test with coverage, takes minutes on a loaded machine (Stryker's default allows 5).
  dryRunTimeoutMinutes: 30,
  reporters: ['clear-text', 'progress-append-only', 'json', 'html'],
  jsonReporter: { fileName: `test-artifacts/mutation/${set}.json` },
  htmlReporter: { fileName: `test-artifacts/mutation/${set}.html` },
  clearTextReporter: { allowColor: false, logTests: false, maxTestsToLog: 0 },
  // A re-run tests again only the mutants whose code or covering tests changed (`-- --force`: all).
  incremental: true,
  incrementalFile: `test-artifacts/mutation/${set}-incremental.json`,
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  ignorePatterns: ['dist', '.venv', '.datum', 'test-artifacts', 'bench/results', 'examples/fleet/artifacts'],
};
