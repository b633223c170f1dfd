import { describe, expect, it } from 'vitest';
import {
  judgeGateNode,
  maxUnavailable,
  parseSelector,
  parseWaveSizes,
  planWaves,
  selects,
  settlesRollout,
  STALE_RETAKES_A_ROLLOUT_WAITS,
  waveGate,
  wavesProblems,
  type Selector,
  type WaveSpec,
} from '../../src/domain';
import type { GateEntry } from '../../src/contract';

/*
 * The pure parts of a rollout in waves: how nodes split into waves, the gate's verdict on a node
 * from its loop's latest entry, the wave's verdict, and selectors. The workflow around them is
 * tested on real processes (test/integration/rollout-waves.test.ts).
 */

const nodes = (n: number) => Array.from({ length: n }, (_, i) => `web-${i + 1}`);
const sel = (text: string): Selector => {
  const parsed = parseSelector(text);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.selector;
};
const sizes = (text: string): WaveSpec[] => {
  const parsed = parseWaveSizes(text);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.sizes.map((size) => ({ size }));
};
const noLabels = () => ({});

describe('planWaves', () => {
  it('sizes count from the first wave, and each wave takes at least one more node', () => {
    const twenty = planWaves(nodes(20), sizes('1,10%,50%,100%'), noLabels);
    expect(twenty.ok && twenty.waves.map((w) => w.nodes.length)).toEqual([1, 1, 8, 10]);
    const five = planWaves(nodes(5), sizes('1,10%,50%,100%'), noLabels);
    expect(five.ok && five.waves.map((w) => [w.name, w.nodes])).toEqual([
      ['wave-1', ['web-1']],
      ['wave-2', ['web-2']],
      ['wave-3', ['web-3']],
      ['wave-4', ['web-4', 'web-5']],
    ]);
  });

  it('a node in no wave, or a wave that takes none, is an error with the fix', () => {
    const short = planWaves(nodes(5), sizes('1,2'), noLabels);
    expect(short).toEqual({
      ok: false,
      error: expect.stringMatching(
        /^3 node\(s\) are in no wave: web-3, web-4, web-5 — fix: end the plan with a wave that takes the rest/,
      ) as unknown,
    });
    const empty = planWaves(nodes(2), sizes('100%,100%'), noLabels);
    expect(empty).toEqual({
      ok: false,
      error: expect.stringMatching(/^wave-2 takes no node: every node is in an earlier wave — fix:/) as unknown,
    });
  });

  it('waves by selector take what they select that no earlier wave took', () => {
    const labels: Record<string, Record<string, string>> = {
      'web-1': { zone: 'a' },
      'web-2': { zone: 'a' },
      'web-3': { zone: 'b' },
      'web-4': {},
    };
    const plan = planWaves(
      nodes(4),
      [{ name: 'canary', selector: sel('name=web-1') }, { name: 'zone-a', selector: sel('zone=a') }, { size: { percent: 100 } }],
      (n) => labels[n] ?? {},
    );
    expect(plan.ok && plan.waves).toEqual([
      { name: 'canary', nodes: ['web-1'] },
      { name: 'zone-a', nodes: ['web-2'] },
      { name: 'wave-3', nodes: ['web-3', 'web-4'] },
    ]);
  });

  it('--waves refuses what is not a size', () => {
    expect(parseWaveSizes('1,0%,100%')).toEqual({
      ok: false,
      error: expect.stringMatching(/^--waves: "0%" is not a share .* — fix:/) as unknown,
    });
    expect(parseWaveSizes('1,,2').ok).toBe(false);
    expect(parseWaveSizes('two').ok).toBe(false);
  });

  it('max-unavailable: a count, or a share of the wave, never less than one', () => {
    expect(maxUnavailable(null, 7)).toBe(7);
    expect(maxUnavailable('2', 7)).toBe(2);
    expect(maxUnavailable('25%', 10)).toBe(2);
    expect(maxUnavailable('25%', 2)).toBe(1);
  });

  it("the rollout's waves are checked: every node once, nothing else", () => {
    const w = (waves: Array<{ name: string; nodes: string[] }>) => ({ waves, max_unavailable: null, gate_deadline: '10m' });
    expect(wavesProblems(['a', 'b'], w([{ name: 'one', nodes: ['a', 'b'] }]))).toEqual([]);
    expect(
      wavesProblems(
        ['a', 'b'],
        w([
          { name: 'one', nodes: ['a', 'c'] },
          { name: 'two', nodes: ['a'] },
        ]),
      ),
    ).toEqual(['in more than one wave: a', 'in a wave but not in nodes: c', 'in no wave: b']);
    expect(wavesProblems(['a'], { ...w([{ name: 'one', nodes: ['a'] }]), gate_deadline: 'soon' })).toEqual([
      'gate_deadline must be a duration such as "10m"',
    ]);
  });
});

