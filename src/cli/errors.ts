/*
 * The CLI's error types and message shape, without a dependency: main.ts and program.ts load
 * this on every start (`datum --help` included), so it must not bring in zod or Temporal.
 */

/** The one "<problem> — fix: <fix>" shape (src/contract/fix.ts, which imports nothing). */
export { withFix } from '../contract/fix';

/** A usage error: printed to stderr with the command's usage, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/**
 * Exit codes: 0 done (and the fleet is right, for status), 1 a finding or a failure, 2 a usage
 * error, 3 nobody watches the fleet (status, nodes: no controller polls, or the fleet workflow has
 * not looked within its interval).
 */
export const EXIT = { ok: 0, finding: 1, usage: 2, unwatched: 3 } as const;
