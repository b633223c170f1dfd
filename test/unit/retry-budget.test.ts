import { describe, expect, it } from 'vitest';
import { DECISION_RULE } from '../../src/contract';
import { emptyHistory, type DecisionRule } from '../../src/domain';
import { D6, later, n24After, n24Before, pass, snapshot } from './fixtures';

/*
 * RETRY never past the retry budget (issue 20): a pass whose repair of build and app took, and
 * spent the budget doing it, while config drifted meanwhile. The next pass would withhold the
 * repair of config (budget spent), so this pass must not promise a RETRY. A decision rule: a
 * loop that started before it keeps saying RETRY on replay.
 */

const MIN = 60_000;
/** Two repairs already tried in this episode; this pass's is the third of retry_budget 3. */
const history = () => ({ ...emptyHistory(), attempt_count: 2 });
/** The probe: build and app at desired (our writes took), config changed by someone meanwhile. */
const probe = () => snapshot({ ...n24After(), config: D6(), markers: { config: 'file:theirs' } }, { at: later(1000) });

function ruleLog(inForce: (rule: DecisionRule) => boolean = () => true) {
  const asked: DecisionRule[] = [];
  return { asked, rules: (rule: DecisionRule) => (asked.push(rule), inForce(rule)) };
}

describe('drift that appeared meanwhile, once the repair spent the budget', () => {
  it('is BLOCKED with RETRY_BUDGET_EXHAUSTED, not a RETRY the next pass would not make', async () => {
    const log = ruleLog();
    const { final } = await pass(snapshot(n24Before()), probe, { history: history(), rules: log.rules });
    const d = final.decision;
    expect([d.convergence_status, d.reason, d.attempt_count, d.retry_budget]).toEqual([
      'BLOCKED',
      'RETRY_BUDGET_EXHAUSTED',
      3,
      3,
    ]);
    expect(d.reason_detail).toMatch(
      /"config" still differ after 3 repair\(s\), the whole retry_budget of 3; nothing more is tried/,
    );
    expect(d.conditions.map((c) => `${c.type}:${c.resource_key}`)).toContain('RETRY_BUDGET_EXHAUSTED:config');
    expect(log.asked).toContain(DECISION_RULE.retryOnlyWithinBudget);
    // What the next pass says anyway: nothing more is tried.
    const next = await pass(probe(), null, { history: final.history, now: later(MIN) });
    expect([next.first.decision.convergence_status, next.first.decision.reason]).toEqual(['BLOCKED', 'RETRY_BUDGET_EXHAUSTED']);
    expect(next.first.decision.authorized_actions).toEqual([]);
  });

  it('within the budget it is still a RETRY, and the rule is not asked', async () => {
    const log = ruleLog();
    const { final } = await pass(snapshot(n24Before()), probe, { history: emptyHistory(), rules: log.rules });
    expect([final.decision.convergence_status, final.decision.reason]).toEqual(['RETRY', 'DRIFT_DETECTED']);
    expect(log.asked).not.toContain(DECISION_RULE.retryOnlyWithinBudget);
  });

  it('not in force (a loop that started before it): RETRY as before', async () => {
    const rules = (rule: DecisionRule) => rule !== DECISION_RULE.retryOnlyWithinBudget;
    const { final } = await pass(snapshot(n24Before()), probe, { history: history(), rules });
    expect([final.decision.convergence_status, final.decision.reason, final.decision.attempt_count]).toEqual([
      'RETRY',
      'DRIFT_DETECTED',
      3,
    ]);
  });
});