describe('the gate', () => {
  const bound = { generation: 4, digest: 'sha256:aa' };
  const entry = (over: Partial<GateEntry> = {}): GateEntry => ({
    workflow_id: 'datum/web-1/gen-4',
    seq: 3,
    decided_at: '2026-12-05T10:00:00Z',
    generation: 4,
    digest: 'sha256:aa',
    status: 'CONVERGED',
    reason: 'ALREADY_CONVERGED',
    reason_detail: '',
    observation_fresh: true,
    ...over,
  });
  // The patches (rollout-waits-out-stale-retake, rollout-waits-out-reprobe), each asked only where it changes the verdict.
  let askedFor = 0;
  const asked = { staleRetake: () => (askedFor++, true), reprobe: () => (askedFor++, true) };
  const before = { staleRetake: () => false, reprobe: () => false };
  const early = { startedAtMs: 0, deadlineMs: 60_000, nowMs: 10_000 };
  const late = { startedAtMs: 0, deadlineMs: 60_000, nowMs: 61_000 };

  it('a node passes only on CONVERGED, from a fresh observation, at its generation and digest', () => {
    expect(judgeGateNode(entry(), bound, early, asked).verdict).toBe('converged');
    expect(judgeGateNode(entry({ observation_fresh: false }), bound, early, asked).verdict).toBe('waiting');
    expect(judgeGateNode(entry({ digest: 'sha256:bb' }), bound, early, asked).verdict).toBe('waiting');
    expect(judgeGateNode(entry({ generation: 3 }), bound, early, asked).verdict).toBe('waiting');
    expect(judgeGateNode(null, bound, early, asked).verdict).toBe('waiting');
  });

  it('settled short of CONVERGED fails; past the deadline it is late', () => {
    expect(judgeGateNode(entry({ status: 'BLOCKED', reason: 'ACTION_REFUSED' }), bound, early, asked)).toEqual({
      verdict: 'settled',
      why: 'its loop recorded BLOCKED/ACTION_REFUSED: ',
    });
    expect(judgeGateNode(entry({ status: 'RETRY', reason: 'ACTION_FAILED' }), bound, early, asked).verdict).toBe('waiting');
    expect(judgeGateNode(entry({ status: 'RETRY', reason: 'ACTION_FAILED' }), bound, late, asked)).toEqual({
      verdict: 'late',
      why: "not CONVERGED within the gate's deadline: its loop last recorded RETRY/ACTION_FAILED",
    });
    expect(judgeGateNode(null, bound, late, asked).why).toBe(
      "no decision of its loop at generation 4 within the gate's deadline",
    );
    // A converged node is never late.
    expect(judgeGateNode(entry(), bound, late, asked).verdict).toBe('converged');
  });

  it('a stale snapshot its loop re-takes itself is on its way until the deadline, and only it asks the patch', () => {
    const stale = entry({ status: 'BLOCKED', reason: 'STALE_OBSERVATION', reason_detail: 'the snapshot was stale' });
    askedFor = 0;
    expect(judgeGateNode(stale, bound, early, asked)).toEqual({ verdict: 'waiting', why: null });
    expect(askedFor).toBe(1);
    expect(judgeGateNode(stale, bound, late, asked)).toEqual({
      verdict: 'late',
      why: "not CONVERGED within the gate's deadline: its loop last recorded BLOCKED/STALE_OBSERVATION",
    });
    // A run from before the patch counts it settled, as it did.
    expect(judgeGateNode(stale, bound, early, before).verdict).toBe('settled');
    askedFor = 0;
    judgeGateNode(entry({ status: 'BLOCKED', reason: 'ACTION_REFUSED' }), bound, early, asked);
    judgeGateNode(entry(), bound, early, asked);
    expect(askedFor).toBe(0);
  });

  it('an unanswered pass its loop re-probes by itself is on its way until the deadline; one left to the resync settles', () => {
    const unanswered = (not_before?: string | null) =>
      entry({ status: 'BLOCKED', reason: 'NODE_UNREACHABLE', reason_detail: 'Node web-1 is unreachable', not_before });
    askedFor = 0;
    expect(judgeGateNode(unanswered('2026-12-05T10:00:05Z'), bound, early, asked)).toEqual({ verdict: 'waiting', why: null });
    expect(askedFor).toBe(1);
    expect(judgeGateNode(unanswered('2026-12-05T10:00:05Z'), bound, late, asked).verdict).toBe('late');
    // No time of its own (a third pass in a row, a loop from before the rule, an older worker's answer): counted, unasked.
    askedFor = 0;
    for (const left of [null, undefined])
      expect(judgeGateNode(unanswered(left), bound, early, asked)).toEqual({
        verdict: 'settled',
        why: 'its loop recorded BLOCKED/NODE_UNREACHABLE: Node web-1 is unreachable',
      });
    expect(askedFor).toBe(0);
    // A rollout from before the patch counts the first unanswered pass, as it did.
    expect(judgeGateNode(unanswered('2026-12-05T10:00:05Z'), bound, early, before).verdict).toBe('settled');
  });

  it('the wave passes when all converged; a failure waits for the nodes on their way, a late node halts at once', () => {
    const v = (...verdicts: Array<Parameters<typeof waveGate>[0][number]['verdict']>) =>
      waveGate(verdicts.map((verdict) => ({ verdict })));
    expect(v('converged', 'converged')).toBe('passed');
    expect(v('converged', 'waiting')).toBe('waiting');
    expect(v('settled', 'waiting')).toBe('waiting');
    expect(v('settled', 'converged')).toBe('failed');
    expect(v('refused', 'unstarted')).toBe('failed');
    expect(v('late', 'waiting')).toBe('failed');
    expect(v('converged', 'unstarted')).toBe('waiting');
  });
});

