import { describe, expect, it } from 'vitest';
import { emptyHistory, recordResolution, type DecisionRule, type History } from '../../src/domain';
import { writerRule } from '../../src/domain/repeated-drift';
import { DECISION_RULE } from '../../src/contract/patches';
import { D6, D7, later, n24, n24After, pass, snapshot } from './fixtures';

/*
 * Repeated drift is a writer (issue 18, hole 10b): a writer that changes a managed file back more
 * slowly than conflict_window (10m) was repaired as new drift every time, forever. The loop now
 * remembers each target's proven repairs within writer_horizon, across passes and continue-as-new,
 * and the drift after writer_repairs of them is CONFLICT/REPEATED_DRIFT with the repairs as the
 * evidence. Each row runs the loop's real pass over a node where another writer puts config at
 * D6 every `every` minutes and Datum writes D7 back.
 */

const MIN = 60_000;
type Policy = Record<string, unknown>;
interface Row {
  name: string;
  policy?: Policy;
  /** Minutes between the writer's changes. */
  every: number;
  drifts: number;
  rules?: (rule: DecisionRule) => boolean;
  /** What each drift's pass decided, as status/reason of the pass's final decision. */
  outcomes: string[];
}

/** One pass per drift; the history crosses each as continue-as-new carries it (plain JSON). */
async function writerEvery(row: Pick<Row, 'policy' | 'every' | 'drifts' | 'rules'>, start = emptyHistory(), fromMin = 0) {
  const intent = n24(12, { policy: row.policy });
  let history: History = start;
  const outcomes: string[] = [];
  const decisions = [];
  for (let i = 0; i < row.drifts; i++) {
    const at = later((fromMin + i * row.every) * MIN);
    const pre = snapshot({ ...n24After(), config: D6(), markers: { config: `file:writer-${i}` } }, { at });
    const post = () => snapshot({ ...n24After(), config: D7(), markers: { config: 'ours:config' } }, { at: later(1000, at) });
    const { final } = await pass(pre, post, { intent, history, now: at, ...(row.rules ? { rules: row.rules } : {}) });
    history = JSON.parse(JSON.stringify(final.history)) as History;
    outcomes.push(`${final.decision.convergence_status}/${final.decision.reason}`);
    decisions.push(final.decision);
  }
  return { outcomes, history, decisions };
}

const REPAIRED = 'CONVERGED/CONVERGED_AFTER_REPAIR';
const STOPPED = 'CONFLICT/REPEATED_DRIFT';

const ROWS: Row[] = [
  {
    name: 'default policy: the drift after 3 repairs within 24h is a writer',
    every: 15,
    drifts: 5,
    outcomes: [REPAIRED, REPAIRED, REPAIRED, STOPPED, STOPPED],
  },
  {
    name: 'writer_repairs 2: the third drift is a writer',
    policy: { writer_repairs: 2 },
    every: 15,
    drifts: 3,
    outcomes: [REPAIRED, REPAIRED, STOPPED],
  },
  {
    name: 'writer_repairs 0 turns the rule off: every drift is repaired',
    policy: { writer_repairs: 0 },
    every: 15,
    drifts: 6,
    outcomes: Array<string>(6).fill(REPAIRED),
  },
  {
    name: 'a writer slower than writer_horizon / writer_repairs is ordinary drift each time',
    policy: { writer_horizon: '40m' },
    every: 15,
    drifts: 6,
    outcomes: Array<string>(6).fill(REPAIRED),
  },
  {
    name: 'a loop that ran before the rule keeps repairing (the patch is not in force)',
    every: 15,
    drifts: 5,
    rules: (rule) => rule !== DECISION_RULE.repeatedDriftIsWriter,
    outcomes: Array<string>(5).fill(REPAIRED),
  },
];

describe('repeated drift is a writer', () => {
  for (const row of ROWS)
    it(row.name, async () => {
      expect((await writerEvery(row)).outcomes).toEqual(row.outcomes);
    });

  it('the conflict holds the earlier repairs as evidence and stops repair on the node', async () => {
    const { decisions, history } = await writerEvery({ every: 15, drifts: 4 });
    const stopped = decisions[3];
    expect(stopped.authorized_actions).toEqual([]);
    expect(stopped.reason_detail).toMatch(/"config" drifted again after 3 repair\(s\) within writer_horizon 86400s/);
    const sequence = stopped.conflicting_writer_evidence?.find((c) => c.resource_key === 'config')?.sequence ?? [];
    // Three (drift found, repair proven) pairs, then this drift.
    expect(sequence.map((p) => [p.at, p.value, p.marker])).toEqual([
      [later(0), D6(), 'file:writer-0'],
      [later(1000), D7(), 'ours:config'],
      [later(15 * MIN), D6(), 'file:writer-1'],
      [later(15 * MIN + 1000), D7(), 'ours:config'],
      [later(30 * MIN), D6(), 'file:writer-2'],
      [later(30 * MIN + 1000), D7(), 'ours:config'],
      [later(45 * MIN), D6(), 'file:writer-3'],
    ]);
    expect(stopped.conditions.find((c) => c.type === 'CONFLICTING_WRITER')).toMatchObject({
      resource_key: 'config',
      needs_judgement: true,
    });
    expect(history.conflicts.config?.repeated_drift).toEqual({ repairs: 3, horizon: '86400s' });
  });

  it('a retake starts the count afresh: the writer gets writer_repairs more repairs before the next CONFLICT', async () => {
    const first = await writerEvery({ policy: { writer_repairs: 2 }, every: 15, drifts: 3 });
    const resolved = recordResolution(
      first.history,
      { resource_key: 'config', resolution: 'retake', by: 'alice' },
      later(46 * MIN),
    );
    expect(resolved.error).toBeNull();
    expect(resolved.history.repair_trail).toEqual({});
    const after = await writerEvery({ policy: { writer_repairs: 2 }, every: 15, drifts: 3 }, resolved.history, 60);
    expect(after.outcomes).toEqual([REPAIRED, REPAIRED, STOPPED]);
  });

  it('memory is bounded: a trail keeps at most writer_repairs repairs, within writer_horizon', async () => {
    const { history } = await writerEvery({ policy: { writer_repairs: 2, writer_horizon: '20m' }, every: 15, drifts: 8 });
    const trails = Object.values(history.repair_trail ?? {});
    expect(trails).toHaveLength(1);
    expect(trails[0]?.length).toBeLessThanOrEqual(2);
  });

  it('drift under Datum’s own marker (intent moved, not a writer) is not counted as another writer', async () => {
    const { history } = await writerEvery({ policy: { writer_repairs: 2 }, every: 15, drifts: 2 });
    const at = later(30 * MIN);
    const pre = snapshot({ ...n24After(), config: D6(), markers: { config: 'ours:config' } }, { at });
    const post = () => snapshot({ ...n24After(), config: D7(), markers: { config: 'ours:config-2' } }, { at: later(1000, at) });
    const { final } = await pass(pre, post, { intent: n24(12, { policy: { writer_repairs: 2 } }), history, now: at });
    expect(final.decision.convergence_status).not.toBe('CONFLICT');
  });

  it('the policy fields change no digest unless written, and default to 24h and 3', () => {
    expect(n24(12).digest).toBe(n24(12, { policy: {} }).digest);
    expect(n24(12, { policy: { writer_repairs: 3 } }).digest).not.toBe(n24(12).digest);
    expect(writerRule(n24(12).policy)).toMatchObject({ horizon: '86400s', repairs: 3 });
  });
});
