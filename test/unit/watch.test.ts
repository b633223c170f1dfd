import { describe, expect, it } from 'vitest';
import { WATCH_RULE, type Observation, type WatchRule } from '../../src/contract';
import {
  IDLE_WATCH,
  WATCH_RETRY_MAX_MS,
  watchStep,
  type ConvergenceStatus,
  type WatchContext,
  type WatchEffect,
  type WatchEvent,
  type WatchState,
} from '../../src/domain';
import { NOW, n24, n24After, snapshot } from './fixtures';

/*
 * The watch's state machine (src/domain/watch.ts), one row per scenario: the state before, one
 * event, and the state after, the effects the workflow carries out, and the watch rules asked
 * (the workflow answers each with patched(), so a rule is asked only where it changes the outcome).
 */

const nowMs = Date.parse(NOW);
const policy = n24(12, { policy: { resync_interval: '30s' } }).policy;
const OBSERVED = { build: 'link:7.4', config: 'ino:1,mtime:2', app: null };
const RETRY_SOON = WATCH_RULE.failureRetriesSoon;
/** A snapshot as an agent hands one back with a watch's change. */
const HANDED: Observation = snapshot(n24After());

interface Row {
  name: string;
  state?: Partial<WatchState>;
  event: WatchEvent;
  ctx?: { status?: ConvergenceStatus | null; policy?: Partial<WatchContext['policy']>; now_ms?: number };
  /** The watch rules are in force (a loop started on this code); false: a run recorded before them replays. */
  rulesInForce?: boolean;
  /** The fields that change (every other one stays as it was). */
  next?: Partial<WatchState>;
  effects?: WatchEffect[];
  asked?: WatchRule[];
}

