import { describe, expect, it } from 'vitest';
import type { ApplyFailure, AuthorizedAction, DecisionRule, ExecutionEvidence, History, Observation } from '../../src/domain';
import { DECISION_RULE } from '../../src/contract';
import {
  D6,
  D7,
  MAINTENANCE_OVERRIDE,
  NOW,
  actionsOf,
  applied,
  later,
  n24After,
  n24Before,
  oursFor,
  pass,
  snapshot,
} from './fixtures';

/*
 * A pass acted, and its fresh post-action probe did not come: the agent went away, the probe was
 * stale, or agent.yaml became invalid. A gate closes on the probe, so the status is the gate's
 * (BLOCKED), yet what the agent itself answered needs no probe and is judged (issue 10, the two
 * holes the sequence properties found). Each fix is a decision rule a running loop answers from
 * patched(); "not in force" is what a loop that started before it replays, and must stay as it was.
 */

const MIN = 60_000;

/** Answers every rule as `inForce` says, and records which were asked (each ask writes a patch marker). */
function ruleLog(inForce: (rule: DecisionRule) => boolean = () => true) {
  const asked: DecisionRule[] = [];
  return {
    asked,
    rules: (rule: DecisionRule) => {
      asked.push(rule);
      return inForce(rule);
    },
  };
}
const allBut = (off: DecisionRule) => (rule: DecisionRule) => rule !== off;

const conditionsOf = (d: { conditions: { type: string; resource_key: string | null }[] }) =>
  d.conditions.map((c) => `${c.type}${c.resource_key ? `:${c.resource_key}` : ''}`);

// ---------------------------------------------------------------------------------------------
// 1. MARKER_MOVED, then no probe.

/** Another writer switched `current` between the plan and the apply: the agent refuses build, app is skipped. */
const buildMoved = (a: AuthorizedAction): ExecutionEvidence | ApplyFailure =>
  a.resource_key === 'build'
    ? {
        kind: 'refused',
        refusal_type: 'MarkerMoved',
        message:
          'MARKER_MOVED: "build" changed after the snapshot the plan was made from (planned marker current->7.3, now current->theirs)',
      }
    : applied(a);

/** The ways a probe is lost after acting, and the gate each closes. */
const LOST: { name: string; probe: (() => Observation | null) | null; reason: string }[] = [
  { name: 'the agent went away', probe: null, reason: 'NODE_UNREACHABLE' },
  {
    name: 'the probe is stale',
    probe: () => snapshot(n24Before(), { at: later(-2 * MIN), heartbeat_at: NOW }),
    reason: 'STALE_OBSERVATION',
  },
  {
    name: 'agent.yaml became invalid',
    probe: () => snapshot(n24Before(), { config_error: 'agent.yaml: reconciliation.mode must be observe or enforce' }),
    reason: 'AGENT_CONFIG_INVALID',
  },
];

/** The node back after the lost probe: release:current where the other writer put it. */
const theirs = () => snapshot({ ...n24Before(), markers: { build: 'current->theirs' } }, { at: later(MIN) });

