import { describe, expect, it } from 'vitest';
import {
  CONDITION_TYPES,
  WORK_CONDITIONS,
  WORK_RULES,
  applyWorkResolution,
  claimRefusal,
  claimWork,
  draft,
  emptyHistory,
  judgeLoopResolution,
  mergeConditions,
  needsJudgement,
  nextDeadline,
  openWorkItem,
  parseClaim,
  parseResolve,
  passReport,
  resolveRefusal,
  resolvedWork,
  takeReport,
  tickWork,
  workTargets,
  episodeRefusal,
  reportMismatch,
  workEpisode,
  type Condition,
  type History,
  type Json,
  type LedgerEntry,
} from '../../src/domain';
import { workItemId, type LoopResolution, type PassReport, type ReportedResource, type WorkItem } from '../../src/contract/work';
import { NOW, later, loopResolution, n24, n24After, n24Before, pass, snapshot } from './fixtures';

/*
 * The judgement of work items, table-driven (docs/work-items.md): which resolutions each
 * condition allows and when the node refuses one, what a resolution does to the loop's history,
 * and when an item closes, reopens or only learns more. The workflow only wires these.
 */

const NODE = 'N-24';
const LOOP = 'datum/N-24/gen-12';

const condition = (type: Condition['type'], key: string | null = 'config'): Condition => ({
  ...draft(type, key, `${type} on ${key}`, { seen: type }),
  since: NOW,
});

const managed = (key = 'config', o: Partial<ReportedResource> = {}): ReportedResource => ({
  resource_key: key,
  ownership: 'MANAGED',
  effective_mode: 'enforce',
  declared: true,
  protected_by: [],
  ...o,
});

function report(o: Partial<PassReport> = {}): PassReport {
  return {
    node: NODE,
    loop: LOOP,
    generation: 12,
    digest: 'sha256:' + 'd'.repeat(64),
    ledger_seq: 5,
    decided_at: NOW,
    fresh: true,
    status: 'BLOCKED',
    reason: 'RETRY_BUDGET_EXHAUSTED',
    reason_detail: 'spent',
    mode: 'enforce',
    retry_budget: 3,
    conditions: [condition('RETRY_BUDGET_EXHAUSTED')],
    resources: [managed()],
    ...o,
  };
}

const item = (type: Condition['type'] = 'RETRY_BUDGET_EXHAUSTED', r: Partial<PassReport> = {}, key: string | null = 'config') =>
  openWorkItem(
    workItemId(NODE, type, key),
    {
      node: NODE,
      condition: type as never,
      resource_key: key,
      report: report({ conditions: [condition(type, key)], ...r }),
      escalate_after: '1h',
    },
    NOW,
  );

const resolve = (resolution: string, o: Record<string, unknown> = {}) => {
  const parsed = parseResolve({ resolution, by: 'alice', ...o });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
};

/** An item resolved by `resolution`, recorded by the loop as entry #6. */
const resolved = (i: WorkItem, resolution: string, o: Record<string, unknown> = {}) =>
  resolvedWork(i, resolve(resolution, o), 'alice@laptop', { seq: 6, loop: LOOP }, NOW);

describe('which conditions open work, and what each allows', () => {
  it('every condition that needs judgement has resolutions, and no other does', () => {
    // A loop's, and the fleet's two that need a person (src/domain/fleet.ts): a node left
    // without a loop, a loop whose node the authority no longer declares.
    const fleet = ['NO_RUNNING_LOOP', 'NO_DESIRED_STATE'];
    expect([...CONDITION_TYPES.filter(needsJudgement), ...fleet].sort()).toEqual([...WORK_CONDITIONS].sort());
  });

  it.each([
    ['CONFLICTING_WRITER', ['retake', 'yield']],
    ['RETRY_BUDGET_EXHAUSTED', ['grant', 'hold']],
    ['REPAIR_DEADLINE_EXCEEDED', ['grant', 'hold']],
    ['DESTRUCTIVE_REPAIR_REQUIRED', ['approve', 'decline']],
    ['UNKNOWN_OWNERSHIP', ['leave', 'adopt']],
    ['ACTION_REFUSED', ['retry', 'hold']],
    ['INTENT_DIGEST_MISMATCH', ['rebind', 'hold']],
    ['OBSERVED_DRIFT', ['hold']],
  ] as const)('%s: %j', (type, kinds) => {
    expect(WORK_RULES[type].map((r) => r.resolution)).toEqual(kinds);
  });
});

