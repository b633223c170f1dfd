import { describe, expect, it } from 'vitest';
import {
  decide,
  emptyHistory,
  evidenceOfFailure,
  type ApplyFailure,
  type AuthorityView,
  type BoundIntent,
  type DecideResult,
  type ExecutionEvidence,
  type History,
  type Observation,
  type RecheckTriggerKind,
} from '../../src/domain';
import { GATES } from '../../src/domain/gates';
import { LADDER } from '../../src/domain/ladder';
import {
  D6,
  D7,
  NOW,
  SHA_74,
  applied,
  authorityOf,
  later,
  n24,
  n24After,
  n24Before,
  oursFor,
  pass,
  snapshot,
  type NodeState,
} from './fixtures';

/*
 * The decision's two tables, row by row: every gate and every rung of the status ladder has one
 * named row (the evidence that triggers it and what it decides), and every pair of adjacent rungs
 * has a row showing which one wins when both hold, and that the lower one decides once the
 * upper one's evidence is gone. Adding, dropping or reordering a rung fails here until the
 * table below says so.
 */

const MIN = 60_000;

interface Expect {
  status: string;
  reason: string;
  trigger: RecheckTriggerKind;
  /** Tells apart rungs that share a status and reason. */
  detail?: RegExp;
}

interface Row extends Expect {
  name: string;
  run: () => DecideResult | Promise<DecideResult>;
}

const expectDecision = (r: DecideResult, e: Expect) => {
  const d = r.decision;
  expect([d.convergence_status, d.reason, d.recheck_trigger.trigger]).toEqual([e.status, e.reason, e.trigger]);
  if (e.detail) expect(d.reason_detail).toMatch(e.detail);
};

/** decide() on one pre-action snapshot: what a pass decides before it acts, and all it decides when nothing is authorized. */
function judge(
  pre: Observation | null,
  o: { intent?: BoundIntent; authority?: AuthorityView; history?: History; unreachable?: string } = {},
): DecideResult {
  const intent = o.intent ?? n24();
  return decide({
    intent,
    authority: o.authority ?? authorityOf(intent),
    observation: pre,
    unreachable: o.unreachable,
    history: o.history ?? emptyHistory(),
    now: NOW,
  });
}

/**
 * The loop's real pass (src/domain/pass.ts, through the fixtures' node): the node answers `pre`,
 * its agent answers each authorized action as `answer` says (null: applied, leaving our
 * marker), and the fresh probe answers `post`. Like the loop, the pass stops at the first action
 * refused or failed and records the rest as skipped. The pass's final decision.
 */
async function acting(
  pre: Observation,
  post: Observation,
  answer: (key: string) => ApplyFailure | null = () => null,
  history = emptyHistory(),
  intent = n24(),
): Promise<DecideResult> {
  const r = await pass(pre, () => post, { intent, history, answer: (a) => answer(a.resource_key) ?? applied(a) });
  expect(r.first.decision.authorized_actions.length, 'the pre-action decision must authorize something').toBeGreaterThan(0);
  return r.final;
}

/**
 * decide() after acting, on evidence built by hand: only for what no pass hands over (an action
 * with no evidence at all, two refusals in one batch, a batch skipped whole), which the ladder
 * must still order. `report` gives each action's evidence: a refusal or failure as the pass records
 * it, fields over an applied action's, or null (none came back).
 */
function handBuilt(
  pre: Observation,
  post: Observation,
  report: (key: string) => ApplyFailure | Partial<ExecutionEvidence> | null,
): DecideResult {
  const intent = n24();
  const first = decide({ intent, authority: authorityOf(intent), observation: pre, history: emptyHistory(), now: NOW });
  const evidence = first.decision.authorized_actions.flatMap((a): ExecutionEvidence[] => {
    const r = report(a.resource_key);
    if (r === null) return [];
    return ['kind' in r ? evidenceOfFailure(a, r, NOW) : { ...applied(a), ...r }];
  });
  return decide({
    intent,
    authority: authorityOf(intent),
    observation: post,
    history: emptyHistory(),
    now: NOW,
    acted: { planned: first.decision.planned_actions, actions: first.decision.authorized_actions, evidence, pre },
  });
}

