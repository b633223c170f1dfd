import { describe, expect, it } from 'vitest';
import { DECISION_RULE, type LoopResolution } from '../../src/contract';
import {
  applyWorkResolution,
  emptyHistory,
  type BoundIntent,
  type DecideResult,
  type DecisionRule,
  type History,
  type LedgerEntry,
} from '../../src/domain';
import { auditLedger } from '../../src/domain/ledger-audit';
import { NOW, later, loopResolution, n24, n24After, n24Before, oursFor, pass, snapshot } from './fixtures';

/*
 * policy.repair_deadline (issue 20, "Budgets"): a time budget per repair episode. The episode
 * begins with the first decision that authorized a repair; once the deadline has passed, or the
 * next retry could only run after it, the loop authorizes nothing more and says
 * BLOCKED/REPAIR_DEADLINE_EXCEEDED, which opens a work item. A decision rule: a loop that started
 * before it keeps retrying until retry_budget is spent.
 */

const SEC = 1000;
/** retry_budget 5 with the default backoff (5s, ×2): retries 5s, 10s, 20s, 40s apart, 75s in all. */
const policy = (extra: Record<string, unknown> = {}) => n24(12, { policy: { retry_budget: 5, ...extra } });
/** A node whose repair never takes: the probe shows our own markers on the old values (seed probe 4). */
const stuck = (at: string) => snapshot({ ...n24Before(), markers: oursFor(['build', 'app']) }, { at });

interface Step {
  said: string;
  result: DecideResult;
}

/** Passes over the stuck node, each at the time the previous one's RETRY named, until one is not a RETRY. */
async function episode(intent: BoundIntent, rules?: (rule: DecisionRule) => boolean): Promise<Step[]> {
  const steps: Step[] = [];
  let history = emptyHistory();
  let now = NOW;
  for (let i = 0; i < 10; i++) {
    const { final } = await pass(snapshot(n24Before(), { at: now }), () => stuck(now), { intent, history, now, rules });
    const d = final.decision;
    steps.push({ said: `${d.convergence_status}/${d.reason} #${d.attempt_count}`, result: final });
    if (d.convergence_status !== 'RETRY') return steps;
    history = final.history;
    now = d.recheck_trigger.not_before ?? later(SEC, now);
  }
  return steps;
}

function ruleLog(inForce: (rule: DecisionRule) => boolean = () => true) {
  const asked: DecisionRule[] = [];
  return { asked, rules: (rule: DecisionRule) => (asked.push(rule), inForce(rule)) };
}