describe('a resolution is refused with the reason, or allowed', () => {
  const rows: Array<{
    name: string;
    item: () => WorkItem;
    resolution: string;
    o?: Record<string, unknown>;
    refused: RegExp | null;
  }> = [
    { name: 'grant within the budget', item: () => item(), resolution: 'grant', o: { attempts: 2 }, refused: null },
    { name: 'hold', item: () => item(), resolution: 'hold', refused: null },
    {
      name: 'a resolution of another condition',
      item: () => item(),
      resolution: 'retake',
      refused: /retake is not a resolution of RETRY_BUDGET_EXHAUSTED — fix: choose one of: grant \(.*\); hold/,
    },
    {
      name: 'grant past the retry_budget',
      item: () => item(),
      resolution: 'grant',
      o: { attempts: 4 },
      refused: /grant 4 is more than the retry_budget of 3 — fix: grant 1 to 3/,
    },
    {
      name: 'retake of a resource agent.yaml sets to observe',
      item: () => item('CONFLICTING_WRITER', { resources: [managed('config', { effective_mode: 'observe' })] }),
      resolution: 'retake',
      refused: /agent.yaml on N-24 says reconciliation.resources.config: observe.*— fix: change that line/,
    },
    {
      name: 'retake on an observe-mode host',
      item: () => item('CONFLICTING_WRITER', { mode: 'observe', resources: [managed('config', { effective_mode: 'observe' })] }),
      resolution: 'retake',
      refused: /says reconciliation.mode: observe/,
    },
    {
      name: 'yield on an observe-mode host (it writes nothing)',
      item: () => item('CONFLICTING_WRITER', { mode: 'observe', resources: [managed('config', { effective_mode: 'observe' })] }),
      resolution: 'yield',
      refused: null,
    },
    {
      name: 'retry of a target an agent.yaml override protects',
      item: () =>
        item('ACTION_REFUSED', {
          resources: [
            managed('config', { ownership: 'OPERATOR_OWNED', protected_by: ['overrides.config (approved by oncall)'] }),
          ],
        }),
      resolution: 'retry',
      refused: /protects "config" \(overrides.config \(approved by oncall\)\)/,
    },
    {
      name: 'adopt of a resource desired state does not declare',
      item: () => item('UNKNOWN_OWNERSHIP', { resources: [managed('config', { ownership: 'UNKNOWN', declared: false })] }),
      resolution: 'adopt',
      refused:
        /desired state does not declare "config", so there is nothing to manage it to — fix: declare it in desired\/nodes\/N-24.yaml/,
    },
    { name: 'leave of an unknown resource', item: () => item('UNKNOWN_OWNERSHIP'), resolution: 'leave', refused: null },
    {
      name: 'approve of a destructive repair (every agent refuses one)',
      item: () => item('DESTRUCTIVE_REPAIR_REQUIRED'),
      resolution: 'approve',
      refused: /refuses every destructive action.*— fix: clear the obstruction/,
    },
    {
      name: 'a resolution while another resolver holds the claim',
      item: () => claimWork(item(), { by: 'bob', lease_ms: 60_000 }, 'bob@host', NOW),
      resolution: 'hold',
      refused: /claimed by bob \(bob@host\) until .* — fix: wait for the lease to end/,
    },
    {
      name: 'a resolution by the resolver holding the claim',
      item: () => claimWork(item(), { by: 'alice', lease_ms: 60_000 }, null, NOW),
      resolution: 'hold',
      refused: null,
    },
    {
      name: 'a second resolution while the first waits for its observation',
      item: () => resolved(item(), 'grant', { attempts: 1 }),
      resolution: 'hold',
      refused: /was resolved by alice \(grant\) .* waits for the observation that confirms it/,
    },
  ];
  it.each(rows)('$name', ({ item: make, resolution, o, refused }) => {
    const why = resolveRefusal(make(), resolve(resolution, o), later(1000));
    if (refused) expect(why).toMatch(refused);
    else expect(why).toBeNull();
  });

  it.each([
    [{ resolution: 'grant', by: 'alice' }, /attempts nothing must be a whole number of 1 or more for grant/],
    [{ resolution: 'hold', by: 'alice', attempts: 2 }, /attempts goes with grant only — fix: leave it out/],
    [{ resolution: 'fix-it', by: 'alice' }, /resolution "fix-it" is not a resolution — fix: use one of retake, yield/],
    [{ resolution: 'hold' }, /by nothing must name who resolves/],
    [{ resolution: 'hold', by: 'alice', force: true }, /unknown field\(s\) force — fix: use only resolution, by, note, attempts/],
    [[1, 2], /is not an object/],
  ])('payload %j is refused: %s', (payload, error) => {
    const parsed = parseResolve(payload);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toMatch(error);
  });

  it.each([
    [{ by: 'alice' }, 15 * 60_000],
    [{ by: 'alice', lease: '2s' }, 2000],
  ])('claim %j holds for its lease', (payload, ms) => {
    expect(parseClaim(payload)).toEqual({ ok: true, value: { by: 'alice', lease_ms: ms } });
  });
  it.each([{ by: 'alice', lease: '25h' }, { by: 'alice', lease: 'soon' }, { by: '' }])('claim %j is refused', (payload) => {
    expect(parseClaim(payload).ok).toBe(false);
  });
});

