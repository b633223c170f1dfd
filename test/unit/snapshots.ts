import fc from 'fast-check';
import { desiredValue, emptyHistory, jsonEqual, msBetween, type Json, type Observation } from '../../src/domain';
import { observation as observationSchema } from '../../src/schemas';
import { D6, MAINTENANCE_OVERRIDE, NOW, SHA_73, later, n24 } from './fixtures';

/*
 * Generated snapshots of N-24 at NOW, and histories to judge them with: shared by the core
 * properties (./properties.test.ts) and the check that the domain decides in the workflow sandbox
 * as it does outside (test/workflow/domain-sandbox.test.ts). Snapshots are dated on both sides of
 * each edge of freshness (AGE_EDGES), a coverage label per edge.
 */

export const intent = n24();
export const KEYS = ['build', 'config', 'app', 'maintenance'] as const;
export type Key = (typeof KEYS)[number];
export const TTL_MS = 60_000;
/**
 * How far ahead of the controller's clock a snapshot may be stamped and still be judged: an agent
 * clock further ahead makes the snapshot's age unknowable (issue 18, the clock-ahead hole).
 */
export const SKEW_MS = 5_000;
const HOUR_MS = 60 * 60_000;

/**
 * Each resource is at its desired value two times in three, else one of the ways it drifts: a
 * uniform pick would put all four at desired once in 144 snapshots, and CONVERGED almost never.
 */
const desiredOr = (key: Key, ...others: Json[]) =>
  fc.oneof(
    { weight: 2 * others.length, arbitrary: fc.constant<Json>(desiredValue(key, intent.resources)) },
    ...others.map((o) => ({ weight: 1, arbitrary: fc.constant<Json>(o) })),
  );
const valueFor: Record<Key, fc.Arbitrary<Json>> = {
  build: desiredOr('build', { version: '7.3', sha256: SHA_73 }, { version: '7.4', sha256: SHA_73 }, null),
  config: desiredOr('config', D6(), null),
  app: desiredOr('app', { build: '7.3', config_sha256: D6() }, { build: '7.4', config_sha256: D6() }, null),
  maintenance: desiredOr('maintenance', true, null),
};
/** Mostly Datum's; an approved override now and then, one without provenance (UNKNOWN) more rarely. */
const override = fc.oneof(
  { weight: 8, arbitrary: fc.constant('none' as const) },
  { weight: 2, arbitrary: fc.constant('proven' as const) },
  { weight: 1, arbitrary: fc.constant('unproven' as const) },
);

/**
 * The snapshot's age at NOW (negative: stamped ahead of the controller's clock). Mostly fresh; then
 * stale up to three TTLs old, ahead within the skew clocks may have, ahead by up to an hour, and
 * each edge the oracle decides on, to the millisecond.
 */
const snapshotAgeArb = fc.oneof(
  { weight: 12, arbitrary: fc.integer({ min: 0, max: TTL_MS }) },
  { weight: 3, arbitrary: fc.integer({ min: TTL_MS + 1, max: 3 * TTL_MS }) },
  { weight: 2, arbitrary: fc.integer({ min: -SKEW_MS, max: -1 }) },
  { weight: 2, arbitrary: fc.integer({ min: -HOUR_MS, max: -SKEW_MS - 1 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, TTL_MS, TTL_MS + 1, -SKEW_MS, -SKEW_MS - 1) },
);

export const snapshotArb: fc.Arbitrary<Observation> = fc
  .record({
    values: fc.record(valueFor),
    markers: fc.record({
      build: fc.constantFrom('m1', 'm2', 'ours:build'),
      config: fc.constantFrom('m1', 'ours:config'),
      app: fc.constantFrom('m1', 'ours:app'),
      maintenance: fc.constant('m1'),
    }),
    overrides: fc.record({ build: override, config: override, app: override, maintenance: override }),
    mode: fc.constantFrom<'observe' | 'enforce'>('observe', 'enforce', 'enforce'),
    observeOnly: fc.subarray([...KEYS]),
    ageMs: snapshotAgeArb,
    obstructed: fc.subarray([...KEYS], { maxLength: 1 }),
    undeclared: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  })
  .map((g) => {
    const overrides: Record<string, unknown> = {};
    for (const k of KEYS) if (g.overrides[k] !== 'none') overrides[k] = g.overrides[k] === 'proven' ? MAINTENANCE_OVERRIDE : null;
    return observationSchema.parse({
      node_id: 'N-24',
      observed_at: later(-g.ageMs),
      heartbeat_at: NOW,
      mode: g.mode,
      resource_modes: Object.fromEntries(g.observeOnly.map((k) => [k, 'observe'])),
      overrides,
      resources: Object.fromEntries(
        KEYS.map((k) => [
          k,
          {
            type: intent.resources[k].type,
            value: g.values[k],
            marker: g.markers[k],
            obstruction:
              g.obstructed.includes(k) && !jsonEqual(g.values[k], desiredValue(k, intent.resources))
                ? 'something is in the way'
                : null,
          },
        ]),
      ),
      undeclared: g.undeclared ? [{ resource_key: 'debug', type: 'flag', value: true, marker: 'x' }] : [],
    });
  });

/** Attempts so far: mostly within the retry budget of 3, sometimes spent. */
export const historyArb = fc
  .record({
    attempt_count: fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min: 0, max: 2 }) },
      { weight: 1, arbitrary: fc.integer({ min: 3, max: 4 }) },
    ),
    action_seq: fc.integer({ min: 0, max: 9 }),
  })
  .map((h) => ({ ...emptyHistory(), ...h }));

/** Which side of each edge of freshness a snapshot is on, as the oracle reads its age. */
export const AGE_EDGES = {
  'exactly TTL old: fresh': (age: number) => age === TTL_MS,
  '1 ms past TTL: stale': (age: number) => age === TTL_MS + 1,
  'stale, up to three TTLs': (age: number) => age > TTL_MS + 1,
  'ahead within the skew: fresh': (age: number) => age < 0 && age > -SKEW_MS,
  'exactly the skew ahead: fresh': (age: number) => age === -SKEW_MS,
  '1 ms beyond the skew ahead: stale': (age: number) => age === -SKEW_MS - 1,
  'ahead beyond the skew, up to an hour: stale': (age: number) => age < -SKEW_MS - 1,
} as const;
export type AgeEdge = keyof typeof AGE_EDGES;
export const edgeOf = (o: Observation): AgeEdge | null => {
  const age = msBetween(o.observed_at, NOW);
  return (Object.keys(AGE_EDGES) as AgeEdge[]).find((edge) => AGE_EDGES[edge](age)) ?? null;
};
