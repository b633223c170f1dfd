import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decide,
  desiredValue,
  emptyHistory,
  jsonEqual,
  msBetween,
  observation as observationSchema,
  type DecideResult,
  type ExecutionEvidence,
  type Json,
  type Observation,
} from '../../src/domain';
import { D6, MAINTENANCE_OVERRIDE, NOW, SHA_73, authorityOf, later, n24 } from './fixtures';

/*
 * Invariants over generated snapshots of N-24. The oracle below is written independently of
 * classify/decide: it reads the snapshot the way an auditor would.
 */

const intent = n24();
const KEYS = ['build', 'config', 'app', 'maintenance'] as const;
type Key = (typeof KEYS)[number];
const TTL_MS = 60_000;

const valueFor: Record<Key, fc.Arbitrary<Json>> = {
  build: fc.constantFrom<Json>(desiredValue('build', intent.resources), { version: '7.3', sha256: SHA_73 }, { version: '7.4', sha256: SHA_73 }, null),
  config: fc.constantFrom<Json>(desiredValue('config', intent.resources), D6(), null),
  app: fc.constantFrom<Json>(desiredValue('app', intent.resources), { build: '7.3', config_sha256: D6() }, { build: '7.4', config_sha256: D6() }, null),
  maintenance: fc.constantFrom<Json>(false, true, null),
};
const override = fc.constantFrom<'none' | 'proven' | 'unproven'>('none', 'none', 'proven', 'unproven');

const snapshotArb: fc.Arbitrary<Observation> = fc
  .record({
    values: fc.record(valueFor),
    markers: fc.record({ build: fc.constantFrom('m1', 'm2', 'ours:build'), config: fc.constantFrom('m1', 'ours:config'), app: fc.constantFrom('m1', 'ours:app'), maintenance: fc.constant('m1') }),
    overrides: fc.record({ build: override, config: override, app: override, maintenance: override }),
    mode: fc.constantFrom<'observe' | 'enforce'>('observe', 'enforce'),
    observeOnly: fc.subarray([...KEYS]),
    ageMs: fc.integer({ min: 0, max: 3 * TTL_MS }),
    obstructed: fc.subarray([...KEYS], { maxLength: 1 }),
    undeclared: fc.boolean(),
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
            obstruction: g.obstructed.includes(k) && !jsonEqual(g.values[k], desiredValue(k, intent.resources)) ? 'something is in the way' : null,
          },
        ]),
      ),
      undeclared: g.undeclared ? [{ resource_key: 'debug', type: 'flag', value: true, marker: 'x' }] : [],
    });
  });

const historyArb = fc.record({ attempt_count: fc.integer({ min: 0, max: 4 }), action_seq: fc.integer({ min: 0, max: 9 }) }).map((h) => ({ ...emptyHistory(), ...h }));

/** Pre-action decision, then (if it acted) a post-action decision on an arbitrary fresh probe. */
const passArb = fc.record({ pre: snapshotArb, post: snapshotArb, history: historyArb, outcome: fc.constantFrom<ExecutionEvidence['outcome']>('applied', 'replayed', 'refused', 'failed') });

function run(g: { pre: Observation; post: Observation; history: ReturnType<typeof emptyHistory>; outcome: ExecutionEvidence['outcome'] }): DecideResult[] {
  const authority = authorityOf(intent);
  const first = decide({ intent, authority, observation: g.pre, history: g.history, now: NOW });
  if (first.decision.authorized_actions.length === 0) return [first];
  const evidence: ExecutionEvidence[] = first.decision.authorized_actions.map((a) => ({
    resource_key: a.resource_key,
    action: a.action,
    idempotency_key: a.idempotency_key,
    outcome: g.outcome,
    executed_at: NOW,
    marker_after: g.outcome === 'refused' ? null : `ours:${a.resource_key}`,
    detail: 'generated',
    refusal: g.outcome === 'refused' ? 'refused by a generated agent' : null,
  }));
  const final = decide({ intent, authority, observation: g.post, history: g.history, now: NOW, acted: { planned: first.decision.planned_actions, actions: first.decision.authorized_actions, evidence, pre: g.pre } });
  return [first, final];
}