const rows: Row[] = [
  // The wait: whether a watch starts.
  {
    name: 'the loop waits, idle and converged: a watch starts, against the last observation',
    state: { baseline: OBSERVED },
    event: { kind: 'wait' },
    next: { started: 1, running: true, watching_from: OBSERVED },
    effects: [{ kind: 'start', watch: 1, baseline: OBSERVED }],
  },
  {
    name: 'no decision yet: a watch starts',
    state: { baseline: OBSERVED },
    event: { kind: 'wait' },
    ctx: { status: null },
    next: { started: 1, running: true, watching_from: OBSERVED },
    effects: [{ kind: 'start', watch: 1, baseline: OBSERVED }],
  },
  {
    name: 'no observation to compare with: the watch compares with what it reads first',
    event: { kind: 'wait' },
    next: { started: 1, running: true },
    effects: [{ kind: 'start', watch: 1 }],
  },
  {
    name: 'the last watch found a change against its baseline: the next one goes without',
    state: { started: 1, baseline: OBSERVED, baseline_trusted: false },
    event: { kind: 'wait' },
    next: { started: 2, running: true },
    effects: [{ kind: 'start', watch: 2 }],
  },
  { name: 'policy.watch off: no watch', event: { kind: 'wait' }, ctx: { policy: { watch: false } } },
  {
    name: 'a backoff timer runs (RETRY): no watch, a change must not bring the repair attempt forward',
    event: { kind: 'wait' },
    ctx: { status: 'RETRY' },
  },
  { name: 'one watch already runs: no second one', state: { started: 1, running: true }, event: { kind: 'wait' } },
  {
    name: "a failed watch's pause is not over: no watch yet, the restart stays due",
    state: { started: 1, retry_at_ms: nowMs + 1, restart_due: true },
    event: { kind: 'wait' },
  },
  {
    name: 'the pause is over: the wait starts the watch that was due',
    state: { started: 1, retry_at_ms: nowMs, restart_due: true, baseline: OBSERVED },
    event: { kind: 'wait' },
    next: { started: 2, running: true, restart_due: false, watching_from: OBSERVED },
    effects: [{ kind: 'start', watch: 2, baseline: OBSERVED }],
  },
  {
    name: 'a restart due while a backoff timer runs: dropped, the pass after the backoff watches again',
    state: { started: 1, restart_due: true },
    event: { kind: 'wait' },
    ctx: { status: 'RETRY' },
    next: { restart_due: false },
  },

  // A watch's end.
  {
    name: 'the watch sees a change: the loop wakes for a pass',
    state: { started: 1, running: true },
    event: { kind: 'ended', watch: 1, changed: ['config'], against_baseline: false },
    next: { running: false, fired: true },
  },
  {
    name: 'the watch finds a change against its baseline at once: the loop wakes, and the next watch goes without it',
    state: { started: 1, running: true, baseline: OBSERVED },
    event: { kind: 'ended', watch: 1, changed: ['config'], against_baseline: true },
    next: { running: false, fired: true, baseline_trusted: false },
  },
  {
    name: 'the watch ends with nothing seen (its window ran out, its agent shut down): a restart is due at once',
    state: { started: 1, running: true },
    event: { kind: 'ended', watch: 1, changed: [], against_baseline: false },
    next: { running: false, restart_due: true },
    asked: [RETRY_SOON],
  },
  {
    name: 'the same, replayed by a run recorded before the rule: nothing more until the next pass',
    state: { started: 1, running: true },
    event: { kind: 'ended', watch: 1, changed: [], against_baseline: false },
    rulesInForce: false,
    next: { running: false },
    asked: [RETRY_SOON],
  },
  {
    name: 'the watch fails (its agent died or missed a heartbeat): the next is due after a pause of the resync, at most 30 s',
    state: { started: 1, running: true },
    event: { kind: 'failed', watch: 1 },
    next: { running: false, retry_at_ms: nowMs + 30_000, restart_due: true },
    asked: [RETRY_SOON],
  },
  {
    name: 'a failed watch under a resync of 6 h: the pause is still 30 s',
    state: { started: 1, running: true },
    event: { kind: 'failed', watch: 1 },
    ctx: { policy: { resync_interval: '6h' } },
    next: { running: false, retry_at_ms: nowMs + WATCH_RETRY_MAX_MS, restart_due: true },
    asked: [RETRY_SOON],
  },
  {
    name: 'a failed watch under a resync of 5 s: the pause is the resync, which observes sooner anyway',
    state: { started: 1, running: true },
    event: { kind: 'failed', watch: 1 },
    ctx: { policy: { resync_interval: '5s' } },
    next: { running: false, retry_at_ms: nowMs + 5_000, restart_due: true },
    asked: [RETRY_SOON],
  },
  {
    name: 'a failed watch replayed by a run recorded before the rule: the next waits one resync interval',
    state: { started: 1, running: true },
    event: { kind: 'failed', watch: 1 },
    rulesInForce: false,
    next: { running: false, retry_at_ms: nowMs + 30_000 },
    asked: [RETRY_SOON],
  },
  {
    name: 'the end of a watch that is no longer the current one changes nothing and asks nothing',
    state: { started: 2, running: true },
    event: { kind: 'failed', watch: 1 },
  },

  // The passes.
  {
    name: 'a pass begins: the change the watch reported is being looked at',
    state: { started: 1, fired: true },
    event: { kind: 'pass' },
    next: { fired: false },
  },
  {
    name: "the pass's observation is the next watch's baseline",
    event: { kind: 'observed', markers: OBSERVED },
    next: { baseline: OBSERVED },
  },
  {
    name: 'an observation that failed leaves no baseline to give',
    state: { baseline: OBSERVED },
    event: { kind: 'observed', markers: null },
    next: { baseline: null },
  },

  // The snapshot a watch hands back (WatchRequest.observe_on_change).
  {
    name: 'a watch that saw a change hands back the snapshot it took: the pass it wakes decides on it',
    state: { started: 1, running: true },
    event: { kind: 'ended', watch: 1, changed: ['config'], against_baseline: false, observation: HANDED },
    next: { running: false, fired: true, handed: HANDED },
  },
  {
    name: 'a watch during which the loop saw the node otherwise hands nothing on: it may have read the node before the loop did',
    state: { started: 1, running: true, overlapped: true },
    event: { kind: 'ended', watch: 1, changed: ['config'], against_baseline: false, observation: HANDED },
    next: { running: false, fired: true, handed: null },
  },
  {
    name: 'an observation while the watch runs that differs from what the watch started from marks it overlapped',
    state: { started: 1, running: true, watching_from: OBSERVED },
    event: { kind: 'observed', markers: { ...OBSERVED, config: 'ino:9,mtime:9' } },
    next: { baseline: { ...OBSERVED, config: 'ino:9,mtime:9' }, overlapped: true },
  },
  {
    name: 'an observation while the watch runs that finds the node as the watch started from leaves it handing back',
    state: { started: 1, running: true, watching_from: OBSERVED },
    event: { kind: 'observed', markers: { ...OBSERVED } },
    next: { baseline: OBSERVED },
  },
  {
    name: 'a watch started without a baseline: any observation while it runs marks it overlapped',
    state: { started: 1, running: true, watching_from: null },
    event: { kind: 'observed', markers: OBSERVED },
    next: { baseline: OBSERVED, overlapped: true },
  },
  {
    name: 'an observation that failed while the watch runs marks it overlapped',
    state: { started: 1, running: true, watching_from: OBSERVED },
    event: { kind: 'observed', markers: null },
    next: { baseline: null, overlapped: true },
  },
  {
    name: 'a pass that begins while the watch runs does not by itself stop it handing back',
    state: { started: 1, running: true, watching_from: OBSERVED },
    event: { kind: 'pass' },
  },
  {
    name: 'a pass that begins after the watch ended keeps what it handed back, for that pass to take',
    state: { started: 1, fired: true, handed: HANDED },
    event: { kind: 'pass' },
    next: { fired: false },
  },
  {
    name: 'the next watch starts clear of the last one overlapping, from the last observation',
    state: { started: 1, overlapped: true, baseline: OBSERVED },
    event: { kind: 'wait' },
    next: { started: 2, running: true, overlapped: false, watching_from: OBSERVED },
    effects: [{ kind: 'start', watch: 2, baseline: OBSERVED }],
  },
  {
    name: 'once a pass observed (the handed snapshot or its own), nothing stays handed',
    state: { handed: HANDED },
    event: { kind: 'observed', markers: OBSERVED },
    next: { baseline: OBSERVED, handed: null },
  },
  {
    name: 'a loop bound to other resources drops a snapshot handed back for the old ones',
    state: { handed: HANDED, fired: true },
    event: { kind: 'rebound' },
    next: { handed: null },
  },
  {
    name: 'a watch that ended without a change hands nothing back',
    state: { started: 1, running: true },
    event: { kind: 'ended', watch: 1, changed: [], against_baseline: false, observation: HANDED },
    next: { running: false, restart_due: true },
    asked: [RETRY_SOON],
  },

  // A watch that ends at the resync (patch watch-ends-at-resync): its end is the resync.
  {
    name: 'the loop waits for its resync: the watch started ends there and observes',
    state: { baseline: OBSERVED },
    event: { kind: 'wait', resync_at_ms: nowMs + 30_000 },
    next: { started: 1, running: true, watching_from: OBSERVED, resync_at_ms: nowMs + 30_000 },
    effects: [{ kind: 'start', watch: 1, baseline: OBSERVED, ends_at_ms: nowMs + 30_000 }],
  },
  {
    name: 'a resync already due is no window to watch: the watch starts with its own',
    state: { baseline: OBSERVED },
    event: { kind: 'wait', resync_at_ms: nowMs },
    next: { started: 1, running: true, watching_from: OBSERVED },
    effects: [{ kind: 'start', watch: 1, baseline: OBSERVED }],
  },
  {
    name: 'a watch already runs: the wait for the resync starts none and leaves it as it is',
    state: { started: 1, running: true },
    event: { kind: 'wait', resync_at_ms: nowMs + 30_000 },
  },
  {
    name: 'the watch ends at the resync with its snapshot: the loop wakes for the resync pass, which decides on it',
    state: { started: 1, running: true, resync_at_ms: nowMs },
    event: { kind: 'ended', watch: 1, changed: [], against_baseline: false, elapsed: true, observation: HANDED },
    next: { running: false, fired: true, handed: HANDED, resync_at_ms: null },
  },
  {
    name: 'the same, when the loop saw the node otherwise while it ran: the resync pass observes for itself',
    state: { started: 1, running: true, resync_at_ms: nowMs, overlapped: true },
    event: { kind: 'ended', watch: 1, changed: [], against_baseline: false, elapsed: true, observation: HANDED },
    next: { running: false, fired: true, handed: null, resync_at_ms: null },
  },
  {
    name: 'the same from an agent that could not observe (or an older one): the resync pass observes for itself',
    state: { started: 1, running: true, resync_at_ms: nowMs },
    event: { kind: 'ended', watch: 1, changed: [], against_baseline: false, elapsed: true },
    next: { running: false, fired: true, resync_at_ms: null },
  },
  {
    name: 'a watch for the resync that ends early (its agent shut down): no pass, a restart is due at once',
    state: { started: 1, running: true, resync_at_ms: nowMs + 10_000 },
    event: { kind: 'ended', watch: 1, changed: [], against_baseline: false, elapsed: false },
    next: { running: false, restart_due: true, resync_at_ms: null },
    asked: [RETRY_SOON],
  },
  {
    name: 'a watch for the resync that ends while a backoff runs (RETRY): no pass before the retry time',
    state: { started: 1, running: true, resync_at_ms: nowMs },
    event: { kind: 'ended', watch: 1, changed: [], against_baseline: false, elapsed: true, observation: HANDED },
    ctx: { status: 'RETRY' },
    next: { running: false, restart_due: true, resync_at_ms: null },
    asked: [RETRY_SOON],
  },
  {
    name: 'a watch for the resync that fails: the loop takes a timer again, and the next watch after the pause',
    state: { started: 1, running: true, resync_at_ms: nowMs + 10_000 },
    event: { kind: 'failed', watch: 1 },
    next: { running: false, retry_at_ms: nowMs + 30_000, restart_due: true, resync_at_ms: null },
    asked: [RETRY_SOON],
  },
];