const refused: ApplyFailure = {
  kind: 'refused',
  refusal_type: 'ObserveModeRefusal',
  message: 'the resource is set to observe on the node',
};
/** The agent's StaleSnapshotRefusal: the plan's snapshot was past observation_ttl when the write came. */
const staleAtWrite: ApplyFailure = {
  kind: 'refused',
  refusal_type: 'StaleSnapshotRefusal',
  message: 'the snapshot is 11m old at the moment of the write, past observation_ttl 60s',
};
const failed: ApplyFailure = { kind: 'failed', detail: 'exit 1' };
const skipped: Partial<ExecutionEvidence> = {
  outcome: 'skipped',
  marker_after: null,
  detail: 'not attempted: an earlier action of the batch failed',
};

// The states the rows are built from (N-24 of the seed; maintenance is operator-owned throughout).
const before = () => snapshot(n24Before());
const after = () => snapshot({ ...n24After(), markers: oursFor(['build', 'app']) });
/** Probe 4: the agent says it applied build and app, and the fresh probe shows our markers on the old values. */
const unchanged = () => snapshot({ ...n24Before(), markers: oursFor(['build', 'app']) });
const overwritten = () => snapshot({ ...n24Before(), markers: { build: 'someone-else', app: 'ours:app' } });
const obstructed = (state: NodeState, opts: Parameters<typeof snapshot>[1] = {}) => {
  const o = snapshot(state, opts);
  o.resources.config = {
    type: 'file',
    value: null,
    marker: 'dir:1',
    obstruction: 'a directory stands at etc/app/config.json',
    detail: { kind: 'directory' },
  };
  return o;
};
const debugFlag = { undeclared: [{ resource_key: 'debug', type: 'flag' as const, value: true, marker: 'flag:9' }] };
const spent = (attempts: number) => ({ ...emptyHistory(), attempt_count: attempts });
/** N-24 with a time budget per repair episode (the default backoff waits 5s before the first retry). */
const deadline = (d: string) => n24(12, { policy: { repair_deadline: d } });
/** Config was repaired three times in the last hour (policy.writer_repairs 3 within writer_horizon 24h), each time from another writer's D6. */
const configRepairedThrice = (): History => ({
  ...emptyHistory(),
  repair_trail: {
    'file:etc/app/config.json': [45, 30, 15].map((ago) => ({
      resource_key: 'config',
      found: { at: later(-ago * MIN), value: D6(), marker: `file:writer-${ago}` },
      repaired: { at: later(-ago * MIN + 1000), value: D7(), marker: 'ours:config' },
    })),
  },
});
/** Config at D6 again, under another writer's marker; the rest as after the seed's repair. */
const configDriftedAgain = (state: NodeState = n24After(), build = 'ours:build') =>
  snapshot({ ...state, config: D6(), markers: { ...oursFor(['app']), build, config: 'file:writer-now' } });
/** Build, proven at 7.4 by a repair a minute ago, flipped back to 7.3 (within conflict_window). */
const buildFlipped = (): History => ({
  ...configRepairedThrice(),
  repaired: { build: { at: later(-MIN), value: { version: '7.4', sha256: SHA_74 }, marker: 'ours:build' } },
});
/** A history with an operator's hold on the node (`datum hold N-24 --by oncall --reason ...`). */
const held = (): History => ({
  ...emptyHistory(),
  hold: { by: 'oncall', reason: 'disk swap CHG-1234', since: NOW, until: null, identity: 'oncall@laptop' },
});

/** The history after the agent refused build and app: the refusal stands until something about it changes. */
const afterRefusal = async () => (await acting(before(), before(), () => refused)).history;
/** Only build is refused (the pass then skips app): config and app are the drift. */
const afterBuildRefused = async () => (await acting(before(), before(), (k) => (k === 'build' ? refused : null))).history;

/** N-24 generation 12 whose expires passed an hour before NOW; one that expires later is as good as none. */
const expired = (expires = later(-60 * MIN)) => ({ ...n24(), expires });