describe('claims are leases', () => {
  const claimed = () => claimWork(item(), { by: 'bob', lease_ms: 2000 }, 'bob@host', NOW);
  it('a second resolver is refused while the lease holds, and may claim once it ran out', () => {
    expect(claimRefusal(claimed(), 'carol', later(1999))).toMatch(/claimed by bob/);
    expect(claimRefusal(claimed(), 'carol', later(2000))).toBeNull();
    expect(claimRefusal(claimed(), 'bob', later(1000))).toBeNull(); // bob renews
  });
  it('the timer ends an expired claim: the item is open again', () => {
    const after = tickWork(claimed(), later(2000), 3_600_000);
    expect([after.state, after.claim]).toEqual(['OPEN', null]);
    expect(nextDeadline(claimed(), 3_600_000)).toBe(later(2000));
  });
  it('an item unclaimed past escalate_after escalates, and an expired claim leaves it escalated', () => {
    expect(tickWork(item(), later(3_599_999), 3_600_000).state).toBe('OPEN');
    const escalated = tickWork(item(), later(3_600_000), 3_600_000);
    expect([escalated.state, escalated.escalated_at]).toEqual(['ESCALATED', later(3_600_000)]);
    const reclaimed = claimWork(escalated, { by: 'bob', lease_ms: 1000 }, null, later(3_600_000));
    expect(tickWork(reclaimed, later(3_601_000), 3_600_000).state).toBe('ESCALATED');
  });
});