function step(row: Row, state: WatchState, rulesInForce = true) {
  const asked: WatchRule[] = [];
  const ctx: WatchContext = {
    now_ms: row.ctx?.now_ms ?? nowMs,
    policy: { ...policy, ...row.ctx?.policy },
    status: row.ctx && 'status' in row.ctx ? (row.ctx.status ?? null) : 'CONVERGED',
    rules: (rule) => (asked.push(rule), rulesInForce),
  };
  return { ...watchStep(state, row.event, ctx), asked };
}

describe('watchStep: the watch, one event at a time', () => {
  for (const row of rows) {
    it(row.name, () => {
      const before = { ...IDLE_WATCH, ...row.state };
      const { state, effects, asked } = step(row, before, row.rulesInForce);
      expect(state).toEqual({ ...before, ...row.next });
      expect(effects).toEqual(row.effects ?? []);
      expect(asked).toEqual(row.asked ?? []);
    });
  }

  it('an agent that restarts mid-watch: the watch fails, the wait pauses, then watches again against the last observation', () => {
    const run = (state: WatchState, event: WatchEvent, now_ms: number) => step({ name: '', event, ctx: { now_ms } }, state);
    let s = run(IDLE_WATCH, { kind: 'observed', markers: OBSERVED }, nowMs).state;
    const first = run(s, { kind: 'wait' }, nowMs);
    expect(first.effects).toEqual([{ kind: 'start', watch: 1, baseline: OBSERVED }]);
    s = run(first.state, { kind: 'failed', watch: 1 }, nowMs + 1_000).state;
    const paused = run(s, { kind: 'wait' }, nowMs + 2_000);
    expect(paused.effects).toEqual([]);
    expect(paused.state).toMatchObject({ restart_due: true, retry_at_ms: nowMs + 31_000 });
    const again = run(paused.state, { kind: 'wait' }, nowMs + 31_000);
    expect(again.effects).toEqual([{ kind: 'start', watch: 2, baseline: OBSERVED }]);
    expect(again.state).toMatchObject({ running: true, restart_due: false });
  });
});