describe('settlesRollout: what a rollout counts a node by', () => {
  type Row = { name: string; state: Parameters<typeof settlesRollout>[0]; settles: boolean; asks: string[] };
  const stale = (stale_retakes?: number) => ({ status: 'BLOCKED' as const, reason: 'STALE_OBSERVATION' as const, stale_retakes });
  const IN_5S = '2026-12-05T10:00:05Z';
  const unanswered = (not_before?: string | null) => ({
    status: 'BLOCKED' as const,
    reason: 'NODE_UNREACHABLE' as const,
    not_before,
    stale_retakes: 0,
  });
  const rows: Row[] = [
    {
      name: 'CONVERGED',
      state: { status: 'CONVERGED', reason: 'CONVERGED_AFTER_REPAIR', stale_retakes: 0 },
      settles: true,
      asks: [],
    },
    {
      name: 'BLOCKED for a refusal',
      state: { status: 'BLOCKED', reason: 'ACTION_REFUSED', stale_retakes: 0 },
      settles: true,
      asks: [],
    },
    {
      name: 'CONFLICT',
      state: { status: 'CONFLICT', reason: 'CONFLICTING_WRITER', stale_retakes: 0 },
      settles: true,
      asks: [],
    },
    {
      name: 'RETRY: the loop retries on its own',
      state: { status: 'RETRY', reason: 'ACTION_FAILED' },
      settles: false,
      asks: [],
    },
    { name: 'no decision yet', state: { status: null, reason: null }, settles: false, asks: [] },
    { name: 'the first stale snapshot: the loop re-takes it itself', state: stale(1), settles: false, asks: ['stale'] },
    {
      name: 'the second in a row: still its own retake',
      state: stale(STALE_RETAKES_A_ROLLOUT_WAITS),
      settles: false,
      asks: ['stale'],
    },
    {
      name: 'the third in a row: a standing problem, counted',
      state: stale(STALE_RETAKES_A_ROLLOUT_WAITS + 1),
      settles: true,
      asks: [],
    },
    { name: 'a loop from before the count (no stale_retakes): counted, as before', state: stale(), settles: true, asks: [] },
    {
      name: 'an unanswered pass the loop re-probes by itself (its own not_before)',
      state: unanswered(IN_5S),
      settles: false,
      asks: ['reprobe'],
    },
    {
      name: 'an unanswered pass left to the resync (a third in a row): the node is gone for longer, counted',
      state: unanswered(null),
      settles: true,
      asks: [],
    },
    { name: 'a loop from before the rule (no not_before in its state): counted', state: unanswered(), settles: true, asks: [] },
    {
      name: 'a time of its own on another BLOCKED decision is no re-probe: counted',
      state: { status: 'BLOCKED', reason: 'ACTION_REFUSED', not_before: IN_5S, stale_retakes: 0 },
      settles: true,
      asks: [],
    },
  ];
  for (const row of rows)
    it(row.name, () => {
      const asked: string[] = [];
      const waits = { staleRetake: () => (asked.push('stale'), true), reprobe: () => (asked.push('reprobe'), true) };
      expect(settlesRollout(row.state, waits)).toBe(row.settles);
      expect(asked).toEqual(row.asks);
    });
  it('a run from before the patches counts the first stale snapshot and the first unanswered pass, as it did', () => {
    const before = { staleRetake: () => false, reprobe: () => false };
    expect(settlesRollout(stale(1), before)).toBe(true);
    expect(settlesRollout(unanswered(IN_5S), before)).toBe(true);
  });
});