describe('an item closes only on a fresh observation, and reopens when a resolution did not clear it', () => {
  const gone = { conditions: [], status: 'CONVERGED' as const, reason: 'CONVERGED_AFTER_REPAIR' as const };
  const rows: Array<{ name: string; item: () => WorkItem; report: Partial<PassReport>; change: string; state: string }> = [
    { name: 'open, the condition still there', item: () => item(), report: { ledger_seq: 6 }, change: 'evidence', state: 'OPEN' },
    {
      name: 'open, a fresh observation without it',
      item: () => item(),
      report: { ...gone, ledger_seq: 6 },
      change: 'closed',
      state: 'CLOSED',
    },
    {
      name: 'open, a note without it (not fresh)',
      item: () => item(),
      report: { ...gone, fresh: false },
      change: 'none',
      state: 'OPEN',
    },
    {
      name: 'resolved, a report from before the resolution',
      item: () => resolved(item(), 'grant', { attempts: 1 }),
      report: { ledger_seq: 6 },
      change: 'evidence',
      state: 'AWAITING_OBSERVATION',
    },
    {
      name: 'resolved, repairing again (RETRY settles nothing)',
      item: () => resolved(item(), 'grant', { attempts: 2 }),
      report: { ledger_seq: 7, status: 'RETRY', reason: 'ACTION_INEFFECTIVE', conditions: [condition('REPAIR_RETRYING')] },
      change: 'none',
      state: 'AWAITING_OBSERVATION',
    },
    {
      name: 'resolved, the next fresh observation still shows it',
      item: () => resolved(item(), 'grant', { attempts: 1 }),
      report: { ledger_seq: 7 },
      change: 'reopened',
      state: 'OPEN',
    },
    {
      name: 'resolved, the next fresh observation without it',
      item: () => resolved(item(), 'grant', { attempts: 1 }),
      report: { ...gone, ledger_seq: 7 },
      change: 'closed',
      state: 'CLOSED',
    },
    {
      name: "resolved, a newer generation's loop without it",
      item: () => resolved(item(), 'grant', { attempts: 1 }),
      report: { ...gone, ledger_seq: 1, loop: 'datum/N-24/gen-13' },
      change: 'closed',
      state: 'CLOSED',
    },
    {
      name: 'held, still there',
      item: () => resolved(item(), 'hold'),
      report: { ledger_seq: 7 },
      change: 'evidence',
      state: 'HELD',
    },
    {
      name: 'held, gone',
      item: () => resolved(item(), 'hold'),
      report: { ...gone, ledger_seq: 7 },
      change: 'closed',
      state: 'CLOSED',
    },
  ];
  it.each(rows)('$name: $change', ({ item: make, report: r, change, state }) => {
    const out = takeReport(make(), report(r), later(5000));
    expect([out.change, out.item.state]).toEqual([change, state]);
  });

  it('a reopened item keeps the resolution that did not clear it, with the new evidence, and no claim', () => {
    const again = condition('RETRY_BUDGET_EXHAUSTED');
    again.message = 'still 7.3 after the granted attempt';
    const out = takeReport(
      resolved(item(), 'grant', { attempts: 1 }),
      report({ ledger_seq: 9, conditions: [again] }),
      later(5000),
    );
    expect(out.item).toMatchObject({
      reopened: 1,
      claim: null,
      resolution: null,
      message: 'still 7.3 after the granted attempt',
    });
    expect(out.item.resolutions.map((r) => [r.resolution, r.by, r.identity, r.outcome])).toEqual([
      ['grant', 'alice', 'alice@laptop', 'not cleared'],
    ]);
    expect(out.item.ledger.map((l) => l.seq)).toEqual([5, 9]);
  });
});

