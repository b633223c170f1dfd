import { describe, expect, it } from 'vitest';
import {
  decide,
  emptyHistory,
  type ApplyFailure,
  type AuthorityView,
  type BoundIntent,
  type Condition,
  type DecideResult,
  type DecisionRule,
  type Observation,
} from '../../src/domain';
import { DECISION_RULE } from '../../src/contract/patches';
import { applied, authorityOf, later, n24, n24After, n24Before, oursFor, pass, snapshot } from './fixtures';

/*
 * What the mutation check (docs/testing.md) found the other tests let change: the gates' bounds,
 * each on both sides (a snapshot a millisecond on the wrong side of one either drives a write it
 * must not, or blocks a node for nothing), what a closed gate leaves of the repair episode, which
 * REPAIR_DEADLINE_EXCEEDED stops an early pass, whose action a standing refusal withholds, the
 * evidence each gate's condition records, and what an authorized action carries to the agent.
 */

const SEC = 1000;

/** decide() on one snapshot of N-24 already at desired, under the default observation_ttl (60s). */
function judge(pre: Observation, rules?: (rule: DecisionRule) => boolean): DecideResult {
  const intent = n24();
  return decide({ intent, authority: authorityOf(intent), observation: pre, history: emptyHistory(), now: later(0), rules });
}

const said = (r: DecideResult) => [r.decision.convergence_status, r.decision.reason, r.decision.observation_fresh];
const FRESH = ['CONVERGED', 'ALREADY_CONVERGED', true];
const STALE = ['BLOCKED', 'STALE_OBSERVATION', false];

describe('observation_ttl: a snapshot is fresh up to its age limit, as the agent judges it at the write', () => {
  it.each([
    ['exactly observation_ttl old', -60 * SEC, FRESH],
    ['a millisecond past observation_ttl', -60 * SEC - 1, STALE],
  ])('%s', (_name, at, expected) => {
    expect(said(judge(snapshot(n24After(), { at: later(at) })))).toEqual(expected);
  });
});

describe('clock skew: a snapshot may be up to 5s ahead of the controller, and no further', () => {
  it.each([
    ['exactly 5s ahead', 5 * SEC, FRESH],
    ['a millisecond more than 5s ahead', 5 * SEC + 1, STALE],
  ])('%s', (_name, at, expected) => {
    expect(said(judge(snapshot(n24After(), { at: later(at), heartbeat_at: later(at) })))).toEqual(expected);
  });

  it('a loop started before the rule future-snapshot-is-stale judges a snapshot from the future as it did then', () => {
    const ahead = snapshot(n24After(), { at: later(3600 * SEC), heartbeat_at: later(3600 * SEC) });
    expect(said(judge(ahead, (rule) => rule !== DECISION_RULE.futureSnapshotIsStale))).toEqual(FRESH);
    expect(said(judge(ahead))).toEqual(STALE);
  });
});

describe('a closed gate holds the repair episode as it stands', () => {
  // A gate closes on the pass, not on the repair: were it to end the episode, a stale snapshot or a
  // node gone quiet would hand back the spent retry_budget and restart the repair_deadline clock.
  const started = later(-30 * SEC);
  const midRepair = { ...emptyHistory(), attempt_count: 2, episode_started: started };
  it.each([
    ['a stale snapshot', () => snapshot(n24Before(), { at: later(-2 * 60 * SEC) })],
    ['no snapshot', () => null],
  ])('%s keeps attempt_count and episode_started', (_name, pre) => {
    const intent = n24(12, { policy: { repair_deadline: '10m' } });
    const r = decide({ intent, authority: authorityOf(intent), observation: pre(), history: midRepair, now: later(0) });
    expect(r.decision.convergence_status).toBe('BLOCKED');
    expect([r.history.attempt_count, r.history.episode_started]).toEqual([2, started]);
  });
});