describe('MARKER_MOVED, then no probe: the conflict opens anyway', () => {
  for (const lost of LOST) {
    it(`${lost.name}: BLOCKED on the gate, with CONFLICTING_WRITER open and the refusal as evidence`, async () => {
      const pre = snapshot(n24Before());
      const { final } = await pass(pre, lost.probe, { answer: buildMoved });
      const d = final.decision;
      expect([d.convergence_status, d.reason]).toEqual(['BLOCKED', lost.reason]);
      expect(d.execution_evidence.map((e) => `${e.resource_key}:${e.outcome}`)).toEqual(['build:refused', 'app:skipped']);
      expect(conditionsOf(d)).toContain('CONFLICTING_WRITER:build');
      expect(d.reason_detail).toContain('refused "build" as MARKER_MOVED');
      // The plan's (time, value, marker), then the agent's refusal: what the marker moved to is unknown yet.
      const build = d.conflicting_writer_evidence?.find((e) => e.resource_key === 'build');
      expect(build?.sequence.map((p) => [p.at, p.marker])).toEqual([
        [pre.observed_at, 'current->7.3'],
        [NOW, null],
      ]);
      expect(build?.sequence[1]?.source).toContain('no probe this pass could judge');
      // Durable on the node and in the store like any conflict.
      expect(d.operator_decisions?.map((o) => `${o.resource_key}:${o.kind}`)).toEqual(['build:conflict']);
      expect(final.decisions_to_record?.map((r) => `${r.resource_key}:${r.kind}`)).toEqual(['build:conflict']);
    });
  }

  it('the next pass stops repair on the node until an operator resolves it', async () => {
    const { final } = await pass(snapshot(n24Before()), null, { answer: buildMoved });
    const next = await pass(theirs(), null, { history: final.history, now: later(MIN) });
    const d = next.first.decision;
    expect([d.convergence_status, d.reason, d.recheck_trigger.trigger]).toEqual([
      'CONFLICT',
      'CONFLICTING_WRITER',
      'OPERATOR_RESOLUTION',
    ]);
    expect(actionsOf(next.first)).toEqual([]);
    expect(d.planned_actions.find((p) => p.resource_key === 'build')?.withheld_because).toContain('conflict');
  });

  it('asks its rule only where the agent answered something the probe would have judged', async () => {
    // unreachable-reprobes-soon times the re-probe of every pass the node did not answer: asked here too.
    const moved = ruleLog();
    await pass(snapshot(n24Before()), null, { answer: buildMoved, rules: moved.rules });
    expect(moved.asked).toEqual([DECISION_RULE.unreachableReprobesSoon, DECISION_RULE.answersOutliveLostProbe]);
    // Every action applied, nothing repaired before: no other rule changes this pass, so none is asked.
    const quiet = ruleLog();
    await pass(snapshot(n24Before()), null, { rules: quiet.rules });
    expect(quiet.asked).toEqual([DECISION_RULE.unreachableReprobesSoon]);
  });

  it('not in force (a loop that started before it): the conflict is lost and the next pass writes build again', async () => {
    const rules = allBut(DECISION_RULE.answersOutliveLostProbe);
    const { final } = await pass(snapshot(n24Before()), null, { answer: buildMoved, rules });
    expect([final.decision.convergence_status, final.decision.reason]).toEqual(['BLOCKED', 'NODE_UNREACHABLE']);
    expect(conditionsOf(final.decision)).not.toContain('CONFLICTING_WRITER:build');
    expect(final.decision.conflicting_writer_evidence).toBeNull();
    const next = await pass(theirs(), null, { history: final.history, now: later(MIN), rules });
    expect(actionsOf(next.first)).toEqual(['build:release.install', 'app:service.restart']);
  });
});

describe('a refusal, then no probe: it stands like one the probe saw', () => {
  const digestMismatch = (a: AuthorizedAction): ExecutionEvidence | ApplyFailure =>
    a.resource_key === 'build'
      ? { kind: 'refused', refusal_type: 'ArtifactDigestMismatch', message: 'artifacts/app-7.4.tgz does not have sha256 aaaa…' }
      : applied(a);

  it('ACTION_REFUSED opens, and the next pass does not send the same action again while nothing changed', async () => {
    const { final } = await pass(snapshot(n24Before()), null, { answer: digestMismatch });
    expect([final.decision.convergence_status, final.decision.reason]).toEqual(['BLOCKED', 'NODE_UNREACHABLE']);
    expect(conditionsOf(final.decision)).toContain('ACTION_REFUSED:build');
    expect(final.decision.reason_detail).toContain('The agent refused "build": ArtifactDigestMismatch');
    const next = await pass(snapshot(n24Before(), { at: later(MIN) }), null, { history: final.history, now: later(MIN) });
    expect(actionsOf(next.first)).toEqual([]);
    expect(next.first.decision.planned_actions.find((p) => p.resource_key === 'build')?.withheld_because).toContain(
      'ArtifactDigestMismatch',
    );
  });

  it('not in force: the next pass sends it again', async () => {
    const rules = allBut(DECISION_RULE.answersOutliveLostProbe);
    const { final } = await pass(snapshot(n24Before()), null, { answer: digestMismatch, rules });
    expect(conditionsOf(final.decision)).not.toContain('ACTION_REFUSED:build');
    const next = await pass(snapshot(n24Before(), { at: later(MIN) }), null, { history: final.history, now: later(MIN), rules });
    expect(actionsOf(next.first)).toEqual(['build:release.install', 'app:service.restart']);
  });
});

// ---------------------------------------------------------------------------------------------
// 2. A write of this pass ends the repair record of its resource, whatever the probe says.

/** A converged history whose last repair put config and app back at NOW (markers ours:config, ours:app). */
async function afterRepair(): Promise<History> {
  const pre = snapshot({ ...n24After(), config: D6(), app: { build: '7.4', config_sha256: D6() } });
  const { final } = await pass(pre, () => snapshot({ ...n24After(), markers: oursFor(['config', 'app']) }));
  expect(final.decision.convergence_status).toBe('CONVERGED');
  expect(final.history.repaired.app?.marker).toBe('ours:app');
  return final.history;
}

/**
 * Then an approved override makes the release the operator's (7.3 on disk), so the app must run
 * 7.3: it drifts under the marker of Datum's own repair, and Datum restarts it.
 */