describe('what a resolution does to the loop', () => {
  const spentHistory = (): History => ({
    ...emptyHistory(),
    attempt_count: 3,
    conditions: mergeConditions([], [draft('RETRY_BUDGET_EXHAUSTED', 'app', 'spent', null)], NOW),
  });
  const ask = (o: Partial<LoopResolution>) => loopResolution('RETRY_BUDGET_EXHAUSTED', o);
  it.each([
    { name: 'grant 1 leaves one attempt', o: {}, attempts: 2, error: null },
    { name: 'grant the whole budget', o: { attempts: 3 }, attempts: 0, error: null },
    { name: 'grant past the budget', o: { attempts: 4 }, attempts: 3, error: /grant takes 1 to 3 attempts/ },
    { name: 'hold changes nothing', o: { resolution: 'hold' as const, attempts: null }, attempts: 3, error: null },
    {
      name: 'a condition that is not open',
      o: { resource_key: 'config' },
      attempts: 3,
      error: /has no open RETRY_BUDGET_EXHAUSTED on "config"/,
    },
  ])('$name', ({ o, attempts, error }) => {
    const out = applyWorkResolution(spentHistory(), n24(), ask(o), NOW);
    expect(out.history.attempt_count).toBe(attempts);
    if (error) expect(out.error).toMatch(error);
    else
      expect(out.detail).toMatch(
        /^alice \(alice@laptop\) resolved RETRY_BUDGET_EXHAUSTED on "app" by .*\[datum-work\/N-24\/RETRY_BUDGET_EXHAUSTED\/app\]/,
      );
  });

  it('grant: the next pass repairs again, where the spent budget withheld the repair', async () => {
    const stuck = await pass(snapshot(n24Before()), () => snapshot(n24Before()), {
      history: { ...emptyHistory(), attempt_count: 3 },
    });
    expect(stuck.final.decision.reason).toBe('RETRY_BUDGET_EXHAUSTED');
    expect(stuck.final.decision.authorized_actions).toEqual([]);
    const granted = applyWorkResolution(stuck.final.history, n24(), ask({ resource_key: 'build' }), NOW);
    expect(granted.error).toBeNull();
    const next = await pass(snapshot(n24Before()), () => snapshot(n24After()), { history: granted.history });
    expect(next.final.decision.authorized_actions.map((a) => a.resource_key)).toEqual(['build', 'app']);
    expect(next.final.decision.convergence_status).toBe('CONVERGED');
  });

  it('leave: an undeclared flag stops being UNKNOWN and becomes an operator exception with the resolver as provenance', async () => {
    const debug = { undeclared: [{ resource_key: 'debug', type: 'flag' as const, value: true, marker: 'flag:9' }] };
    const first = await pass(snapshot(n24After(), debug), null);
    expect(first.final.decision.reason).toBe('UNKNOWN_OWNERSHIP');
    const left = applyWorkResolution(
      first.final.history,
      n24(),
      ask({
        condition: 'UNKNOWN_OWNERSHIP',
        resource_key: 'debug',
        resolution: 'leave',
        attempts: null,
        note: 'the debug toggle',
      }),
      NOW,
    );
    const next = await pass(snapshot(n24After(), debug), null, { history: left.history });
    expect(next.final.decision.conditions.map((c) => c.type)).toEqual([]);
    expect(next.final.decision.convergence_status).toBe('CONVERGED');
    const exception = next.final.decision.operator_exceptions.find((e) => e.resource_key === 'debug');
    expect(exception?.provenance).toMatchObject({ approved_by: 'alice', reason: 'the debug toggle', via: 'work item' });
  });

  it('retake and yield go through the conflict record as resolveConflict does', () => {
    const history: History = {
      ...emptyHistory(),
      conflicts: { config: { since: NOW, sequence: [], resolution: null } },
      conditions: mergeConditions([], [draft('CONFLICTING_WRITER', 'config', 'writer', null)], NOW),
    };
    const out = applyWorkResolution(
      history,
      n24(),
      ask({ condition: 'CONFLICTING_WRITER', resource_key: 'config', resolution: 'yield', attempts: null }),
      NOW,
    );
    expect(out.history.yielded.config?.by).toBe('alice');
    expect(out.history.conflicts.config?.resolution?.resolution).toBe('yield');
  });
});

