import { beforeAll, describe, expect, it } from 'vitest';
import {
  decisionFingerprint,
  evidenceOfFailure,
  evidenceOfSkip,
  nextWakeMs,
  shouldWrite,
  verifiedAt,
  type AuthorizedAction,
  type ConvergenceStatus,
  type Decision,
} from '../../src/domain';
import { NOW, n24, pass, snapshot, n24After, n24Before, oursFor } from './fixtures';

/*
 * The loop's own rules (src/domain/loop.ts), one table per rule: when the next pass runs, how a
 * failed apply becomes evidence, and what is written to the ledger (the watch: watch.test.ts).
 */

const nowMs = Date.parse(NOW);
const policy = n24(12, { policy: { resync_interval: '30s' } }).policy;

function decisionWith(status: ConvergenceStatus, notBefore: string | null): Decision {
  const base = { ...snapshotDecision() };
  return {
    ...base,
    convergence_status: status,
    recheck_trigger: { trigger: notBefore ? 'TIMER' : 'FRESH_OBSERVATION', not_before: notBefore, detail: 'test' },
  };
}

let STEADY: Decision;
const snapshotDecision = (): Decision => STEADY;
beforeAll(async () => {
  STEADY = (await pass(snapshot(n24After()), null)).first.decision;
});

const at = (ms: number) => new Date(nowMs + ms).toISOString();

describe('nextWakeMs: when the next pass runs', () => {
  const rows: { name: string; decision: () => Decision | null; wake: number }[] = [
    { name: 'no decision yet: resync', decision: () => null, wake: 30_000 },
    {
      name: 'a trigger without a time (waiting for evidence): resync',
      decision: () => decisionWith('BLOCKED', null),
      wake: 30_000,
    },
    { name: 'a stale snapshot re-taken in 10 s: 10 s', decision: () => decisionWith('BLOCKED', at(10_000)), wake: 10_000 },
    {
      name: 'a time past resync is cut to resync (the loop still re-observes)',
      decision: () => decisionWith('CONVERGED', at(5 * 60_000)),
      wake: 30_000,
    },
    {
      name: "a RETRY's backoff is honoured even past resync (the budget's pacing)",
      decision: () => decisionWith('RETRY', at(5 * 60_000)),
      wake: 5 * 60_000,
    },
    { name: 'a time already passed: at once, never negative', decision: () => decisionWith('CONVERGED', at(-1000)), wake: 0 },
  ];
  for (const row of rows) it(row.name, () => expect(nextWakeMs(row.decision(), policy, nowMs)).toBe(row.wake));
});

describe('evidence of an apply that did not answer', () => {
  const action = { resource_key: 'build', action: 'release.install', idempotency_key: 'k1' } as AuthorizedAction;
  it('a refusal keeps its type and message, and is not a failure', () => {
    const ev = evidenceOfFailure(
      action,
      { kind: 'refused', refusal_type: 'ObserveModeRefusal', message: 'host is in observe mode' },
      NOW,
    );
    expect(ev).toMatchObject({
      outcome: 'refused',
      refusal: 'ObserveModeRefusal: host is in observe mode',
      detail: 'ObserveModeRefusal: host is in observe mode',
      marker_after: null,
    });
  });
  it('a failure to act says what failed, with no refusal', () => {
    const ev = evidenceOfFailure(action, { kind: 'failed', detail: 'no agent took the task' }, NOW);
    expect(ev).toMatchObject({ outcome: 'failed', refusal: null, detail: 'no agent took the task', idempotency_key: 'k1' });
  });
  it('an action after it is skipped, not failed, and names what stopped it', () => {
    const stopper = evidenceOfFailure(action, { kind: 'failed', detail: 'boom' }, NOW);
    const ev = evidenceOfSkip({ ...action, resource_key: 'app', action: 'service.restart' }, stopper, NOW);
    expect(ev).toMatchObject({
      outcome: 'skipped',
      resource_key: 'app',
      detail: 'skipped: build failed before it',
      refusal: null,
    });
  });
});

describe('shouldWrite: what reaches the ledger', () => {
  const steady = () => snapshotDecision();
  it('the first decision is written', () => expect(shouldWrite(steady(), 'pass', null).write).toBe(true));
  it('a steady pass equal to the last written one is not', () => {
    expect(shouldWrite(steady(), 'pass', decisionFingerprint(steady()))).toEqual({
      write: false,
      fingerprint: decisionFingerprint(steady()),
    });
  });
  it('a note is always written, even when nothing changed', () =>
    expect(shouldWrite(steady(), 'note', decisionFingerprint(steady())).write).toBe(true));
  it('a pass that acted is always written', async () => {
    const { final } = await pass(snapshot(n24Before()), () => snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }));
    expect(final.decision.execution_evidence.length).toBeGreaterThan(0);
    expect(shouldWrite(final.decision, 'pass', decisionFingerprint(final.decision)).write).toBe(true);
  });
  it('a pass whose status changed is written', () => {
    const changed = decisionWith('BLOCKED', null);
    expect(shouldWrite(changed, 'pass', decisionFingerprint(steady())).write).toBe(true);
  });
});

describe('verifiedAt: when the node was last verified', () => {
  const d = () => snapshotDecision();
  it('a fresh pre-action snapshot: its observed_at', () => expect(verifiedAt(d(), at(5000), null)).toBe(d().observed_at));
  it('a fresh post-action probe: the moment of deciding', () =>
    expect(verifiedAt({ ...d(), post_action_observation: {} }, at(5000), null)).toBe(at(5000)));
  it('a stale snapshot verifies nothing: unchanged', () =>
    expect(verifiedAt({ ...d(), observation_fresh: false }, at(5000), at(-1))).toBe(at(-1)));
  it('no snapshot verifies nothing: unchanged', () =>
    expect(verifiedAt({ ...d(), observed_at: null }, at(5000), null)).toBeNull());
});