const ownedByOperatorOrUnknown = (o: Observation, key: string) => Object.prototype.hasOwnProperty.call(o.overrides, key) || !(key in intent.resources);
const enforced = (o: Observation, key: string) => o.mode === 'enforce' && o.resource_modes[key] !== 'observe';
/**
 * What a resource must show to count as converged. A service must run the desired build and
 * config, except that an operator-owned release or config is taken as it is on disk.
 */
function expected(o: Observation, key: Key): Json {
  if (key !== 'app') return desiredValue(key, intent.resources);
  const want = desiredValue('app', intent.resources) as { build: Json; config_sha256: Json };
  const onDisk = (k: Key) => o.resources[k].value;
  const build = ownedByOperatorOrUnknown(o, 'build') ? ((onDisk('build') as { version?: Json } | null)?.version ?? null) : want.build;
  const config = ownedByOperatorOrUnknown(o, 'config') ? onDisk('config') : want.config_sha256;
  return { build, config_sha256: config };
}
const fresh = (o: Observation) => msBetween(o.observed_at, NOW) <= TTL_MS;

describe('invariants over generated snapshots', () => {
  it('no action for an OPERATOR_OWNED or UNKNOWN resource', () => {
    fc.assert(
      fc.property(snapshotArb, historyArb, (obs, history) => {
        const { decision } = decide({ intent, authority: authorityOf(intent), observation: obs, history, now: NOW });
        for (const a of decision.authorized_actions) expect(ownedByOperatorOrUnknown(obs, a.resource_key)).toBe(false);
        const notManaged = decision.resources.filter((r) => r.ownership !== 'MANAGED').map((r) => r.resource_key);
        expect(decision.planned_actions.filter((p) => notManaged.includes(p.resource_key))).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });

  it('no action in observe mode, for the host or the resource', () => {
    fc.assert(
      fc.property(snapshotArb, historyArb, (obs, history) => {
        const { decision } = decide({ intent, authority: authorityOf(intent), observation: obs, history, now: NOW });
        for (const a of decision.authorized_actions) expect(enforced(obs, a.resource_key)).toBe(true);
        if (obs.mode === 'observe') expect(decision.authorized_actions).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });

  it('no action from a stale snapshot', () => {
    fc.assert(
      fc.property(snapshotArb, historyArb, (obs, history) => {
        const { decision } = decide({ intent, authority: authorityOf(intent), observation: obs, history, now: NOW });
        if (!fresh(obs)) {
          expect(decision.authorized_actions).toEqual([]);
          expect(decision.convergence_status).toBe('BLOCKED');
          expect(decision.reason).toBe('STALE_OBSERVATION');
        }
      }),
      { numRuns: 500 },
    );
  });

  it('CONVERGED only when a fresh snapshot matches every enforced managed resource', () => {
    // Extra runs: the interesting cases (an overridden dependency of the service) are rare.
    fc.assert(
      fc.property(passArb, (g) => {
        const decisions = run(g);
        decisions.forEach((d, i) => {
          if (d.decision.convergence_status !== 'CONVERGED') return;
          const judged = i === 0 ? g.pre : g.post;
          expect(fresh(judged)).toBe(true);
          expect(judged.undeclared).toEqual([]);
          for (const key of KEYS) {
            if (ownedByOperatorOrUnknown(judged, key)) {
              expect(judged.overrides[key]).not.toBeNull();
              continue;
            }
            expect(jsonEqual(judged.resources[key].value, expected(judged, key)), `${key} must be at desired`).toBe(true);
          }
        });
      }),
      { numRuns: 5000 },
    );
  });

  it('a refused or failed apply is never reported as CONVERGED_AFTER_REPAIR without a matching probe', () => {
    fc.assert(
      fc.property(passArb, (g) => {
        const decisions = run(g);
        const last = decisions[decisions.length - 1].decision;
        if (decisions.length === 2 && g.outcome === 'refused') expect(last.convergence_status).not.toBe('CONVERGED');
      }),
      { numRuns: 300 },
    );
  });
});