const gateRows: Row[] = [
  {
    name: 'NODE_UNREACHABLE: no snapshot',
    run: () => judge(null, { unreachable: 'no agent polled within node_timeout 30s' }),
    status: 'BLOCKED',
    reason: 'NODE_UNREACHABLE',
    trigger: 'FRESH_OBSERVATION',
  },
  {
    name: "AGENT_CONFIG_INVALID: the snapshot carries the agent's config error",
    run: () => judge(snapshot(n24Before(), { config_error: 'reconciliation.mode: must be observe or enforce' })),
    status: 'BLOCKED',
    reason: 'AGENT_CONFIG_INVALID',
    trigger: 'AGENT_CONFIG_CHANGE',
  },
  {
    name: 'INVALID_DESIRED_STATE: the authority cannot be read',
    run: () => judge(before(), { authority: { ok: false, error: 'generation is missing' } }),
    status: 'BLOCKED',
    reason: 'INVALID_DESIRED_STATE',
    trigger: 'DESIRED_STATE_CHANGE',
  },
  {
    name: 'STALE_INTENT: the authority is at a newer generation',
    run: () => judge(before(), { intent: n24(11), authority: authorityOf(n24(12)) }),
    status: 'BLOCKED',
    reason: 'STALE_INTENT',
    trigger: 'REFRESHED_INTENT',
  },
  {
    name: 'AUTHORITY_REGRESSED: the authority went back to an older generation',
    run: () => judge(before(), { intent: n24(12), authority: authorityOf(n24(11)) }),
    status: 'BLOCKED',
    reason: 'AUTHORITY_REGRESSED',
    trigger: 'DESIRED_STATE_CHANGE',
  },
  {
    name: 'INTENT_DIGEST_MISMATCH: same generation, different content',
    run: () => judge(before(), { authority: authorityOf(n24(12, { workers: 16 })) }),
    status: 'BLOCKED',
    reason: 'INTENT_DIGEST_MISMATCH',
    trigger: 'DESIRED_STATE_CHANGE',
  },
  {
    name: 'STALE_INTENT: the bound generation is past its expires (a freeze), the node still observed and shown',
    run: () => {
      const r = judge(before(), { intent: expired() });
      expect(r.decision.resources.map((x) => [x.resource_key, x.drift])).toContainEqual(['build', true]);
      expect(r.decision.reason_detail).toMatch(
        /^Generation 12 expired at 2026-11-29T11:00:00.000Z \(its expires:\): stale intent/,
      );
      return r;
    },
    status: 'BLOCKED',
    reason: 'STALE_INTENT',
    trigger: 'REFRESHED_INTENT',
  },
  {
    name: 'STALE_OBSERVATION: a snapshot older than observation_ttl, with a fresh heartbeat',
    run: () => judge(snapshot(n24Before(), { at: later(-2 * MIN), heartbeat_at: NOW })),
    status: 'BLOCKED',
    reason: 'STALE_OBSERVATION',
    trigger: 'FRESH_OBSERVATION',
  },
];