describe('selectors', () => {
  it('every term must hold; != holds where the label is absent', () => {
    const web = { role: 'web', zone: 'eu-west-1' };
    expect(selects(sel('role=web,zone=eu-*'), 'n-1', web)).toBe(true);
    expect(selects(sel('role=web,zone!=eu-*'), 'n-1', web)).toBe(false);
    expect(selects(sel('zone!=b'), 'n-1', {})).toBe(true);
    expect(selects(sel('zone=b'), 'n-1', {})).toBe(false);
    expect(selects(sel('canary'), 'n-1', { canary: '' })).toBe(true);
    expect(selects(sel('!canary'), 'n-1', { canary: '' })).toBe(false);
    expect(selects(sel('name=web-?'), 'web-7', {})).toBe(true);
    expect(selects(sel('name=web-?'), 'web-17', {})).toBe(false);
    expect(selects(sel('*'), 'anything', {})).toBe(true);
  });

  it('a bad selector says what is wrong and how to write one', () => {
    const bad = (text: string) => {
      const parsed = parseSelector(text);
      return parsed.ok ? null : parsed.error;
    };
    expect(bad('role=web,')).toMatch(/^selector "role=web," has an empty term — fix: write terms like role=web/);
    expect(bad('!role=web')).toMatch(/negates a comparison: write key!=value instead — fix:/);
    expect(bad('name!=web-1')).toMatch(/names nodes as name=<pattern>/);
    expect(bad('role=we b')).toMatch(/compares with a value that is not letters/);
    // A pattern is a glob, never a regular expression.
    expect(selects(sel('name=web.1'), 'webx1', {})).toBe(false);
  });
});
