/*
 * The CLI's error types and message shape, without a dependency: main.ts and program.ts load
 * this on every start (`datum --help` included), so it must not bring in zod or Temporal.
 */

/** The contract's "<problem> — fix: <fix>" separator (src/contract/identifiers.ts FIX; a test keeps them equal). */
export const FIX = ' — fix: ';

export const withFix = (problem: string, fix: string): string => `${problem}${FIX}${fix}`;

/** A usage error: printed to stderr with the command's usage, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Exit codes: 0 done (and the fleet is right, for status), 1 a finding or a failure, 2 a usage error. */
export const EXIT = { ok: 0, finding: 1, usage: 2 } as const;