const ladderRows: Row[] = [
  {
    name: 'CONFLICT: the marker moved after our own write',
    run: () => acting(before(), overwritten()),
    status: 'CONFLICT',
    reason: 'CONFLICTING_WRITER',
    trigger: 'OPERATOR_RESOLUTION',
  },
  {
    name: 'CONFLICT / REPEATED_DRIFT: config drifts again after 3 repairs within writer_horizon, each slower than conflict_window',
    run: () => judge(configDriftedAgain(), { history: configRepairedThrice() }),
    status: 'CONFLICT',
    reason: 'REPEATED_DRIFT',
    trigger: 'OPERATOR_RESOLUTION',
  },
  {
    name: 'ACTION_REFUSED (this pass): the agent refused the repair',
    run: () => acting(before(), before(), () => refused),
    status: 'BLOCKED',
    reason: 'ACTION_REFUSED',
    trigger: 'FRESH_OBSERVATION',
    detail: /^The agent refused "build": ObserveModeRefusal: the resource is set to observe/,
  },
  {
    name: 'STALE_OBSERVATION (at the write): the agent refused because the batch outlived its snapshot',
    run: () => acting(before(), before(), () => staleAtWrite),
    status: 'BLOCKED',
    reason: 'STALE_OBSERVATION',
    trigger: 'FRESH_OBSERVATION',
    detail: /older than observation_ttl 60s at the moment of the write/,
  },
  {
    name: 'REPAIR_DEADLINE_EXCEEDED (after acting): the repair did not take, and its retry could only come after repair_deadline',
    run: () => acting(before(), unchanged(), () => null, emptyHistory(), deadline('3s')),
    status: 'BLOCKED',
    reason: 'REPAIR_DEADLINE_EXCEEDED',
    trigger: 'FRESH_OBSERVATION',
    detail: /repair_deadline of 3s passes at .*, before the next retry could run/,
  },
  {
    name: 'RETRY / ACTION_INEFFECTIVE: applied, and the probe still differs with our own marker (probe 4)',
    run: () => acting(before(), unchanged()),
    status: 'RETRY',
    reason: 'ACTION_INEFFECTIVE',
    trigger: 'TIMER',
  },
  {
    name: 'RETRY / ACTION_FAILED: every action failed, budget remains',
    run: () => acting(before(), before(), () => failed),
    status: 'RETRY',
    reason: 'ACTION_FAILED',
    trigger: 'TIMER',
  },
  {
    name: 'RETRY_BUDGET_EXHAUSTED (after acting): the last attempt of the budget did not take',
    run: () => acting(before(), unchanged(), () => null, spent(2)),
    status: 'BLOCKED',
    reason: 'RETRY_BUDGET_EXHAUSTED',
    trigger: 'FRESH_OBSERVATION',
    detail: /Datum stops and says so instead of looping/,
  },
  {
    name: 'RETRY_BUDGET_EXHAUSTED (before acting): the budget is spent, nothing is authorized',
    run: () => judge(before(), { history: spent(3) }),
    status: 'BLOCKED',
    reason: 'RETRY_BUDGET_EXHAUSTED',
    trigger: 'FRESH_OBSERVATION',
    detail: /nothing more is tried/,
  },
  {
    name: 'ACTION_REFUSED (standing): refused before, nothing about it changed, nothing else may run',
    run: async () => judge(before(), { history: await afterRefusal() }),
    status: 'BLOCKED',
    reason: 'ACTION_REFUSED',
    trigger: 'FRESH_OBSERVATION',
    detail: /nothing about it has changed since/,
  },
  {
    name: 'DRIFTED / DRIFT_DETECTED: managed drift, actions authorized',
    run: () => judge(before()),
    status: 'DRIFTED',
    reason: 'DRIFT_DETECTED',
    trigger: 'NONE',
  },
  {
    name: 'RETRY / DRIFT_DETECTED: the repair took, but config drifted meanwhile',
    run: () => acting(before(), snapshot({ ...n24After(), config: D6(), markers: oursFor(['build', 'app']) })),
    status: 'RETRY',
    reason: 'DRIFT_DETECTED',
    trigger: 'TIMER',
  },
  {
    name: 'DESTRUCTIVE_REPAIR_REQUIRED: a directory stands where the config file belongs',
    run: () => judge(obstructed(n24After())),
    status: 'BLOCKED',
    reason: 'DESTRUCTIVE_REPAIR_REQUIRED',
    trigger: 'OPERATOR_RESOLUTION',
  },
  {
    name: 'UNKNOWN_OWNERSHIP: a flag on the node that nobody declared',
    run: () => judge(snapshot(n24After(), debugFlag)),
    status: 'BLOCKED',
    reason: 'UNKNOWN_OWNERSHIP',
    trigger: 'OPERATOR_RESOLUTION',
  },
  {
    name: 'OBSERVE_MODE_DRIFT: managed drift on a host in observe mode',
    run: () => judge(snapshot(n24Before(), { mode: 'observe' })),
    status: 'DRIFTED',
    reason: 'OBSERVE_MODE_DRIFT',
    trigger: 'AGENT_CONFIG_CHANGE',
  },
  {
    name: 'HELD: managed drift on a node an operator holds (`datum hold`): reported, not repaired',
    run: () => judge(before(), { history: held() }),
    status: 'DRIFTED',
    reason: 'HELD',
    trigger: 'OPERATOR_RESOLUTION',
  },
  {
    name: 'DEPENDENCY_BLOCKED (guard): enforced drift nothing above explains (acted, but no evidence came back)',
    run: () => handBuilt(before(), before(), () => null),
    status: 'BLOCKED',
    reason: 'DEPENDENCY_BLOCKED',
    trigger: 'FRESH_OBSERVATION',
  },
  {
    name: 'CONVERGED_AFTER_REPAIR: a fresh probe shows the repair took',
    run: () => acting(before(), after()),
    status: 'CONVERGED',
    reason: 'CONVERGED_AFTER_REPAIR',
    trigger: 'TIMER',
  },
  {
    name: 'ALREADY_CONVERGED: a fresh snapshot at desired, nothing to do',
    run: () => judge(after()),
    status: 'CONVERGED',
    reason: 'ALREADY_CONVERGED',
    trigger: 'TIMER',
  },
];