describe('the loop judges a forwarded resolution again, on what it holds now', () => {
  const ask = (o: Partial<LoopResolution>): LoopResolution => ({
    item_id: 'datum-work/N-24/RETRY_BUDGET_EXHAUSTED/build',
    condition: 'RETRY_BUDGET_EXHAUSTED',
    resource_key: 'build',
    resolution: 'grant',
    attempts: 1,
    by: 'alice',
    identity: null,
    note: null,
    ...o,
  });
  const stuck = () =>
    pass(snapshot(n24Before()), () => snapshot(n24Before()), { history: { ...emptyHistory(), attempt_count: 3 } });

  it.each([
    { name: 'grant, as the item allowed it', o: {}, observe: false, error: null },
    {
      name: 'agent.yaml now keeps Datum from writing the resource (observe)',
      o: {},
      observe: true,
      error: /agent\.yaml on N-24 says reconciliation\.resources\.build: observe/,
    },
    {
      name: 'hold writes nothing, so observe does not refuse it',
      o: { resolution: 'hold' as const, attempts: null },
      observe: true,
      error: null,
    },
    {
      name: 'a resolution of another condition',
      o: { resolution: 'retake' as const, attempts: null },
      observe: false,
      error: /retake is not a resolution of RETRY_BUDGET_EXHAUSTED — fix: use one of grant, hold/,
    },
    {
      name: 'approve, sent to the loop directly',
      o: { condition: 'DESTRUCTIVE_REPAIR_REQUIRED' as const, resolution: 'approve' as const, attempts: null },
      observe: false,
      error: /the node agent refuses every destructive action/,
    },
  ])('$name', async ({ o, observe, error }) => {
    const { final } = await stuck();
    const last = observe
      ? { ...final.decision, resources: final.decision.resources.map((r) => ({ ...r, effective_mode: 'observe' as const })) }
      : final.decision;
    const out = judgeLoopResolution(final.history, n24(), last, ask(o), NOW);
    if (error) {
      expect(out.error).toMatch(error);
      expect(out.history).toBe(final.history); // refused: nothing changes, nothing is recorded
    } else expect(out.error).toBeNull();
  });
});

describe("the loop's reports", () => {
  it('go to the item of every condition needing judgement, and to the items told before until a settled report', async () => {
    const out = await pass(snapshot(n24Before(), { mode: 'observe' }), null);
    const decision = out.final.decision;
    const r = passReport(decision, n24(), { seq: 3, decided_at: NOW, loop: LOOP, pass: true });
    expect(r.fresh).toBe(true);
    const targets = workTargets(r, ['datum-work/N-24/CONFLICTING_WRITER/config']);
    expect(targets.open.map((t) => t.id).sort()).toEqual(
      ['build', 'app'].map((k) => workItemId(NODE, 'OBSERVED_DRIFT', k)).sort(),
    );
    expect(targets.tell).toEqual(['datum-work/N-24/CONFLICTING_WRITER/config']);
    expect(targets.keep.sort()).toEqual(targets.open.map((t) => t.id).sort()); // settled: the conflict's item is told once more, then dropped
    expect(r.resources.find((x) => x.resource_key === 'maintenance')?.protected_by).toEqual([
      'overrides.maintenance (approved by oncall)',
    ]);
  });
});