describe('a repair that never takes, with and without repair_deadline', () => {
  it.each([
    {
      name: 'repair_deadline 20s, shorter than the 75s the retries span: BLOCKED at the third attempt, whose retry would come at 35s',
      intent: policy({ repair_deadline: '20s' }),
      said: ['RETRY/ACTION_INEFFECTIVE #1', 'RETRY/ACTION_INEFFECTIVE #2', 'BLOCKED/REPAIR_DEADLINE_EXCEEDED #3'],
    },
    {
      name: 'repair_deadline 3s, shorter than the first backoff: BLOCKED at the first attempt',
      intent: policy({ repair_deadline: '3s' }),
      said: ['BLOCKED/REPAIR_DEADLINE_EXCEEDED #1'],
    },
    {
      name: 'repair_deadline 10m, longer than every retry: the retry budget ends it, as today',
      intent: policy({ repair_deadline: '10m' }),
      said: [1, 2, 3, 4].map((n) => `RETRY/ACTION_INEFFECTIVE #${n}`).concat('BLOCKED/RETRY_BUDGET_EXHAUSTED #5'),
    },
    {
      name: 'no repair_deadline: the retry budget ends it, as today',
      intent: policy(),
      said: [1, 2, 3, 4].map((n) => `RETRY/ACTION_INEFFECTIVE #${n}`).concat('BLOCKED/RETRY_BUDGET_EXHAUSTED #5'),
    },
  ])('$name', async ({ intent, said }) => {
    const steps = await episode(intent);
    expect(steps.map((s) => s.said)).toEqual(said);
  });

  it('says when the episode began and when its deadline passes, opens REPAIR_DEADLINE_EXCEEDED per key, and keeps what was tried', async () => {
    const steps = await episode(policy({ repair_deadline: '20s' }));
    const d = steps.at(-1)!.result.decision;
    expect(d.reason_detail).toBe(
      `The repair episode of "build", "app" began at ${NOW} and its repair_deadline of 20s passes at ${later(20 * SEC)}, before the next retry could run; after 3 attempt(s) they still differ, so Datum stops repairing and an operator decides.`,
    );
    expect(d.repair_episode).toEqual({ started_at: NOW, repair_deadline: '20s' });
    const opened = d.conditions.filter((c) => c.type === 'REPAIR_DEADLINE_EXCEEDED');
    expect(opened.map((c) => [c.resource_key, c.needs_judgement, c.resolver])).toEqual([
      ['app', true, 'operator'],
      ['build', true, 'operator'],
    ]);
    expect(opened[0].tried[0]).toMatch(/^service\.(re)?start at .*: applied/);
    expect(d.conditions.map((c) => c.type)).not.toContain('REPAIR_RETRYING');
    // Every RETRY of the episode was for before its deadline.
    for (const s of steps.slice(0, -1))
      expect(Date.parse(s.result.decision.recheck_trigger.not_before!)).toBeLessThan(Date.parse(later(20 * SEC)));
  });

  it('the next pass authorizes nothing: the planned actions say the deadline passed, and the condition stays open', async () => {
    const steps = await episode(policy({ repair_deadline: '20s' }));
    const history = steps.at(-1)!.result.history;
    expect(history.episode_started).toBe(NOW);
    const next = await pass(snapshot(n24Before(), { at: later(60 * SEC) }), null, {
      intent: policy({ repair_deadline: '20s' }),
      history,
      now: later(60 * SEC),
    });
    const d = next.first.decision;
    expect([d.convergence_status, d.reason, d.authorized_actions]).toEqual(['BLOCKED', 'REPAIR_DEADLINE_EXCEEDED', []]);
    expect(d.planned_actions.map((p) => p.withheld_because)).toEqual([
      `repair_deadline 20s passed in the repair episode that began at ${NOW}`,
      `repair_deadline 20s passed in the repair episode that began at ${NOW}`,
    ]);
    expect(d.conditions.filter((c) => c.type === 'REPAIR_DEADLINE_EXCEEDED').map((c) => [c.resource_key, c.since])).toEqual([
      ['app', later(15 * SEC)],
      ['build', later(15 * SEC)],
    ]);
  });

  it('a pass that comes before the deadline itself (a resync, a watch) after BLOCKED authorizes nothing either', async () => {
    const steps = await episode(policy({ repair_deadline: '20s' }));
    // BLOCKED at 15s because the next retry would come at 35s; a resync at 16s is before the 20s deadline.
    const next = await pass(snapshot(n24Before(), { at: later(16 * SEC) }), null, {
      intent: policy({ repair_deadline: '20s' }),
      history: steps.at(-1)!.result.history,
      now: later(16 * SEC),
    });
    const d = next.first.decision;
    expect([d.convergence_status, d.reason, d.authorized_actions, d.attempt_count]).toEqual([
      'BLOCKED',
      'REPAIR_DEADLINE_EXCEEDED',
      [],
      3,
    ]);
  });

  it('a node repaired by hand meanwhile converges and ends the episode: the next drift has a whole deadline again', async () => {
    const intent = policy({ repair_deadline: '20s' });
    const steps = await episode(intent);
    const fixed = await pass(snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }, { at: later(60 * SEC) }), null, {
      intent,
      history: steps.at(-1)!.result.history,
      now: later(60 * SEC),
    });
    expect(fixed.final.decision.reason).toBe('ALREADY_CONVERGED');
    expect(fixed.final.history.episode_started).toBeUndefined();
    expect(fixed.final.decision.conditions).toEqual([]);
  });
});