describe('the tables are what the rows say', () => {
  it('one row per gate, in order', () => {
    expect(GATES.map((g) => g.reason)).toEqual(gateRows.map((r) => r.reason));
    expect(GATES.map((g) => g.trigger)).toEqual(gateRows.map((r) => r.trigger));
  });
  it('one row per rung of the ladder, in order', () => {
    expect(LADDER.map((r) => [r.status, r.reason, r.trigger])).toEqual(ladderRows.map((r) => [r.status, r.reason, r.trigger]));
  });
  it('every gate and rung says why it outranks the next', () => {
    for (const r of [...GATES, ...LADDER]) expect(r.outranks.length, r.reason).toBeGreaterThan(20);
  });
});

describe('gates, row by row', () => {
  it.each(gateRows)('$name', async (row) => {
    const r = await row.run();
    expectDecision(r, row);
    expect(r.decision.authorized_actions).toEqual([]);
    expect(r.decision.conditions.map((c) => c.type)).toContain(GATES.find((g) => g.reason === row.reason)?.condition);
  });
});

describe('clock skew: a snapshot from the future', () => {
  const skewRows: Row[] = [
    {
      // Issue 18 (suspected, confirmed): an agent clock an hour ahead made a snapshot look fresh for
      // an hour past its TTL, and a node already at desired was CONVERGED from it.
      name: 'STALE_OBSERVATION: a snapshot stamped an hour ahead of the controller (the agent clock runs ahead)',
      run: () => judge(snapshot(n24After(), { at: later(60 * MIN), heartbeat_at: later(60 * MIN) })),
      status: 'BLOCKED',
      reason: 'STALE_OBSERVATION',
      trigger: 'FRESH_OBSERVATION',
    },
    {
      name: 'a snapshot a second ahead is within clock skew: fresh',
      run: () => judge(snapshot(n24After(), { at: later(1000) })),
      status: 'CONVERGED',
      reason: 'ALREADY_CONVERGED',
      trigger: 'TIMER',
    },
  ];
  it.each(skewRows)('$name', async (row) => {
    const r = await row.run();
    expectDecision(r, row);
    expect(r.decision.observation_fresh).toBe(row.status === 'CONVERGED');
  });
  it('says the agent clock runs ahead, by how much', () => {
    const r = judge(snapshot(n24After(), { at: later(60 * MIN) }));
    expect(r.decision.reason_detail).toMatch(
      /observed_at is 3600s ahead of the controller's clock, more than the 5s clocks may disagree/,
    );
  });
});

describe('the ladder, rung by rung', () => {
  it.each(ladderRows)('$name', async (row) => expectDecision(await row.run(), row));
});

interface Precedence {
  name: string;
  /** Evidence for both rungs: the upper one decides. */
  both: () => DecideResult | Promise<DecideResult>;
  upper: Expect;
  /** The same without the upper rung's evidence: the lower one decides. */
  without: () => DecideResult | Promise<DecideResult>;
  lower: Expect;
}

const gate = (reason: string, trigger: RecheckTriggerKind): Expect => ({ status: 'BLOCKED', reason, trigger });
const stale = (o: Parameters<typeof snapshot>[1] = {}) => snapshot(n24Before(), { at: later(-2 * MIN), heartbeat_at: NOW, ...o });