describe('a resolution is bound to the episode it was judged on', () => {
  const RUN = 'run-1';
  const conflict = (values: Json[]) =>
    openWorkItem(
      workItemId(NODE, 'CONFLICTING_WRITER', 'config'),
      {
        node: NODE,
        condition: 'CONFLICTING_WRITER',
        resource_key: 'config',
        report: report({
          status: 'CONFLICT',
          reason: 'CONFLICTING_WRITER',
          conditions: [
            {
              ...draft('CONFLICTING_WRITER', 'config', 'another writer', {
                sequence: values.map((value, i) => ({ at: NOW, value, marker: `m${i}`, source: 'observation' })),
                resolution: null,
              }),
              since: NOW,
            },
          ],
        }),
        escalate_after: '1h',
      },
      NOW,
    );

  it.each([
    ['the same episode', (e: ReturnType<typeof workEpisode>) => e, null],
    [
      'a new run (the condition cleared and came back)',
      (e: ReturnType<typeof workEpisode>) => ({ ...e, run_id: 'run-2' }),
      /is a new episode since you judged it/,
    ],
    [
      'a reopening',
      (e: ReturnType<typeof workEpisode>) => ({ ...e, reopened: 1, opened_at: later(60) }),
      /reopened since you judged it \(0 → 1 times/,
    ],
    [
      'other facts',
      (e: ReturnType<typeof workEpisode>) => ({ ...e, facts: '0'.repeat(16) }),
      /the facts of .* changed since you judged it/,
    ],
  ])('%s', (_name, move, refused) => {
    const judged = workEpisode(item('OBSERVED_DRIFT'), RUN);
    const now = move(judged);
    const r = episodeRefusal('datum-work/N-24/OBSERVED_DRIFT/config', judged, now);
    if (refused === null) expect(r).toBeNull();
    else expect(r).toMatch(refused);
  });

  it("another writer's values are the facts of a conflict: a retake judged about one writer is refused once another writes", () => {
    const one = conflict([{ workers: 2 }, { workers: 2 }]);
    const same = conflict([{ workers: 2 }]);
    const next = conflict([{ workers: 2 }, { workers: 3 }]);
    expect(workEpisode(one, RUN).facts).toBe(workEpisode(same, RUN).facts);
    expect(workEpisode(one, RUN).facts).not.toBe(workEpisode(next, RUN).facts);
    // The claim records the episode; resolving under it on the next writer's facts is refused.
    const claimed = claimWork(one, { by: 'alice', lease_ms: 60_000 }, null, NOW, workEpisode(one, RUN));
    const moved = { ...claimed, evidence: next.evidence };
    expect(resolveRefusal(moved, resolve('retake'), NOW, workEpisode(moved, RUN))).toMatch(
      /the facts of .* changed since you judged it/,
    );
    expect(resolveRefusal(claimed, resolve('retake'), NOW, workEpisode(claimed, RUN))).toBeNull();
    // An episode sent with the resolution outranks the claim's.
    expect(
      resolveRefusal(
        claimed,
        resolve('retake', { episode: { ...workEpisode(one, RUN), reopened: 3 } }),
        NOW,
        workEpisode(claimed, RUN),
      ),
    ).toMatch(/reopened since you judged it/);
  });

  it('a malformed episode is refused by the payload check', () => {
    expect(parseResolve({ resolution: 'hold', by: 'alice', episode: { run_id: 'r' } })).toMatchObject({ ok: false });
    expect(
      parseResolve({ resolution: 'hold', by: 'alice', episode: { run_id: 'r', opened_at: NOW, reopened: 0, facts: 'zz' } }),
    ).toMatchObject({ ok: false });
    expect(
      parseResolve({ resolution: 'hold', by: 'alice', episode: { run_id: 'r', opened_at: NOW, reopened: 0, facts: null } }),
    ).toMatchObject({ ok: true });
  });
});

describe("a report is taken only as its loop's ledger says it", () => {
  const entry = (o: Partial<LedgerEntry> = {}) =>
    ({
      node_id: NODE,
      workflow_id: LOOP,
      seq: 5,
      decided_at: NOW,
      desired_generation: 12,
      desired_digest: 'sha256:' + 'd'.repeat(64),
      convergence_status: 'BLOCKED',
      reason: 'RETRY_BUDGET_EXHAUSTED',
      reason_detail: 'spent',
      mode: 'enforce',
      retry_budget: 3,
      observation_fresh: true,
      conditions: [condition('RETRY_BUDGET_EXHAUSTED')],
      resources: [{ resource_key: 'config', ownership: 'MANAGED', effective_mode: 'enforce' }],
      ...o,
    }) as unknown as LedgerEntry;

  it.each([
    ['the entry it came from', {}, {}, null],
    ['a status the entry does not have', { status: 'CONVERGED' as const }, {}, /\(status\)/],
    ['conditions the entry does not have', { conditions: [] }, {}, /\(conditions\)/],
    ['another loop', { loop: 'datum/N-25/gen-12' }, {}, /\(loop\)/],
    ['fresh, from a note', {}, { reason: 'REBOUND' as const }, /reason, fresh\)/],
    ['fresh, from a stale observation', {}, { observation_fresh: false }, /\(fresh\)/],
  ])('%s', (_name, r, e, refused) => {
    const why = reportMismatch(report(r), entry(e));
    if (refused === null) expect(why).toBeNull();
    else expect(why).toMatch(refused);
  });
});
