import { beforeAll, describe, expect, it } from 'vitest';
import {
  decisionFingerprint,
  evidenceOfFailure,
  evidenceOfSkip,
  keepsTimer,
  nextWakeMs,
  onResyncCadence,
  shouldWrite,
  verifiedAt,
  wakeIsResync,
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

describe('keepsTimer: whether the timer running serves as the next wake', () => {
  // The timer runs to nowMs + 20 s; the wake the decision asks for is nowMs + 30 s unless said.
  const due = nowMs + 20_000;
  const resyncTimer = { due_at_ms: due, resync: true };
  const backoffTimer = { due_at_ms: due, resync: false };
  const rows: { name: string; timer?: typeof resyncTimer; decision: () => Decision | null; wakeAt?: number; keeps: boolean }[] = [
    {
      name: "a CONVERGED decision that took the resync timer's time (onResyncCadence): kept",
      decision: () => decisionWith('CONVERGED', at(20_000)),
      wakeAt: due,
      keeps: true,
    },
    {
      name: "a CONVERGED decision whose time is not the timer's (no timer ran as it decided): a new timer",
      decision: () => decisionWith('CONVERGED', at(30_000)),
      keeps: false,
    },
    { name: 'no decision yet: the resync timer, due sooner, kept', decision: () => null, keeps: true },
    {
      name: 'a trigger without a time (waiting for evidence): the resync timer, due sooner, kept',
      decision: () => decisionWith('BLOCKED', null),
      keeps: true,
    },
    {
      name: 'a trigger without a time, and a backoff timer running: a new timer (a backoff is no resync)',
      timer: backoffTimer,
      decision: () => decisionWith('BLOCKED', null),
      keeps: false,
    },
    {
      name: 'a backoff the decision set, due when the running one is (a note copied the trigger): kept',
      timer: backoffTimer,
      decision: () => decisionWith('RETRY', at(20_000)),
      wakeAt: due,
      keeps: true,
    },
    {
      name: "a RETRY's own backoff, later than the timer: a new timer, never cut short",
      decision: () => decisionWith('RETRY', at(30_000)),
      keeps: false,
    },
    {
      name: 'a stale snapshot re-taken at its own time: a new timer',
      decision: () => decisionWith('BLOCKED', at(30_000)),
      keeps: false,
    },
    {
      name: 'a wake due before the timer (a hold ending): a new timer',
      decision: () => null,
      wakeAt: nowMs + 10_000,
      keeps: false,
    },
  ];
  for (const row of rows)
    it(row.name, () =>
      expect(keepsTimer(row.timer ?? resyncTimer, row.decision(), row.wakeAt ?? nowMs + 30_000)).toBe(row.keeps),
    );
});

describe('wakeIsResync: whether the wake timer is started as the resync', () => {
  const wake = nowMs + 30_000;
  const rows: { name: string; decision: () => Decision | null; holdEndsAt: number | null; resync: boolean }[] = [
    { name: 'no decision yet, no hold: the resync', decision: () => null, holdEndsAt: null, resync: true },
    {
      name: 'a CONVERGED decision: the resync',
      decision: () => decisionWith('CONVERGED', at(30_000)),
      holdEndsAt: null,
      resync: true,
    },
    {
      name: 'a trigger without a time: the resync',
      decision: () => decisionWith('BLOCKED', null),
      holdEndsAt: null,
      resync: true,
    },
    {
      name: "a RETRY's backoff: its own time",
      decision: () => decisionWith('RETRY', at(30_000)),
      holdEndsAt: null,
      resync: false,
    },
    {
      name: 'a stale snapshot re-taken: its own time',
      decision: () => decisionWith('BLOCKED', at(30_000)),
      holdEndsAt: null,
      resync: false,
    },
    { name: "the wake is a hold's end: the operator's time", decision: () => null, holdEndsAt: wake, resync: false },
    { name: 'a hold ending after the wake: the resync', decision: () => null, holdEndsAt: wake + 1, resync: true },
  ];
  for (const row of rows) it(row.name, () => expect(wakeIsResync(row.decision(), wake, row.holdEndsAt)).toBe(row.resync));
});

describe("onResyncCadence: a CONVERGED decision's recheck is the running resync timer's time", () => {
  const trigger = { trigger: 'TIMER' as const, not_before: at(30_000), detail: 'resync every 30s' };
  it('a resync timer due sooner than the interval: its time', () =>
    expect(onResyncCadence(trigger, 'CONVERGED', at(12_000), NOW)).toEqual({ ...trigger, not_before: at(12_000) }));
  it('no timer running (a resync pass, a new run): resync_interval from now', () =>
    expect(onResyncCadence(trigger, 'CONVERGED', null, NOW)).toBe(trigger));
  it('any status but CONVERGED keeps the time it set itself', () => {
    for (const status of ['RETRY', 'BLOCKED', 'DRIFTED', 'CONFLICT'] as ConvergenceStatus[])
      expect(onResyncCadence(trigger, status, at(12_000), NOW)).toBe(trigger);
  });
  it('a timer already due, or due past the interval, is not a time to promise', () => {
    expect(onResyncCadence(trigger, 'CONVERGED', NOW, NOW)).toBe(trigger);
    expect(onResyncCadence(trigger, 'CONVERGED', at(31_000), NOW)).toBe(trigger);
  });
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