const gatePrecedence: Precedence[] = [
  {
    name: 'NODE_UNREACHABLE over INVALID_DESIRED_STATE',
    both: () => judge(null, { authority: { ok: false, error: 'unreadable' } }),
    upper: gate('NODE_UNREACHABLE', 'FRESH_OBSERVATION'),
    without: () => judge(before(), { authority: { ok: false, error: 'unreadable' } }),
    lower: gate('INVALID_DESIRED_STATE', 'DESIRED_STATE_CHANGE'),
  },
  {
    name: 'AGENT_CONFIG_INVALID over INVALID_DESIRED_STATE',
    both: () => judge(snapshot(n24Before(), { config_error: 'bad yaml' }), { authority: { ok: false, error: 'unreadable' } }),
    upper: gate('AGENT_CONFIG_INVALID', 'AGENT_CONFIG_CHANGE'),
    without: () => judge(before(), { authority: { ok: false, error: 'unreadable' } }),
    lower: gate('INVALID_DESIRED_STATE', 'DESIRED_STATE_CHANGE'),
  },
  {
    name: 'INVALID_DESIRED_STATE over STALE_OBSERVATION',
    both: () => judge(stale(), { authority: { ok: false, error: 'unreadable' } }),
    upper: gate('INVALID_DESIRED_STATE', 'DESIRED_STATE_CHANGE'),
    without: () => judge(stale()),
    lower: gate('STALE_OBSERVATION', 'FRESH_OBSERVATION'),
  },
  {
    name: 'STALE_INTENT over INTENT_DIGEST_MISMATCH (a newer generation also has another digest)',
    both: () => judge(before(), { intent: n24(11), authority: authorityOf(n24(12)) }),
    upper: gate('STALE_INTENT', 'REFRESHED_INTENT'),
    without: () => judge(before(), { intent: n24(11), authority: authorityOf(n24(11, { workers: 16 })) }),
    lower: gate('INTENT_DIGEST_MISMATCH', 'DESIRED_STATE_CHANGE'),
  },
  {
    name: 'AUTHORITY_REGRESSED over INTENT_DIGEST_MISMATCH (an older generation also has another digest)',
    both: () => judge(before(), { intent: n24(12), authority: authorityOf(n24(11)) }),
    upper: gate('AUTHORITY_REGRESSED', 'DESIRED_STATE_CHANGE'),
    without: () => judge(before(), { authority: authorityOf(n24(12, { workers: 16 })) }),
    lower: gate('INTENT_DIGEST_MISMATCH', 'DESIRED_STATE_CHANGE'),
  },
  {
    name: 'INTENT_DIGEST_MISMATCH over STALE_OBSERVATION',
    both: () => judge(stale(), { authority: authorityOf(n24(12, { workers: 16 })) }),
    upper: gate('INTENT_DIGEST_MISMATCH', 'DESIRED_STATE_CHANGE'),
    without: () => judge(stale()),
    lower: gate('STALE_OBSERVATION', 'FRESH_OBSERVATION'),
  },
  {
    name: 'INTENT_DIGEST_MISMATCH over an expired intent',
    both: () => judge(before(), { intent: expired(), authority: authorityOf(n24(12, { workers: 16 })) }),
    upper: gate('INTENT_DIGEST_MISMATCH', 'DESIRED_STATE_CHANGE'),
    without: () => judge(before(), { intent: expired() }),
    lower: gate('STALE_INTENT', 'REFRESHED_INTENT'),
  },
  {
    name: 'an expired intent over STALE_OBSERVATION',
    both: () => judge(stale(), { intent: expired() }),
    upper: gate('STALE_INTENT', 'REFRESHED_INTENT'),
    without: () => judge(stale()),
    lower: gate('STALE_OBSERVATION', 'FRESH_OBSERVATION'),
  },
  {
    name: 'STALE_OBSERVATION over the ladder',
    both: () => judge(stale()),
    upper: gate('STALE_OBSERVATION', 'FRESH_OBSERVATION'),
    without: () => judge(before()),
    lower: { status: 'DRIFTED', reason: 'DRIFT_DETECTED', trigger: 'NONE' },
  },
];

const rung = (i: number): Expect => {
  const row = ladderRows[i];
  if (!row) throw new Error(`no ladder row ${i}`);
  return { status: row.status, reason: row.reason, trigger: row.trigger, detail: row.detail };
};

/** Rungs `at` and `at + 1` of the ladder. */
const adjacent = (
  at: number,
  p: Omit<Precedence, 'upper' | 'lower'> & { upperDetail?: RegExp; lowerDetail?: RegExp },
): Precedence & { at: number } => ({
  ...p,
  at,
  upper: { ...rung(at), ...(p.upperDetail ? { detail: p.upperDetail } : {}) },
  lower: { ...rung(at + 1), ...(p.lowerDetail ? { detail: p.lowerDetail } : {}) },
});