describe("repair_deadline: a pass that comes early does not retry what its episode's deadline stopped", () => {
  const started = later(-30 * SEC);
  const intent = n24(12, { policy: { repair_deadline: '10m' } });
  const exceeded = (episode: string): Condition => ({
    type: 'REPAIR_DEADLINE_EXCEEDED',
    resource_key: 'build',
    message: 'Repair of "build" did not converge within repair_deadline 10m',
    evidence: { attempt_count: 2, episode_started: episode, repair_deadline: '10m' },
    tried: [],
    since: later(-SEC),
    resolver: 'operator',
    needs_judgement: true,
  });
  const stale: Condition = {
    type: 'STALE_OBSERVATION',
    resource_key: null,
    message: 'an older pass',
    evidence: {},
    tried: [],
    since: later(-SEC),
    resolver: 'datum',
    needs_judgement: false,
  };
  const judgeWith = (conditions: Condition[]) =>
    decide({
      intent,
      authority: authorityOf(intent),
      observation: snapshot(n24Before()),
      history: { ...emptyHistory(), attempt_count: 1, episode_started: started, conditions },
      now: later(0),
    }).decision.planned_actions.map((p) => [p.resource_key, p.authorized]);
  const all = (authorized: boolean) => ['build', 'app'].map((k) => [k, authorized]);

  it.each([
    ["this episode's REPAIR_DEADLINE_EXCEEDED, among other conditions: withheld", [stale, exceeded(started)], all(false)],
    ["an earlier episode's REPAIR_DEADLINE_EXCEEDED: authorized", [exceeded(later(-60 * 60 * SEC))], all(true)],
    ['another condition only: authorized', [stale], all(true)],
  ])('%s', (_name, conditions, expected) => {
    expect(judgeWith(conditions)).toEqual(expected);
  });
});

describe("a standing refusal withholds the refused action only, not the next generation's", () => {
  it('after the agent refused build at generation 12, generation 13 tries build again at the same marker', async () => {
    const refusal: ApplyFailure = { kind: 'refused', refusal_type: 'ObserveModeRefusal', message: 'observe on the node' };
    const { history } = (
      await pass(snapshot(n24Before()), () => snapshot(n24Before()), {
        answer: (a) => (a.resource_key === 'build' ? refusal : applied(a)),
      })
    ).final;
    expect(Object.keys(history.refused)).toContain('build');
    const at = (intent: BoundIntent) =>
      decide({
        intent,
        authority: authorityOf(intent),
        observation: snapshot(n24Before()),
        history,
        now: later(0),
      }).decision.planned_actions.find((p) => p.resource_key === 'build')?.authorized;
    expect([at(n24(12)), at(n24(13))]).toEqual([false, true]);
  });
});

describe("each closed gate's condition carries the evidence it closed on", () => {
  const intent = n24();
  const closedOn = (o: { pre?: Observation | null; authority?: AuthorityView; bound?: BoundIntent }) => {
    const bound = o.bound ?? intent;
    const r = decide({
      intent: bound,
      authority: o.authority ?? authorityOf(bound),
      observation: o.pre === undefined ? snapshot(n24Before()) : o.pre,
      history: emptyHistory(),
      now: later(0),
    });
    const gate = r.decision.conditions.find((c) => c.type !== 'INVALID_SIGNAL' && c.resource_key === null);
    const evidence = (gate?.evidence ?? {}) as Record<string, unknown>;
    return [
      gate?.type,
      Object.keys(evidence)
        .filter((k) => evidence[k] !== undefined)
        .sort(),
    ];
  };
  it.each([
    ['no snapshot', 'NODE_UNREACHABLE', { pre: null }, ['error']],
    [
      "the agent's config is invalid",
      'AGENT_CONFIG_INVALID',
      { pre: snapshot(n24Before(), { config_error: 'mode: bad' }) },
      ['error'],
    ],
    [
      'the authority cannot be read',
      'INVALID_DESIRED_STATE',
      { authority: { ok: false, error: 'no such file' } as AuthorityView },
      ['error'],
    ],
    [
      'the authority is at a newer generation',
      'STALE_INTENT',
      { authority: { ...authorityOf(intent), generation: 13 } },
      ['authority_digest', 'authority_generation', 'bound_generation'],
    ],
    [
      'the authority went back a generation',
      'STALE_INTENT',
      { bound: n24(13), authority: authorityOf(intent) },
      ['authority_generation', 'bound_generation'],
    ],
    [
      "the generation's content changed",
      'INTENT_DIGEST_MISMATCH',
      { authority: { ...authorityOf(intent), digest: 'sha256:other' } },
      ['authority_digest', 'bound_digest'],
    ],
    [
      'the snapshot is past observation_ttl',
      'STALE_OBSERVATION',
      { pre: snapshot(n24Before(), { at: later(-2 * 60 * SEC) }) },
      ['age', 'heartbeat_at', 'observed_at', 'stale_in_a_row'],
    ],
    [
      'the snapshot is from the future',
      'STALE_OBSERVATION',
      { pre: snapshot(n24Before(), { at: later(60 * SEC) }) },
      ['ahead_by', 'heartbeat_at', 'observed_at', 'stale_in_a_row'],
    ],
  ] as const)('%s: %s', (_name, type, o, keys) => {
    expect(closedOn(o as Parameters<typeof closedOn>[0])).toEqual([type, keys]);
  });
});

