import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidDesiredState } from '../../src/domain';
import { parseDesiredStateText } from '../../src/schemas/documents';
import { PROVENANCE, checkRejection, outcome } from './documents';
import { RUNS, dump, escapingDirectory, escapingPath, hostileAttributes, mutations, validDesired } from './generators';

/*
 * Fuzzing desired state (issue 10, must-show 2): valid documents, mutated the ways a hostile or
 * careless author would. Every case ends as a bound intent or as the typed invalid outcome
 * (InvalidDesiredState, which the authority returns as {ok: false, kind: 'invalid'} and the loop
 * records as INVALID_DESIRED_STATE) whose every problem names a field and a fix: never a raw
 * error, never a crash, and a rejected file binds nothing (no intent, so no action).
 */

describe('fuzzing desired state', () => {
  const typed = [
    ['node'],
    ['generation'],
    ['resources'],
    ['resources', 'build', 'version'],
    ['resources', 'build', 'sha256'],
    ['resources', 'data', 'mode'],
    ['policy'],
  ];
  it(`${RUNS} mutated desired-state files each bind or end as InvalidDesiredState naming the field and the fix`, () => {
    const source = 'desired/nodes/N-24.yaml';
    fc.assert(
      fc.property(mutations(validDesired, typed, [escapingPath, escapingDirectory, hostileAttributes]), (c) => {
        const r = outcome(() => parseDesiredStateText(c.text, source, PROVENANCE), InvalidDesiredState);
        if (r.ok) {
          expect(c.mustReject, `${c.what} was accepted`).toBe(false);
          return;
        }
        checkRejection(c, r.error, source, 'desired state');
      }),
      { numRuns: RUNS },
    );
  }, 120_000);

  it(`${RUNS} unmutated documents each bind`, () => {
    fc.assert(
      fc.property(validDesired, (d) => {
        expect(() => parseDesiredStateText(dump(d), 'd.yaml', PROVENANCE)).not.toThrow();
      }),
      { numRuns: RUNS },
    );
  }, 120_000);
});