const ladderPrecedence = [
  adjacent(0, {
    name: 'CONFLICTING_WRITER over REPEATED_DRIFT: build flipped within conflict_window, config drifted again after 3 repairs',
    both: () => judge(configDriftedAgain({ ...n24After(), build: '7.3' }, 'someone-else'), { history: buildFlipped() }),
    without: () => judge(configDriftedAgain(), { history: buildFlipped() }),
  }),
  adjacent(2, {
    name: 'ACTION_REFUSED over STALE_OBSERVATION at the write: app refused, build refused for a stale snapshot',
    both: () => handBuilt(before(), before(), (k) => (k === 'app' ? refused : staleAtWrite)),
    upperDetail: /^The agent refused "app"/,
    without: () => acting(before(), before(), () => staleAtWrite),
  }),
  adjacent(3, {
    name: 'STALE_OBSERVATION at the write over REPAIR_DEADLINE_EXCEEDED: app refused for a stale snapshot, build did not take, its retry would come after repair_deadline',
    both: () => acting(before(), unchanged(), (k) => (k === 'app' ? staleAtWrite : null), emptyHistory(), deadline('3s')),
    upperDetail: /^The agent refused "app": the snapshot the plan was made from/,
    without: () => acting(before(), unchanged(), () => null, emptyHistory(), deadline('3s')),
  }),
  adjacent(4, {
    name: 'REPAIR_DEADLINE_EXCEEDED over ACTION_INEFFECTIVE: the same repair, with a retry after repair_deadline and before it',
    both: () => acting(before(), unchanged(), () => null, emptyHistory(), deadline('3s')),
    without: () => acting(before(), unchanged(), () => null, emptyHistory(), deadline('10m')),
  }),
  adjacent(5, {
    name: 'ACTION_INEFFECTIVE over ACTION_FAILED: build did not take, app failed',
    both: () => acting(before(), unchanged(), (k) => (k === 'app' ? failed : null)),
    without: () => acting(before(), before(), () => failed),
  }),
  adjacent(6, {
    name: 'ACTION_FAILED within the budget, RETRY_BUDGET_EXHAUSTED at it (they exclude each other: the boundary)',
    both: () => acting(before(), before(), () => failed, spent(1)),
    without: () => acting(before(), before(), () => failed, spent(2)),
  }),
  adjacent(8, {
    name: 'RETRY_BUDGET_EXHAUSTED over a standing ACTION_REFUSED: build refused before, the budget spent since',
    both: async () => judge(before(), { history: { ...(await afterBuildRefused()), attempt_count: 3 } }),
    without: async () => judge(before(), { history: await afterBuildRefused() }),
    lowerDetail: /^The agent refused "build" and nothing about it has changed since/,
  }),
  adjacent(11, {
    name: 'RETRY / DRIFT_DETECTED over DESTRUCTIVE_REPAIR_REQUIRED: build repaired, app drifted, config was obstructed',
    both: () =>
      acting(
        obstructed(n24Before()),
        snapshot({ ...n24After(), app: { build: '7.3', config_sha256: D7() }, markers: oursFor(['build']) }),
      ),
    without: () => acting(obstructed(n24Before()), snapshot({ ...n24After(), markers: oursFor(['build']) })),
  }),
  adjacent(12, {
    name: 'DESTRUCTIVE_REPAIR_REQUIRED over UNKNOWN_OWNERSHIP',
    both: () => judge(obstructed(n24After(), debugFlag)),
    without: () => judge(snapshot(n24After(), debugFlag)),
  }),
  adjacent(13, {
    name: 'UNKNOWN_OWNERSHIP over OBSERVE_MODE_DRIFT',
    both: () => judge(snapshot(n24Before(), { mode: 'observe', ...debugFlag })),
    without: () => judge(snapshot(n24Before(), { mode: 'observe' })),
  }),
  adjacent(14, {
    name: 'OBSERVE_MODE_DRIFT over HELD: a held node whose config agent.yaml sets to observe',
    both: () => judge(snapshot({ ...n24Before(), config: D6() }, { resource_modes: { config: 'observe' } }), { history: held() }),
    without: () => judge(before(), { history: held() }),
  }),
  adjacent(16, {
    name: 'DEPENDENCY_BLOCKED over CONVERGED_AFTER_REPAIR: build repaired, app still differs with no evidence',
    both: () =>
      handBuilt(
        before(),
        snapshot({ ...n24After(), app: { build: '7.3', config_sha256: D7() }, markers: oursFor(['build']) }),
        (k) => (k === 'app' ? null : {}),
      ),
    without: () => handBuilt(before(), after(), (k) => (k === 'app' ? null : {})),
  }),
  adjacent(17, {
    name: 'CONVERGED_AFTER_REPAIR over ALREADY_CONVERGED: an action was carried out',
    both: () => acting(before(), after()),
    without: () => judge(after()),
  }),
];