describe('what an authorized action carries to the agent', () => {
  const stuck = () => snapshot({ ...n24Before(), markers: oursFor(['build', 'app']) });
  it('each attempt a new action_seq, so the agent tells a retry at the same marker from a replay of the last one', async () => {
    const first = await pass(snapshot(n24Before()), stuck, {});
    const retry = await pass(stuck(), stuck, { history: first.final.history, now: later(10 * SEC) });
    const seqs = (r: DecideResult) => r.decision.authorized_actions.map((a) => a.action_seq);
    expect([seqs(first.first), seqs(retry.first)]).toEqual([
      [1, 1],
      [2, 2],
    ]);
  });

  it('the spec digest of its plan, which the agent compares at the write', () => {
    const intent = n24();
    const d = decide({
      intent,
      authority: authorityOf(intent),
      observation: snapshot(n24Before()),
      history: emptyHistory(),
      now: later(0),
    }).decision;
    const planned = d.planned_actions.filter((p) => p.authorized).map((p) => p.spec_digest);
    expect(planned.every((digest) => typeof digest === 'string' && digest.length > 0)).toBe(true);
    expect(d.authorized_actions.map((a) => a.spec_digest)).toEqual(planned);
  });
});

describe('expires: past it the bound intent is stale, up to it the node is acted on as before', () => {
  const driftedAt = (expires: string | undefined): DecideResult => {
    const intent = { ...n24(), ...(expires === undefined ? {} : { expires }) };
    return decide({
      intent,
      authority: authorityOf(intent),
      observation: snapshot(n24Before(), { at: later(0) }),
      history: emptyHistory(),
      now: later(0),
    });
  };
  const acts = (r: DecideResult) => [r.decision.convergence_status, r.decision.authorized_actions.length > 0];

  it.each([
    ['no expires', undefined],
    ['an expires an hour ahead', later(3600 * SEC)],
    ['an expires exactly now', later(0)],
  ])('%s: the drift is repaired', (_name, expires) => {
    expect(acts(driftedAt(expires))).toEqual(['DRIFTED', true]);
  });

  it('an expires a millisecond past: BLOCKED / STALE_INTENT, nothing authorized, the expiry in its evidence', () => {
    const r = driftedAt(later(-1));
    expect([r.decision.convergence_status, r.decision.reason, r.decision.authorized_actions]).toEqual([
      'BLOCKED',
      'STALE_INTENT',
      [],
    ]);
    const stale = r.decision.conditions.find((c) => c.type === 'STALE_INTENT');
    expect(stale?.evidence).toEqual({ bound_generation: 12, expires: later(-1) });
  });
});

describe('a digest is compared with the authority only within one generation', () => {
  // The README's worked example: the generation-11 loop meets the authority at generation 12,
  // whose content differs. STALE_INTENT says what happened; a digest mismatch would say more
  // than the evidence shows ("raise the generation" when it was raised).
  const raised = (rules?: (rule: DecisionRule) => boolean): string[] => {
    const intent = n24(11);
    const next = n24(12, { workers: 4 });
    const r = decide({
      intent,
      authority: { ok: true, generation: 12, digest: next.digest },
      observation: snapshot(n24After(), { at: later(0) }),
      history: emptyHistory(),
      now: later(0),
      rules,
    });
    return r.decision.conditions.map((c) => c.type).sort();
  };

  it('a raised generation with other content is STALE_INTENT only', () => {
    expect(raised()).toEqual(['STALE_INTENT']);
  });

  it('a loop started before the rule digest-mismatch-within-generation judges as it did then', () => {
    expect(raised((rule) => rule !== DECISION_RULE.digestMismatchWithinGeneration)).toEqual(
      ['INTENT_DIGEST_MISMATCH', 'STALE_INTENT'].sort(),
    );
  });
});

describe('a held node: each planned repair is withheld with the hold as its cause', () => {
  it('the withheld action names who holds the node, until when, and why', () => {
    const intent = n24();
    const hold = { by: 'oncall', reason: 'disk swap CHG-9', since: later(-60 * SEC), until: later(3600 * SEC), identity: null };
    const r = decide({
      intent,
      authority: authorityOf(intent),
      observation: snapshot(n24Before(), { at: later(0) }),
      history: { ...emptyHistory(), hold },
      now: later(0),
    });
    expect(r.decision.authorized_actions).toEqual([]);
    const withheld = r.decision.planned_actions.map((p) => p.withheld_because);
    expect(withheld.length).toBeGreaterThan(0);
    for (const why of withheld)
      expect(why).toBe(`the node is held by oncall until ${later(3600 * SEC)} (disk swap CHG-9): reported, not applied`);
  });
});
