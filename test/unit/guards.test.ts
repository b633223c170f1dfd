import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  PAYLOAD_FIELD,
  SIGNAL_CHECKS,
  SIGNAL_NAMES,
  isNodeId,
  isResourceKey,
  type Observation,
  type SignalName,
} from '../../src/contract';
import { exactly, nodeId, observation, problemsFromZod, resourceKey, SIGNAL_SCHEMAS } from '../../src/schemas';
import { coverage, propertyRuns, timeoutFor } from './generators';

/*
 * One definition of what is valid. The workflow sandbox and the CLI judge signal payloads and
 * node names with the contract's small checks (no zod in the sandbox, issue 19); the edges parse
 * the same formats with zod (src/schemas). Each check must accept exactly what its schema accepts,
 * and name the same fields when it rejects: generated values, valid ones and ones a field or a
 * character away from valid, are given to both.
 */

const RUNS = propertyRuns('core');

/** Strings near the identifier patterns: valid names, and names one character off. */
const nearName = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,70}$/),
  fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,70}$/),
  fc
    .tuple(fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,10}$/), fc.string({ maxLength: 2 }), fc.nat(12))
    .map(([s, c, i]) => s.slice(0, i) + c + s.slice(i)),
  fc.constantFrom('', '-', '.', '_x', 'N-24\n', 'a'.repeat(63), 'a'.repeat(64), 'ä'),
);
const anyValue = fc.oneof(nearName, fc.jsonValue(), fc.constantFrom(undefined, null, 12, [], {}));

describe('identifier checks agree with their schemas', () => {
  it.each([
    ['isNodeId', isNodeId, nodeId],
    ['isResourceKey', isResourceKey, resourceKey],
  ] as const)(
    `${RUNS} values: %s accepts exactly what its zod schema accepts`,
    (_name, check, schema) => {
      const reached = coverage({ valid: 0.05, invalid: 0.05 });
      fc.assert(
        fc.property(anyValue, (value) => {
          const valid = schema.safeParse(value).success;
          reached.hit(valid ? 'valid' : 'invalid');
          expect(check(value)).toBe(valid);
        }),
        { numRuns: RUNS },
      );
      expect(reached.missed(RUNS)).toEqual([]);
    },
    timeoutFor(RUNS, 1),
  );
});

const digest = fc.oneof(
  fc.stringMatching(/^sha256:[a-f0-9]{64}$/),
  fc.stringMatching(/^sha256:[a-f0-9A-F]{63,65}$/),
  fc.constantFrom('sha256:', 'md5:abc'),
);
const VALID: Record<SignalName, fc.Arbitrary<unknown>> = {
  refreshDesired: fc.record({
    generation: fc.integer({ min: 1, max: 2 ** 31 }),
    digest: fc.stringMatching(/^sha256:[a-f0-9]{64}$/),
  }),
  resolveConflict: fc.record(
    {
      resource_key: fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,20}$/),
      resolution: fc.constantFrom('retake', 'yield'),
      by: fc.string({ minLength: 1, maxLength: 20 }),
      note: fc.oneof(fc.string({ maxLength: 40 }), fc.constant(null), fc.constant(undefined)),
    },
    { requiredKeys: ['resource_key', 'resolution', 'by'] },
  ),
  recheck: fc.constantFrom({}, null, undefined),
};

/** What each field of a payload is given when it is changed: a value of the right kind gone wrong, or of another kind. */
const FIELD_VALUES: Record<string, fc.Arbitrary<unknown>> = {
  generation: fc.oneof(
    fc.integer({ min: -3, max: 3 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom(2 ** 53, 1.5, '12'),
  ),
  digest,
  resource_key: nearName,
  resolution: fc.constantFrom('retake', 'yield', 'Retake', '', 'maybe'),
  by: fc.oneof(fc.string({ maxLength: 3 }), fc.constant('')),
  note: fc.oneof(fc.string({ maxLength: 3 }), fc.constant(null)),
  zz: fc.jsonValue(),
};

type Fields = Record<string, unknown>;
const payloads = (name: SignalName) =>
  fc.oneof(
    { weight: 3, arbitrary: VALID[name] },
    // One field set to a value near its valid ones, or to any value of another kind.
    {
      weight: 4,
      arbitrary: fc
        .tuple(VALID[name], fc.constantFrom(...Object.keys(FIELD_VALUES)), fc.boolean(), fc.jsonValue())
        .chain(([p, field, near, other]) =>
          (near ? FIELD_VALUES[field] : fc.constant(other)).map((v) => ({ ...((p ?? {}) as Fields), [field]: v })),
        ),
    },
    // One field dropped.
    {
      weight: 1,
      arbitrary: fc
        .tuple(VALID[name], fc.nat(4))
        .map(([p, i]) => Object.fromEntries(Object.entries((p ?? {}) as Fields).filter((_, j) => j !== i))),
    },
    // Something else altogether.
    { weight: 1, arbitrary: anyValue },
  );

/** The fields a list of problems names ("(file)", zod's name for the whole input, is the payload's). */
const fieldsNamed = (fields: string[]) => [...new Set(fields.map((f) => (f === '(file)' ? PAYLOAD_FIELD : f)))].sort();

describe('signal checks agree with their schemas', () => {
  it.each(SIGNAL_NAMES)(
    `${RUNS} %s payloads: the check accepts exactly what the schema accepts, and names the same fields`,
    (name) => {
      const reached = coverage({ valid: 0.2, invalid: 0.3 });
      fc.assert(
        fc.property(payloads(name), (payload) => {
          const parsed = SIGNAL_SCHEMAS[name].safeParse(payload);
          const problems = SIGNAL_CHECKS[name](payload);
          reached.hit(parsed.success ? 'valid' : 'invalid');
          expect(problems.length === 0).toBe(parsed.success);
          if (!parsed.success)
            expect(fieldsNamed(problems.map((p) => p.field))).toEqual(
              fieldsNamed(problemsFromZod(parsed.error).map((p) => p.field)),
            );
        }),
        { numRuns: RUNS },
      );
      expect(reached.missed(RUNS)).toEqual([]);
    },
    timeoutFor(RUNS, 2),
  );
});

describe('each schema parses to exactly its contract type', () => {
  it('a schema with a field its type lacks, or without one it has, does not compile', () => {
    // @ts-expect-error: `extra` is not a field of Observation.
    exactly<Observation>()(observation.extend({ extra: z.string() }));
    // @ts-expect-error: Observation's `decisions` is not optional.
    exactly<Observation>()(observation.extend({ decisions: z.record(z.string(), z.never()).optional() }));
    expect(exactly<Observation>()(observation)).toBe(observation);
  });
});