describe('the rule is asked only where it changes the outcome', () => {
  it('not in force (a loop that started before it): retries until retry_budget is spent, as before', async () => {
    const log = ruleLog((rule) => rule !== DECISION_RULE.repairDeadline);
    const steps = await episode(policy({ repair_deadline: '20s' }), log.rules);
    expect(steps.map((s) => s.said).at(-1)).toBe('BLOCKED/RETRY_BUDGET_EXHAUSTED #5');
    expect(log.asked).toContain(DECISION_RULE.repairDeadline);
  });

  it('without repair_deadline, or before it, the rule is never asked', async () => {
    for (const intent of [policy(), policy({ repair_deadline: '10m' })]) {
      const log = ruleLog();
      await episode(intent, log.rules);
      expect(log.asked).not.toContain(DECISION_RULE.repairDeadline);
    }
  });

  it('without repair_deadline the ledger entry has no repair_episode and the digest is what it was', async () => {
    const steps = await episode(policy());
    expect(steps[0].result.decision).not.toHaveProperty('repair_episode');
    expect(policy().policy).not.toHaveProperty('repair_deadline');
    expect(policy({ repair_deadline: '20s' }).digest).not.toBe(policy().digest);
  });
});

describe('a resolver grants more: attempts and a fresh deadline', () => {
  const ask = (o: Partial<LoopResolution> = {}) => loopResolution('REPAIR_DEADLINE_EXCEEDED', o);

  it('grant: the episode clock starts again with the next repair, and attempts left are kept (3 of 5 here)', async () => {
    const intent = policy({ repair_deadline: '20s' });
    const blocked = (await episode(intent)).at(-1)!.result.history;
    const granted = applyWorkResolution(blocked, intent, ask(), later(60 * SEC));
    expect(granted.error).toBeNull();
    expect(granted.detail).toMatch(/by granting 1 more attempt\(s\) and a fresh repair_deadline of 20s/);
    expect(granted.history.episode_started).toBeUndefined();
    expect(granted.history.attempt_count).toBe(3);
    const now = later(60 * SEC);
    const next = await pass(snapshot(n24Before(), { at: now }), () => stuck(now), { intent, history: granted.history, now });
    expect(next.first.decision.authorized_actions.map((a) => a.resource_key)).toEqual(['build', 'app']);
    expect(next.final.decision.repair_episode).toEqual({ started_at: now, repair_deadline: '20s' });
  });

  it('hold changes nothing: the node stays blocked', () => {
    const history: History = { ...emptyHistory(), episode_started: NOW, conditions: [] };
    const held = applyWorkResolution(
      {
        ...history,
        conditions: [
          {
            type: 'REPAIR_DEADLINE_EXCEEDED',
            resource_key: 'app',
            message: 'm',
            evidence: null,
            tried: [],
            resolver: 'operator',
            needs_judgement: true,
            since: NOW,
          },
        ],
      },
      policy({ repair_deadline: '20s' }),
      ask({ resolution: 'hold', attempts: null }),
      NOW,
    );
    expect(held.error).toBeNull();
    expect(held.history.episode_started).toBe(NOW);
  });
});

describe('the ledger auditor holds a ledger to the deadline', () => {
  const entries = async (intent: BoundIntent, rules?: (rule: DecisionRule) => boolean) =>
    (await episode(intent, rules)).map((s, i): LedgerEntry => ({
      ...s.result.decision,
      ledger_version: 1,
      seq: i + 1,
      decided_at: NOW,
      workflow_id: 'datum/N-24/gen-12',
    }));
  const audit = (ledger: LedgerEntry[]) => auditLedger(ledger.map((entry) => ({ chain_id: 'c1', entry })));

  it('finds nothing in a ledger the rule wrote', async () => {
    expect(audit(await entries(policy({ repair_deadline: '20s' })))).toEqual([]);
  });

  it('finds a RETRY for after the deadline in a ledger written without the rule', async () => {
    const found = audit(await entries(policy({ repair_deadline: '20s' }), (r) => r !== DECISION_RULE.repairDeadline));
    expect(found.map((f) => [f.seq, f.rule])).toEqual([
      [3, 'RETRY_PAST_DEADLINE'],
      [4, 'RETRY_PAST_DEADLINE'],
    ]);
    expect(found[0].detail).toMatch(/at or after the deadline .* of the episode that began .* \(repair_deadline 20s\)/);
  });

  it('finds an action carried out in an episode after an entry of it said REPAIR_DEADLINE_EXCEEDED', async () => {
    const ledger = await entries(policy({ repair_deadline: '20s' }));
    const acted = { ...ledger[0], seq: ledger.length + 1, repair_episode: ledger.at(-1)!.repair_episode };
    expect(audit([...ledger, acted]).map((f) => [f.seq, f.rule])).toEqual([[4, 'ACTION_AFTER_DEADLINE']]);
  });
});