describe('precedence between adjacent rungs', () => {
  it.each([...gatePrecedence, ...ladderPrecedence])('$name', async (p) => {
    expectDecision(await p.both(), p.upper);
    expectDecision(await p.without(), p.lower);
  });
  it('a standing ACTION_REFUSED (9) steps aside for DRIFT_DETECTED (10) while something else may run', async () => {
    // build refused before; config drifted since, and its repair may run: the refusal stays a condition.
    const history = await afterBuildRefused();
    const r = judge(snapshot({ ...n24Before(), config: D6() }), { history });
    expectDecision(r, rung(10));
    expect(r.decision.conditions.map((c) => [c.type, c.resource_key])).toContainEqual(['ACTION_REFUSED', 'build']);
    expectDecision(judge(before(), { history }), rung(9));
  });
  it('HELD (15) and DEPENDENCY_BLOCKED (16) exclude each other: a held pass authorizes nothing, so nothing is acted on', () => {
    const r = judge(before(), { history: held() });
    expectDecision(r, rung(15));
    expect(r.decision.authorized_actions).toEqual([]);
    expect(r.decision.planned_actions.length).toBeGreaterThan(0);
    expect(r.decision.conditions.map((c) => c.type)).toEqual(expect.arrayContaining(['DRIFT_HELD']));
    expect(r.decision.hold?.by).toBe('oncall');
  });
  it('covers every adjacent pair of the ladder', () => {
    // 1/2 (REPEATED_DRIFT opens before acting; ACTION_REFUSED in this pass is after), 7/8
    // (RETRY_BUDGET_EXHAUSTED after acting, before acting) and 10/11 (DRIFT_DETECTED before acting,
    // RETRY drift meanwhile after) are one phase against the other, never both; 9/10 is above.
    // 15/16: a held pass authorizes nothing, so it never has DEPENDENCY_BLOCKED's acted-on drift;
    // that pair is the next test.
    expect(ladderPrecedence.map((p) => p.at)).toEqual([0, 2, 3, 4, 5, 6, 8, 11, 12, 13, 14, 16, 17]);
    expect(LADDER.length).toBe(19);
  });
});

describe('a skipped action (an earlier action of the batch failed or was refused)', () => {
  it('is not an attempt, and the resource is still drifting: RETRY / ACTION_FAILED', async () => {
    const r = await acting(before(), before(), (k) => (k === 'build' ? failed : null));
    expectDecision(r, rung(6));
    expect(r.decision.attempt_count).toBe(1);
    expect(r.decision.reason_detail).toContain('"build", "app" failed');
  });
  it('after a refusal: ACTION_REFUSED, and no attempt counted', async () => {
    const r = await acting(before(), before(), (k) => (k === 'build' ? refused : null));
    expectDecision(r, { ...rung(2), detail: /^The agent refused "build":/ });
    expect(r.decision.attempt_count).toBe(0);
  });
  it('alone never counts toward attempt_count nor proves a repair', () => {
    const r = handBuilt(before(), after(), () => skipped);
    expectDecision(r, rung(6));
    expect(r.decision.attempt_count).toBe(0);
    expect(r.history.attempt_count).toBe(0);
  });
});

describe('withheld_because keeps the ledger v1 wording', () => {
  it.each([
    ['observe mode', () => judge(snapshot(n24Before(), { mode: 'observe' })), 'observe mode: reported, not applied'],
    ['budget', () => judge(before(), { history: spent(3) }), 'retry budget exhausted after 3 attempt(s)'],
    [
      'destructive',
      () => judge(obstructed(n24After())),
      'repair would be destructive: a directory stands at etc/app/config.json',
    ],
    [
      'refused',
      async () => judge(before(), { history: await afterRefusal() }),
      'refused by the agent: ObserveModeRefusal: the resource is set to observe on the node',
    ],
    [
      'dependency',
      async () => judge(before(), { history: await afterBuildRefused() }),
      'depends on "build", which cannot be repaired now',
    ],
    [
      'conflict',
      async () => judge(before(), { history: (await acting(before(), overwritten())).history }),
      'repair is stopped while a conflicting writer on "build" is unresolved',
    ],
  ] as const)('%s', async (_kind, run, sentence) => {
    expect((await run()).decision.planned_actions.map((p) => p.withheld_because)).toContain(sentence);
  });
});