const OWNED = { overrides: { maintenance: MAINTENANCE_OVERRIDE, build: MAINTENANCE_OVERRIDE } };
const node = (app: string, at: string, running = '7.4') =>
  snapshot(
    {
      ...n24After(),
      build: '7.3',
      app: { build: running, config_sha256: D7() },
      markers: { ...oursFor(['config']), build: 'theirs', app },
    },
    { ...OWNED, at },
  );
/** The restart ran (it left marker ours:app-2); what it did is for the probe to say. */
const restarted = (a: AuthorizedAction) => ({ ...applied(a, later(MIN)), marker_after: 'ours:app-2' });

describe('an ineffective repair, then no probe: the next pass retries, it does not take its own write for a conflict', () => {
  it('the restart ran and the probe was lost; the next pass restarts the app again and converges', async () => {
    const history = await afterRepair();
    const { final } = await pass(node('ours:app', later(MIN)), null, { history, now: later(MIN), answer: restarted });
    expect([final.decision.convergence_status, final.decision.reason]).toEqual(['BLOCKED', 'NODE_UNREACHABLE']);
    expect(final.decision.attempt_count).toBe(1);
    // Nobody but Datum wrote the app since its repair: the node is back with the marker of Datum's restart.
    const next = await pass(node('ours:app-2', later(2 * MIN)), () => node('ours:app-3', later(2 * MIN), '7.3'), {
      history: final.history,
      now: later(2 * MIN),
      answer: (a) => ({ ...applied(a, later(2 * MIN)), marker_after: 'ours:app-3' }),
    });
    expect(next.first.decision.convergence_status).not.toBe('CONFLICT');
    expect(conditionsOf(next.first.decision)).not.toContain('CONFLICTING_WRITER:app');
    expect(actionsOf(next.first)).toEqual(['app:service.restart']);
    expect([next.final.decision.convergence_status, next.final.decision.reason]).toEqual(['CONVERGED', 'CONVERGED_AFTER_REPAIR']);
  });

  it('asks its rule only when a write of this pass met a repair record', async () => {
    const history = await afterRepair();
    const log = ruleLog();
    await pass(node('ours:app', later(MIN)), null, { history, now: later(MIN), answer: restarted, rules: log.rules });
    // With unreachable-reprobes-soon, which times the re-probe of a pass the node did not answer.
    expect(log.asked).toEqual([DECISION_RULE.unreachableReprobesSoon, DECISION_RULE.ownExecutedWriteEndsProof]);
  });

  it('not in force: the next pass takes the marker of Datum’s own restart for another writer (CONFLICT), as before', async () => {
    const rules = allBut(DECISION_RULE.ownExecutedWriteEndsProof);
    const history = await afterRepair();
    const { final } = await pass(node('ours:app', later(MIN)), null, { history, now: later(MIN), answer: restarted, rules });
    const next = await pass(node('ours:app-2', later(2 * MIN)), null, { history: final.history, now: later(2 * MIN), rules });
    expect(next.first.decision.convergence_status).toBe('CONFLICT');
    expect(conditionsOf(next.first.decision)).toContain('CONFLICTING_WRITER:app');
    expect(actionsOf(next.first)).toEqual([]);
  });
});

describe('a restart that failed on the way, with a probe: its marker is Datum’s too', () => {
  // The agent started the new process and lost it: the apply failed, and the process marker moved.
  const crashed = (): ApplyFailure => ({ kind: 'failed', detail: 'service exited during start' });

  it('RETRY on the probe, and the next pass retries instead of opening a CONFLICT', async () => {
    const history = await afterRepair();
    const { final } = await pass(node('ours:app', later(MIN)), () => node('pid:restarted', later(MIN)), {
      history,
      now: later(MIN),
      answer: crashed,
    });
    expect([final.decision.convergence_status, final.decision.reason]).toEqual(['RETRY', 'ACTION_FAILED']);
    const next = await pass(node('pid:restarted', later(2 * MIN)), null, { history: final.history, now: later(2 * MIN) });
    expect(next.first.decision.convergence_status).not.toBe('CONFLICT');
    expect(actionsOf(next.first)).toEqual(['app:service.restart']);
  });

  it('not in force: CONFLICT on the next pass, as before', async () => {
    const rules = allBut(DECISION_RULE.ownExecutedWriteEndsProof);
    const history = await afterRepair();
    const { final } = await pass(node('ours:app', later(MIN)), () => node('pid:restarted', later(MIN)), {
      history,
      now: later(MIN),
      answer: crashed,
      rules,
    });
    const next = await pass(node('pid:restarted', later(2 * MIN)), null, { history: final.history, now: later(2 * MIN), rules });
    expect(next.first.decision.convergence_status).toBe('CONFLICT');
  });
});
