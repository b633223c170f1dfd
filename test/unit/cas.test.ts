import { describe, expect, it } from 'vitest';
import { type ApplyFailure, type AuthorizedAction, type ExecutionEvidence } from '../../src/domain';
import { SHA_74, NOW, applied, later, n24After, n24Before, pass, snapshot } from './fixtures';
import { authorizedAction, executionEvidence } from '../../src/schemas';

/*
 * Hole 3 of issue 10 on the controller's side: every action carries what its plan saw, and the
 * agent's two answers about it at the moment of the write are judged as evidence, not as a
 * standing "no": MARKER_MOVED is another writer (CONFLICT), a stale snapshot is re-observed.
 */

/** The agent refuses app as `refusal_type` and applies the rest. */
const refusedAs =
  (refusal_type: string, message: string) =>
  (a: AuthorizedAction): ExecutionEvidence | ApplyFailure =>
    a.resource_key === 'app' ? { kind: 'refused', refusal_type, message } : applied(a);

/** build repaired by this pass; app still on 7.3, its process now someone else's. */
const probeAfterMove = () =>
  snapshot(
    { ...n24After(), app: { build: '7.3', config_sha256: n24Before().app!.config_sha256 } },
    { at: later(90_000), heartbeat_at: later(90_000) },
  );

// The other writer restarted app: its process (the marker) is not the one the plan saw.
const movedProbe = () => {
  const o = probeAfterMove();
  o.resources.app = { ...o.resources.app, marker: 'pid:someone-else' };
  return o;
};

describe('what an action carries from its plan', () => {
  it('every authorized action names the snapshot it was planned from: observed_at, observation_ttl, generation, marker', async () => {
    const pre = snapshot(n24Before(), { at: later(-10_000) });
    const { first } = await pass(pre, null);
    const actions = first.decision.authorized_actions;
    expect(actions.map((a) => a.resource_key)).toEqual(['build', 'app']);
    for (const a of actions) {
      expect(a).toMatchObject({
        observed_at: pre.observed_at,
        observation_ttl: '60s',
        desired_generation: 12,
        observed_marker: pre.resources[a.resource_key].marker,
      });
    }
    // The ledger's plan says the same.
    expect(first.decision.planned_actions.map((p) => [p.observed_at, p.observation_ttl])).toEqual(
      actions.map(() => [pre.observed_at, '60s']),
    );
  });

  it('an action or evidence recorded before these fields existed still reads (ledger v1)', () => {
    const old = {
      resource_key: 'build',
      action: 'release.install',
      desired_generation: 12,
      desired_digest: `sha256:${'d7'.repeat(32)}`,
      idempotency_key: 'k',
      observed_marker: 'current->7.3',
      action_seq: 1,
      spec: { version: '7.4', artifact: '/a.tgz', sha256: SHA_74 },
    };
    expect(authorizedAction.parse(old)).toEqual(old);
    const ev = { ...old, outcome: 'refused', executed_at: NOW, marker_after: null, detail: 'x', refusal: 'x' };
    expect(executionEvidence.parse(ev).refusal_type).toBeUndefined();
  });
});

describe("the agent's MARKER_MOVED", () => {
  it("is CONFLICT with the plan's and the moved marker as conflicting_writer_evidence, not a plain refusal", async () => {
    const pre = snapshot(n24Before());
    const { final } = await pass(pre, movedProbe, {
      answer: refusedAs('MarkerMoved', 'MARKER_MOVED: "app" changed after the snapshot'),
    });
    const d = final.decision;
    expect([d.convergence_status, d.reason, d.recheck_trigger.trigger]).toEqual([
      'CONFLICT',
      'CONFLICTING_WRITER',
      'OPERATOR_RESOLUTION',
    ]);
    expect(d.execution_evidence.find((e) => e.resource_key === 'app')).toMatchObject({
      outcome: 'refused',
      refusal_type: 'MarkerMoved',
    });
    const app = d.conflicting_writer_evidence?.find((e) => e.resource_key === 'app');
    expect(app?.sequence.map((p) => [p.at, p.marker])).toEqual([
      [pre.observed_at, pre.resources.app.marker],
      [later(90_000), 'pid:someone-else'],
    ]);
    expect(app?.sequence[0].value).toEqual(pre.resources.app.value);
    expect(d.conditions.map((c) => [c.type, c.resource_key])).toContainEqual(['CONFLICTING_WRITER', 'app']);
    // Not a standing refusal: the conflict, not the refusal, holds the node.
    expect(final.history.refused.app).toBeUndefined();
    expect(d.conditions.map((c) => c.type)).not.toContain('ACTION_REFUSED');
  });

  it('stops repair on the node on the next pass too, until an operator resolves it', async () => {
    const { final } = await pass(snapshot(n24Before()), movedProbe, {
      answer: refusedAs('MarkerMoved', 'MARKER_MOVED'),
    });
    const next = await pass(movedProbe(), null, { history: final.history, now: later(100_000) });
    expect(next.first.decision.authorized_actions).toEqual([]);
    expect(next.first.decision.convergence_status).toBe('CONFLICT');
  });
});

describe("the agent's StaleSnapshotRefusal", () => {
  it('is BLOCKED / STALE_OBSERVATION on the ladder, re-observed soon, and no standing refusal', async () => {
    const { final } = await pass(snapshot(n24Before()), probeAfterMove, {
      answer: refusedAs('StaleSnapshotRefusal', 'the snapshot is 11m old at the moment of the write, past observation_ttl 60s'),
    });
    const d = final.decision;
    expect([d.convergence_status, d.reason, d.recheck_trigger.trigger]).toEqual([
      'BLOCKED',
      'STALE_OBSERVATION',
      'FRESH_OBSERVATION',
    ]);
    // Half the TTL (30s) after the probe's judgement (the probe came 90s into the pass), within
    // backoff.initial and resync_interval: soon, not at the next resync.
    expect(d.recheck_trigger.not_before).toBe(later(90_000 + 30_000));
    expect(d.conditions.map((c) => c.type)).toContain('STALE_OBSERVATION');
    expect(d.conditions.map((c) => c.type)).not.toContain('ACTION_REFUSED');
    expect(final.history.refused.app).toBeUndefined();
    // Not an attempt: nothing was written for app (build was, and counts).
    expect(d.attempt_count).toBe(1);
  });

  it('lets the next pass plan the same repair again from a fresh snapshot', async () => {
    const { final } = await pass(snapshot(n24Before()), probeAfterMove, {
      answer: refusedAs('StaleSnapshotRefusal', 'stale'),
    });
    const fresh = snapshot(
      { ...n24After(), app: { build: '7.3', config_sha256: n24Before().app!.config_sha256 } },
      { at: later(120_000) },
    );
    const next = await pass(fresh, null, { history: final.history, now: later(121_000) });
    expect(next.first.decision.authorized_actions.map((a) => [a.resource_key, a.observed_at])).toEqual([
      ['app', fresh.observed_at],
    ]);
  });

  it('whereas any other refusal stands until what it was about changes', async () => {
    const { final } = await pass(snapshot(n24Before()), probeAfterMove, {
      answer: refusedAs('ObserveModeRefusal', 'the resource is set to observe'),
    });
    expect(final.history.refused.app).toBeDefined();
    expect(final.decision.reason).toBe('ACTION_REFUSED');
  });
});
