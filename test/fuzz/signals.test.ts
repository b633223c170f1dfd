import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_SIGNAL_CHARS, MAX_SIGNAL_DEPTH, MAX_SIGNAL_ECHO, type SignalName } from '../../src/contract';
import { parseSignal } from '../../src/domain';
import { RUNS, deep } from './generators';
import { SIGNAL_SCHEMAS } from '../../src/schemas';

/*
 * Fuzzing the three signals' payloads (issue 10, must-show 2). parseSignal runs inside the
 * workflow, on every replay: it must never throw (a throw there fails the workflow task, and a
 * stack overflow does so on every replay), it must accept exactly what the contract's schema
 * accepts, and a rejection names the field and the fix with a bounded echo of the payload.
 */

const digest = fc.stringMatching(/^sha256:[a-f0-9]{64}$/);
const VALID: Record<SignalName, fc.Arbitrary<unknown>> = {
  refreshDesired: fc.record({ generation: fc.integer({ min: 1, max: 2 ** 31 }), digest }),
  resolveConflict: fc.record(
    {
      resource_key: fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,20}$/),
      resolution: fc.constantFrom('retake', 'yield'),
      by: fc.string({ minLength: 1, maxLength: 20 }),
      note: fc.oneof(fc.string({ maxLength: 40 }), fc.constant(null)),
    },
    { requiredKeys: ['resource_key', 'resolution', 'by'] },
  ),
  recheck: fc.constantFrom({}, null, undefined),
};

/** A payload nested `depth` levels, of the kind a hostile sender builds (~2 bytes a level). */
const nested = fc
  .tuple(fc.integer({ min: MAX_SIGNAL_DEPTH + 1, max: 6000 }), fc.constantFrom('array', 'object'))
  .map(([d, kind]) => deep(d, kind));

type Doc = Record<string, unknown>;
const mutated = (name: SignalName) =>
  fc.oneof(
    { weight: 3, arbitrary: VALID[name] },
    // A field replaced by anything JSON, a deeply nested value, or a long string.
    {
      weight: 3,
      arbitrary: fc
        .tuple(
          VALID[name],
          fc.constantFrom('generation', 'digest', 'resource_key', 'resolution', 'by', 'note', 'zz'),
          fc.oneof(fc.jsonValue(), nested, fc.string({ minLength: 200, maxLength: 20_000 })),
        )
        .map(([p, k, v]) => ({ ...((p ?? {}) as Doc), [k]: v })),
    },
    // A field dropped.
    { weight: 1, arbitrary: VALID[name].map((p) => Object.fromEntries(Object.entries((p ?? {}) as Doc).slice(1))) },
    // The whole payload replaced.
    { weight: 2, arbitrary: fc.oneof(fc.jsonValue(), nested, fc.anything()) },
    { weight: 1, arbitrary: nested },
  );

const issues = (name: SignalName, payload: unknown) => {
  // The schema's own verdict, asked only for payloads the iterative walk could measure safely.
  return SIGNAL_SCHEMAS[name].safeParse(payload).success;
};

describe('fuzzing signal payloads', () => {
  for (const name of Object.keys(SIGNAL_SCHEMAS) as SignalName[]) {
    it(`${RUNS} ${name} payloads: accepted exactly when valid, else SIGNAL_REJECTED naming the field, the fix and a bounded echo`, () => {
      fc.assert(
        fc.property(mutated(name), (payload) => {
          const parsed = parseSignal(name, payload);
          if (parsed.ok) {
            expect(issues(name, payload)).toBe(true);
            return;
          }
          expect(parsed.error.startsWith(`${name} payload `)).toBe(true);
          expect(parsed.problems.length).toBeGreaterThan(0);
          for (const p of parsed.problems) expect(p).toMatch(/^\S.*: .+ \(fix: .+\)$/s);
          // Bounded: the echo is clipped, and so is each problem, whatever the payload's size.
          expect(parsed.error.length).toBeLessThan(MAX_SIGNAL_ECHO * 6 + 2000);
          expect(parsed.error.length).toBeLessThan(MAX_SIGNAL_CHARS);
        }),
        { numRuns: RUNS },
      );
    }, 120_000);
  }

  it('a payload nested 4,000 levels deep (~8 KB) is rejected with the cap named, and nothing recursive ran', () => {
    for (const name of Object.keys(SIGNAL_SCHEMAS) as SignalName[]) {
      const parsed = parseSignal(name, deep(4000, 'object'));
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.error).toMatch(new RegExp(`is nested deeper than ${MAX_SIGNAL_DEPTH} levels \\(fix: `));
      // A key as long as the payload allows: the path that names it is clipped too.
      const wide = parseSignal(name, { ['k'.repeat(8000)]: deep(10, 'object') });
      expect(!wide.ok && wide.error.length < 1000).toBe(true);
    }
  });
});
