import { describe, expect, it } from 'vitest';
import { decide, emptyHistory, nextWakeMs, type DecideResult, type DecisionRule, type History } from '../../src/domain';
import { UNANSWERED_REPROBES } from '../../src/domain/gates';
import { NOW, authorityOf, later, n24, n24After, snapshot } from './fixtures';

/*
 * A pass the node did not answer (BLOCKED / NODE_UNREACHABLE) under the rule
 * unreachable-reprobes-soon: the loop asks the node again by itself after policy.backoff, for
 * the first UNANSWERED_REPROBES passes in a row, and at its resync after that. Before the rule, an
 * agent that was only late (a controller under load) stayed blind for a whole resync_interval:
 * 364 s on the cluster at 1000 nodes.
 */

const S = 1000;
const WHY = 'no agent took the observe within node_timeout 30s';
const policy = { resync_interval: '10m', backoff: { initial: '5s', factor: 2, max: '5m' } };

function unanswered(
  history: History,
  now: string,
  opts: { policy?: Record<string, unknown>; rules?: (r: DecisionRule) => boolean } = {},
) {
  const intent = n24(12, { policy: opts.policy ?? policy });
  return decide({ intent, authority: authorityOf(intent), observation: null, unreachable: WHY, history, now, rules: opts.rules });
}

/** The wait the loop's timer takes after the decision (what the workflow sleeps). */
function waitAfter(r: DecideResult, now: string, p: Record<string, unknown> = policy): number {
  return nextWakeMs(r.decision, n24(12, { policy: p }).policy, Date.parse(now));
}

describe('an unanswered pass re-probes soon, then waits for the resync', () => {
  it('the first passes in a row wait policy.backoff, growing; the next waits for the resync', () => {
    let history = emptyHistory();
    const waits: number[] = [];
    const notBefore: Array<string | null> = [];
    for (let i = 0; i < UNANSWERED_REPROBES + 2; i++) {
      const now = later(i * 60 * S);
      const r = unanswered(history, now);
      expect([r.decision.convergence_status, r.decision.reason]).toEqual(['BLOCKED', 'NODE_UNREACHABLE']);
      waits.push(waitAfter(r, now));
      notBefore.push(r.decision.recheck_trigger.not_before);
      history = r.history;
    }
    expect(UNANSWERED_REPROBES).toBe(2);
    expect(waits).toEqual([5 * S, 10 * S, 10 * 60 * S, 10 * 60 * S]);
    expect(notBefore).toEqual([later(5 * S), later(60 * S + 10 * S), null, null]);
    expect(history.unreachable_in_a_row).toBe(4);
  });

  it('says when it asks again, in the decision a user reads', () => {
    const r = unanswered(emptyHistory(), NOW);
    expect(r.decision.recheck_trigger).toEqual({
      trigger: 'FRESH_OBSERVATION',
      not_before: later(5 * S),
      detail: 'the node answers with a fresh snapshot; the loop asks it again in 5s, then at resync_interval',
    });
    expect(r.decision.reason_detail).toContain(WHY);
    const condition = r.decision.conditions.find((c) => c.type === 'NODE_UNREACHABLE')!;
    expect(condition.tried).toEqual(['1 pass(es) in a row without an answer; the next asks in 5s']);
  });

  it('an answer ends the run: the next unanswered pass re-probes from the first backoff again', () => {
    const first = unanswered(emptyHistory(), NOW);
    const second = unanswered(first.history, later(10 * S));
    expect(second.history.unreachable_in_a_row).toBe(2);
    const intent = n24(12, { policy });
    const answered = decide({
      intent,
      authority: authorityOf(intent),
      observation: snapshot(n24After(), { at: later(20 * S) }),
      history: second.history,
      now: later(20 * S),
    });
    expect(answered.history.unreachable_in_a_row).toBe(0);
    const again = unanswered(answered.history, later(60 * S));
    expect(again.decision.recheck_trigger.not_before).toBe(later(65 * S));
  });

  it('never waits past resync_interval', () => {
    const short = { resync_interval: '3s', backoff: { initial: '5s', factor: 2, max: '5m' } };
    const r = unanswered(emptyHistory(), NOW, { policy: short });
    expect(r.decision.recheck_trigger.not_before).toBe(later(3 * S));
    expect(waitAfter(r, NOW, short)).toBe(3 * S);
  });

  it('a run from before the rule waits for its resync every time, and asks the rule only where it decides', () => {
    const asked: DecisionRule[] = [];
    const before = (rule: DecisionRule) => (asked.push(rule), false);
    let history = emptyHistory();
    for (let i = 0; i < 3; i++) {
      const r = unanswered(history, later(i * 60 * S), { rules: before });
      expect(r.decision.recheck_trigger).toMatchObject({ not_before: null, detail: 'the node answers with a fresh snapshot' });
      expect(waitAfter(r, later(i * 60 * S))).toBe(10 * 60 * S);
      history = r.history;
    }
    // Asked for the passes it would re-probe, not for the third, whose wait is the resync either way.
    expect(asked.filter((r) => r === 'unreachable-reprobes-soon')).toHaveLength(2);
  });
});
