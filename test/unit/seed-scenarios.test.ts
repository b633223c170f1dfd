import { describe, expect, it } from 'vitest';
import { decide, emptyHistory, idempotencyKey, type DecideResult, type RecheckTriggerKind } from '../../src/domain';
import {
  D6,
  MAINTENANCE_OVERRIDE,
  NOW,
  SHA_73,
  SHA_74,
  actionsOf,
  applied,
  authorityOf,
  later,
  n24,
  n24After,
  n24Before,
  oursFor,
  pass,
  snapshot,
} from './fixtures';

/*
 * One row per scenario of the seeds (000: worked example, four probes, two days offline;
 * 001: observe mode; 004: never destroy, nothing silent). Each row asserts the status, the
 * reason, the recheck trigger and the exact list of authorized actions.
 */

const MIN = 60_000;

/** A converged history whose last repair put config back to D7 at NOW (for the conflict window). */
async function afterConfigRepair() {
  const pre = snapshot({ ...n24After(), config: D6(), app: { build: '7.4', config_sha256: D6() } });
  const { final } = await pass(pre, () => snapshot({ ...n24After(), markers: oursFor(['config', 'app']) }));
  expect(final.decision.convergence_status).toBe('CONVERGED');
  return final.history;
}

/** Runs probe 4 `attempts` times in a row: every apply "succeeds" and nothing changes. */
async function ineffectiveRepairs(attempts: number): Promise<DecideResult> {
  let history = emptyHistory();
  let last: DecideResult | undefined;
  for (let i = 1; i <= attempts; i++) {
    const at = later(i * MIN);
    const { final } = await pass(
      snapshot(n24Before(), { at }),
      () => snapshot({ ...n24Before(), markers: oursFor(['build', 'app']) }, { at }),
      { history, now: at },
    );
    history = final.history;
    last = final;
  }
  return last!;
}

interface Row {
  name: string;
  run: () => DecideResult | Promise<DecideResult>;
  status: string;
  reason: string;
  trigger: RecheckTriggerKind;
  actions: string[];
}

const rows: Row[] = [
  {
    name: 'worked example: only the managed drift of N-24 is authorized',
    run: async () => (await pass(snapshot(n24Before()), null)).first,
    status: 'DRIFTED',
    reason: 'DRIFT_DETECTED',
    trigger: 'NONE',
    actions: ['build:release.install', 'app:service.restart'],
  },
  {
    name: 'worked example: a fresh post-action snapshot showing 7.4 + D7 gives CONVERGED',
    run: async () =>
      (await pass(snapshot(n24Before()), () => snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }))).final,
    status: 'CONVERGED',
    reason: 'CONVERGED_AFTER_REPAIR',
    trigger: 'TIMER',
    actions: ['build:release.install', 'app:service.restart'],
  },
  {
    name: 'probe 1: a snapshot older than observation_ttl with a fresh heartbeat',
    run: () =>
      decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot(n24Before(), { at: later(-2 * MIN), heartbeat_at: NOW }),
        history: emptyHistory(),
        now: NOW,
      }),
    status: 'BLOCKED',
    reason: 'STALE_OBSERVATION',
    trigger: 'FRESH_OBSERVATION',
    actions: [],
  },
  {
    name: 'probe 2: only the operator-owned maintenance flag differs',
    run: () =>
      decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot(n24After()),
        history: emptyHistory(),
        now: NOW,
      }),
    status: 'CONVERGED',
    reason: 'ALREADY_CONVERGED',
    trigger: 'TIMER',
    actions: [],
  },
  {
    name: 'probe 3: replaying the same generation after convergence',
    run: async () => {
      const { final } = await pass(snapshot(n24Before()), () => snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }));
      const at = later(MIN);
      return decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }, { at }),
        history: final.history,
        now: at,
      });
    },
    status: 'CONVERGED',
    reason: 'ALREADY_CONVERGED',
    trigger: 'TIMER',
    actions: [],
  },
  {
    name: 'probe 4: the command succeeds but the probe still differs, budget remains',
    run: () => ineffectiveRepairs(1),
    status: 'RETRY',
    reason: 'ACTION_INEFFECTIVE',
    trigger: 'TIMER',
    actions: ['build:release.install', 'app:service.restart'],
  },
  {
    name: 'probe 4: the last attempt of the budget does not take either',
    run: () => ineffectiveRepairs(3),
    status: 'BLOCKED',
    reason: 'RETRY_BUDGET_EXHAUSTED',
    trigger: 'FRESH_OBSERVATION',
    actions: ['build:release.install', 'app:service.restart'],
  },
  {
    name: 'probe 4: after the budget is spent nothing more is tried',
    run: async () => {
      const spent = await ineffectiveRepairs(3);
      return decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot(n24Before(), { at: later(5 * MIN) }),
        history: spent.history,
        now: later(5 * MIN),
      });
    },
    status: 'BLOCKED',
    reason: 'RETRY_BUDGET_EXHAUSTED',
    trigger: 'FRESH_OBSERVATION',
    actions: [],
  },
  {
    name: 'transfer: back after two days offline with an older generation than the authority',
    run: () => {
      const twoDaysLater = later(2 * 24 * 60 * MIN);
      return decide({
        intent: n24(11),
        authority: authorityOf(n24(12)),
        observation: snapshot(n24Before(), { at: twoDaysLater }),
        history: emptyHistory(),
        now: twoDaysLater,
      });
    },
    status: 'BLOCKED',
    reason: 'STALE_INTENT',
    trigger: 'REFRESHED_INTENT',
    actions: [],
  },
  {
    name: 'transfer: after refreshed intent only the managed drift is planned',
    run: () => {
      const twoDaysLater = later(2 * 24 * 60 * MIN);
      return decide({
        intent: n24(12),
        authority: authorityOf(n24(12)),
        observation: snapshot(n24Before(), { at: twoDaysLater }),
        history: emptyHistory(),
        now: twoDaysLater,
      });
    },
    status: 'DRIFTED',
    reason: 'DRIFT_DETECTED',
    trigger: 'NONE',
    actions: ['build:release.install', 'app:service.restart'],
  },
  {
    name: 'conflicting writer: the change marker moved after our own write',
    run: async () =>
      (await pass(snapshot(n24Before()), () => snapshot({ ...n24Before(), markers: { build: 'someone-else', app: 'ours:app' } })))
        .final,
    status: 'CONFLICT',
    reason: 'CONFLICTING_WRITER',
    trigger: 'OPERATOR_RESOLUTION',
    actions: ['build:release.install', 'app:service.restart'],
  },
  {
    name: 'conflicting writer: a repaired file flips away within conflict_window',
    run: async () => {
      const at = later(5 * MIN);
      return decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot({ ...n24After(), config: D6(), markers: { config: 'other-writer' } }, { at }),
        history: await afterConfigRepair(),
        now: at,
      });
    },
    status: 'CONFLICT',
    reason: 'CONFLICTING_WRITER',
    trigger: 'OPERATOR_RESOLUTION',
    actions: [],
  },
  {
    name: 'ordinary drift: the same flip after conflict_window starts a new episode',
    run: async () => {
      const at = later(11 * MIN);
      return decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot({ ...n24After(), config: D6(), markers: { config: 'other-writer' } }, { at }),
        history: await afterConfigRepair(),
        now: at,
      });
    },
    status: 'DRIFTED',
    reason: 'DRIFT_DETECTED',
    trigger: 'NONE',
    actions: ['config:file.write'],
  },
  {
    name: 'not a conflict: an unchanged marker with the old value is probe 4',
    run: async () =>
      (await pass(snapshot(n24Before()), () => snapshot({ ...n24Before(), markers: oursFor(['build', 'app']) }))).final,
    status: 'RETRY',
    reason: 'ACTION_INEFFECTIVE',
    trigger: 'TIMER',
    actions: ['build:release.install', 'app:service.restart'],
  },
  {
    name: 'observe mode (host): the plan is reported, nothing is authorized',
    run: () =>
      decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot(n24Before(), { mode: 'observe' }),
        history: emptyHistory(),
        now: NOW,
      }),
    status: 'DRIFTED',
    reason: 'OBSERVE_MODE_DRIFT',
    trigger: 'AGENT_CONFIG_CHANGE',
    actions: [],
  },
  {
    name: 'observe mode (one resource): the rest is repaired, the host is never CONVERGED while drift exists',
    run: async () => {
      const pre = snapshot(
        { ...n24Before(), config: D6(), app: { build: '7.3', config_sha256: D6() } },
        { resource_modes: { config: 'observe' } },
      );
      return (
        await pass(pre, () =>
          snapshot(
            { ...n24After(), config: D6(), app: { build: '7.3', config_sha256: D6() }, markers: oursFor(['build']) },
            { resource_modes: { config: 'observe' } },
          ),
        )
      ).final;
    },
    status: 'DRIFTED',
    reason: 'OBSERVE_MODE_DRIFT',
    trigger: 'AGENT_CONFIG_CHANGE',
    actions: ['build:release.install'],
  },
  {
    name: 'UNKNOWN ownership: a flag on the node that nobody declared',
    run: () =>
      decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot(n24After(), {
          undeclared: [{ resource_key: 'debug', type: 'flag', value: true, marker: 'flag:9' }],
        }),
        history: emptyHistory(),
        now: NOW,
      }),
    status: 'BLOCKED',
    reason: 'UNKNOWN_OWNERSHIP',
    trigger: 'OPERATOR_RESOLUTION',
    actions: [],
  },
  {
    name: 'UNKNOWN ownership: an override without provenance is never planned',
    run: () =>
      decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: snapshot(n24After(), { overrides: { maintenance: null } }),
        history: emptyHistory(),
        now: NOW,
      }),
    status: 'BLOCKED',
    reason: 'UNKNOWN_OWNERSHIP',
    trigger: 'OPERATOR_RESOLUTION',
    actions: [],
  },
  {
    name: 'never destroy: a directory where the config file belongs',
    run: () => {
      const obs = snapshot(n24After());
      obs.resources.config = {
        type: 'file',
        value: null,
        marker: 'dir:1',
        obstruction: 'a directory stands at etc/app/config.json',
        detail: { kind: 'directory' },
      };
      return decide({ intent: n24(), authority: authorityOf(n24()), observation: obs, history: emptyHistory(), now: NOW });
    },
    status: 'BLOCKED',
    reason: 'DESTRUCTIVE_REPAIR_REQUIRED',
    trigger: 'OPERATOR_RESOLUTION',
    actions: [],
  },
  {
    name: 'same generation label with a changed digest',
    run: () =>
      decide({
        intent: n24(12),
        authority: authorityOf(n24(12, { workers: 16 })),
        observation: snapshot(n24Before()),
        history: emptyHistory(),
        now: NOW,
      }),
    status: 'BLOCKED',
    reason: 'INTENT_DIGEST_MISMATCH',
    trigger: 'DESIRED_STATE_CHANGE',
    actions: [],
  },
  {
    name: 'node unreachable: no snapshot, no decision about resources',
    run: () =>
      decide({
        intent: n24(),
        authority: authorityOf(n24()),
        observation: null,
        unreachable: 'no agent polled datum-node-N-24 within node_timeout 30s',
        history: emptyHistory(),
        now: NOW,
      }),
    status: 'BLOCKED',
    reason: 'NODE_UNREACHABLE',
    trigger: 'FRESH_OBSERVATION',
    actions: [],
  },
];

describe('seed scenarios', () => {
  it.each(rows)('$name', async (row) => {
    const { decision } = await row.run();
    expect(decision.convergence_status).toBe(row.status);
    expect(decision.reason).toBe(row.reason);
    expect(decision.recheck_trigger.trigger).toBe(row.trigger);
    expect(actionsOf({ decision } as DecideResult)).toEqual(row.actions);
    expect(decision.reason_detail.length).toBeGreaterThan(20);
  });
});

describe('seed scenarios: what else each must show', () => {
  it('worked example: maintenance is an operator exception with its provenance and is never acted on', async () => {
    const { first, final } = await pass(snapshot(n24Before()), () =>
      snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }),
    );
    for (const d of [first.decision, final.decision]) {
      expect(d.operator_exceptions).toEqual([
        { resource_key: 'maintenance', provenance: MAINTENANCE_OVERRIDE, desired: false, observed: true },
      ]);
      expect(d.resources.find((r) => r.resource_key === 'maintenance')?.ownership).toBe('OPERATOR_OWNED');
      expect(d.planned_actions.map((p) => p.resource_key)).not.toContain('maintenance');
    }
    expect(final.decision.conditions).toEqual([]);
    expect(final.decision.execution_evidence.map((e) => e.outcome)).toEqual(['applied', 'applied']);
    expect(final.decision.post_action_observation).toMatchObject({
      resources: { build: { drift: false }, app: { drift: false } },
    });
  });

  it('every action binds the resource to the generation and digest', async () => {
    const { first } = await pass(snapshot(n24Before()), null);
    const intent = n24();
    expect(first.decision.authorized_actions.map((a) => a.resource_key)).toEqual(['build', 'app']);
    for (const a of first.decision.authorized_actions) {
      expect(a.desired_generation).toBe(12);
      expect(a.desired_digest).toBe(intent.digest);
      expect(a.idempotency_key).toBe(idempotencyKey('N-24', a.resource_key, 12, intent.digest));
    }
  });

  it('probe 3: the replay carries the same idempotency key as the original action, and none differs', async () => {
    const { first, final } = await pass(snapshot(n24Before()), () =>
      snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }),
    );
    const replay = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }, { at: later(MIN) }),
      history: final.history,
      now: later(MIN),
    });
    expect(first.decision.authorized_actions.map((a) => a.resource_key)).toEqual(['build', 'app']);
    for (const original of first.decision.authorized_actions) {
      expect(
        replay.decision.resources.find((r) => r.resource_key === original.resource_key)?.idempotency_key,
        original.resource_key,
      ).toBe(original.idempotency_key);
    }
    expect(replay.decision.planned_actions).toEqual([]);
  });

  it('probe 4: attempts count up with backoff, and CONVERGED never appears while the probe differs', async () => {
    const statuses = await Promise.all([1, 2, 3].map(async (n) => (await ineffectiveRepairs(n)).decision));
    expect(statuses.map((d) => [d.convergence_status, d.attempt_count, d.backoff.next_delay])).toEqual([
      ['RETRY', 1, '5s'],
      ['RETRY', 2, '10s'],
      ['BLOCKED', 3, null],
    ]);
    expect(statuses[0].recheck_trigger.not_before).toBe(later(5000, later(MIN)));
    expect(statuses[2].conditions.map((c) => [c.type, c.resource_key])).toEqual([
      ['RETRY_BUDGET_EXHAUSTED', 'app'],
      ['RETRY_BUDGET_EXHAUSTED', 'build'],
    ]);
  });

  it('transfer: the override is untouched while intent is stale and after it is refreshed', () => {
    const at = later(2 * 24 * 60 * MIN);
    const stale = decide({
      intent: n24(11),
      authority: authorityOf(n24(12)),
      observation: snapshot(n24Before(), { at }),
      history: emptyHistory(),
      now: at,
    });
    expect(stale.decision.planned_actions).toEqual([]);
    expect(stale.decision.operator_exceptions.map((e) => e.resource_key)).toEqual(['maintenance']);
    expect(stale.decision.conditions.map((c) => c.type)).toEqual(['STALE_INTENT']);
    const refreshed = decide({
      intent: n24(12),
      authority: authorityOf(n24(12)),
      observation: snapshot(n24Before(), { at }),
      history: stale.history,
      now: at,
    });
    expect(refreshed.decision.planned_actions.map((p) => p.resource_key)).toEqual(['build', 'app']);
    expect(refreshed.decision.operator_exceptions).toEqual([
      { resource_key: 'maintenance', provenance: MAINTENANCE_OVERRIDE, desired: false, observed: true },
    ]);
    expect(refreshed.decision.conditions).toEqual([]);
  });

  it('conflicting writer: evidence is the (time, value, marker) sequence and the loop stops acting', async () => {
    const { final } = await pass(snapshot(n24Before()), () =>
      snapshot({ ...n24Before(), markers: { build: 'someone-else', app: 'ours:app' } }),
    );
    const evidence = final.decision.conflicting_writer_evidence!;
    expect(evidence.map((e) => e.resource_key)).toEqual(['build']);
    expect(evidence[0].sequence.map((s) => [s.at, s.value, s.marker])).toEqual([
      [NOW, { version: '7.4', sha256: SHA_74 }, 'ours:build'],
      [NOW, { version: '7.3', sha256: SHA_73 }, 'someone-else'],
    ]);
    const next = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot(n24Before(), { at: later(MIN) }),
      history: final.history,
      now: later(MIN),
    });
    expect(next.decision.convergence_status).toBe('CONFLICT');
    expect(next.decision.authorized_actions).toEqual([]);
    expect(next.decision.conditions.find((c) => c.type === 'CONFLICTING_WRITER')?.since).toBe(NOW);
  });

  it("Datum's own retry that did not take is not another writer: it ends the proof the repair left", async () => {
    // The app was repaired (its process marked ours:app). Then an approved override makes the
    // release the operator's, so the app must run what is on disk (7.3), and Datum restarts it:
    // the restart leaves its own marker and does not take.
    const history = await afterConfigRepair();
    const owned = { overrides: { maintenance: MAINTENANCE_OVERRIDE, build: MAINTENANCE_OVERRIDE } };
    const node = (app: string, at: string) =>
      snapshot({ ...n24After(), build: '7.3', markers: { ...oursFor(['config']), build: 'theirs', app } }, { ...owned, at });
    const { final } = await pass(node('ours:app', later(MIN)), () => node('ours:app-2', later(MIN)), {
      history,
      now: later(MIN),
      answer: (a) => ({ ...applied(a, later(MIN)), marker_after: 'ours:app-2' }),
    });
    expect([final.decision.convergence_status, final.decision.reason]).toEqual(['RETRY', 'ACTION_INEFFECTIVE']);
    // Within conflict_window, the next pass sees the app drifted under Datum's own marker: a retry, not a CONFLICT.
    const next = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: node('ours:app-2', later(2 * MIN)),
      history: final.history,
      now: later(2 * MIN),
    });
    expect(next.decision.convergence_status).not.toBe('CONFLICT');
    expect(next.decision.conditions.map((c) => c.type)).not.toContain('CONFLICTING_WRITER');
    expect(actionsOf(next)).toEqual(['app:service.restart']);
  });

  it('observe mode: the plan is exactly the plan an enforce pass would run', () => {
    const enforce = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot(n24Before()),
      history: emptyHistory(),
      now: NOW,
    });
    const observe = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot(n24Before(), { mode: 'observe' }),
      history: emptyHistory(),
      now: NOW,
    });
    const strip = (d: DecideResult) =>
      d.decision.planned_actions.map(({ authorized: _a, withheld_because: _w, ...rest }) => rest);
    expect(strip(observe)).toEqual(strip(enforce));
    expect(observe.decision.planned_actions.every((p) => !p.authorized && p.withheld_because?.startsWith('observe mode'))).toBe(
      true,
    );
    expect(observe.decision.conditions.map((c) => [c.type, c.resource_key])).toEqual([
      ['OBSERVED_DRIFT', 'app'],
      ['OBSERVED_DRIFT', 'build'],
    ]);
  });

  it('UNKNOWN ownership raises a condition naming the resource and who can resolve it', () => {
    const r = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot(n24Before(), {
        undeclared: [{ resource_key: 'debug', type: 'flag', value: true, marker: 'flag:9' }],
      }),
      history: emptyHistory(),
      now: NOW,
    });
    expect(r.decision.planned_actions.map((p) => p.resource_key)).toEqual(['build', 'app']);
    const c = r.decision.conditions.find((x) => x.type === 'UNKNOWN_OWNERSHIP')!;
    expect(c).toMatchObject({ resource_key: 'debug', resolver: 'operator', needs_judgement: true, since: NOW });
  });

  it('never destroy: the destructive repair is planned, flagged, and withheld', () => {
    const obs = snapshot(n24After());
    obs.resources.config = {
      type: 'file',
      value: null,
      marker: 'dir:1',
      obstruction: 'a directory stands at etc/app/config.json',
      detail: { kind: 'directory' },
    };
    const r = decide({ intent: n24(), authority: authorityOf(n24()), observation: obs, history: emptyHistory(), now: NOW });
    expect(r.decision.planned_actions.map((p) => [p.resource_key, p.destructive, p.authorized])).toEqual([
      ['config', true, false],
    ]);
    expect(r.decision.conditions.map((c) => c.type)).toEqual(['DESTRUCTIVE_REPAIR_REQUIRED']);
  });

  it('probe 1: the loop re-takes a stale snapshot after half the TTL, not at the next resync', () => {
    const stale = (policy: Record<string, unknown>) =>
      decide({
        intent: n24(12, { policy }),
        authority: authorityOf(n24(12, { policy })),
        observation: snapshot(n24Before(), { at: later(-20 * MIN), heartbeat_at: NOW }),
        history: emptyHistory(),
        now: NOW,
      }).decision.recheck_trigger;
    // Watch mode resyncs every 10 minutes; a stale snapshot must not wait that long.
    expect(stale({ resync_interval: '10m', observation_ttl: '120s' }).not_before).toBe(later(60_000));
    // Never sooner than backoff.initial (every snapshot may arrive stale), never later than resync.
    expect(stale({ resync_interval: '10m', observation_ttl: '2s' }).not_before).toBe(later(5_000));
    expect(stale({ resync_interval: '20s', observation_ttl: '10m' }).not_before).toBe(later(20_000));
  });

  it('stale snapshot after stale snapshot: each re-take backs off by policy.backoff, the condition counts them, a fresh one resets', () => {
    const intent = n24(12, { policy: { observation_ttl: '1s', backoff: { initial: '1s', factor: 2, max: '8s' } } });
    const staleAt = (now: string) => snapshot(n24After(), { at: later(-2000, now), heartbeat_at: now });
    let history = emptyHistory();
    const waits: number[] = [];
    const tried: string[][] = [];
    let now = NOW;
    for (let i = 0; i < 5; i++) {
      const r = decide({ intent, authority: authorityOf(intent), observation: staleAt(now), history, now });
      expect(r.decision.reason).toBe('STALE_OBSERVATION');
      waits.push(Date.parse(r.decision.recheck_trigger.not_before!) - Date.parse(now));
      tried.push(r.decision.conditions.find((c) => c.type === 'STALE_OBSERVATION')!.tried);
      history = r.history;
      now = r.decision.recheck_trigger.not_before!;
    }
    expect(waits).toEqual([1000, 2000, 4000, 8000, 8000]);
    expect(tried[4]).toEqual(['5 stale snapshot(s) in a row; the next is taken in 8s']);
    const fresh = decide({
      intent,
      authority: authorityOf(intent),
      observation: snapshot(n24After(), { at: now }),
      history,
      now,
    });
    expect(fresh.decision.convergence_status).toBe('CONVERGED');
    const againStale = decide({ intent, authority: authorityOf(intent), observation: staleAt(now), history: fresh.history, now });
    expect(Date.parse(againStale.decision.recheck_trigger.not_before!) - Date.parse(now)).toBe(1000);
  });

  it('an unreachable node whose intent is stale keeps STALE_INTENT open, since unchanged, and still closes it when refreshed', () => {
    const stale = { intent: n24(11), authority: authorityOf(n24(12)) };
    const first = decide({ ...stale, observation: snapshot(n24Before()), history: emptyHistory(), now: NOW });
    const away = decide({ ...stale, observation: null, unreachable: 'agent stopped', history: first.history, now: later(MIN) });
    expect(away.decision.reason).toBe('NODE_UNREACHABLE');
    expect(away.decision.conditions.map((c) => [c.type, c.since])).toEqual([
      ['NODE_UNREACHABLE', later(MIN)],
      ['STALE_INTENT', NOW],
    ]);
    // An authority that cannot be read says nothing about staleness: the condition is carried.
    const unreadable = decide({
      intent: n24(11),
      authority: { ok: false, error: 'parse error' },
      observation: null,
      history: away.history,
      now: later(2 * MIN),
    });
    expect(unreadable.decision.conditions.map((c) => [c.type, c.since])).toEqual([
      ['INVALID_DESIRED_STATE', later(2 * MIN)],
      ['NODE_UNREACHABLE', later(MIN)],
      ['STALE_INTENT', NOW],
    ]);
  });

  it('a condition keeps its since while it stays open; a drift closes only on a fresh observation', () => {
    const stale = { intent: n24(11), authority: authorityOf(n24(12)), history: emptyHistory() };
    const first = decide({ ...stale, observation: snapshot(n24Before()), now: NOW });
    const second = decide({
      ...stale,
      observation: snapshot(n24Before(), { at: later(MIN) }),
      history: first.history,
      now: later(MIN),
    });
    expect(second.decision.conditions.map((c) => c.since)).toEqual([NOW]);
    // STALE_INTENT is about the intent: refreshed, it is gone even with no snapshot.
    const unreachable = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: null,
      history: second.history,
      now: later(2 * MIN),
    });
    expect(unreachable.decision.conditions.map((c) => c.type)).toEqual(['NODE_UNREACHABLE']);

    // A drift seen in observe mode stays open, since unchanged, through an unreachable pass and a
    // stale snapshot that shows it gone; only a fresh snapshot at desired closes it.
    const drift = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot(n24Before(), { mode: 'observe' }),
      history: emptyHistory(),
      now: NOW,
    });
    const open = (r: DecideResult) =>
      r.decision.conditions.filter((c) => c.type === 'OBSERVED_DRIFT').map((c) => [c.resource_key, c.since]);
    expect(open(drift)).toEqual([
      ['app', NOW],
      ['build', NOW],
    ]);
    const away = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: null,
      unreachable: 'agent stopped',
      history: drift.history,
      now: later(MIN),
    });
    expect(open(away)).toEqual(open(drift));
    const old = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot(n24After(), { mode: 'observe', at: later(-10 * MIN) }),
      history: away.history,
      now: later(2 * MIN),
    });
    expect(open(old)).toEqual(open(drift));
    const fresh = decide({
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot(n24After(), { mode: 'observe', at: later(3 * MIN) }),
      history: old.history,
      now: later(3 * MIN),
    });
    expect(fresh.decision.conditions).toEqual([]);
    expect(fresh.decision.convergence_status).toBe('CONVERGED');
  });

  it('digest: the same content gives the same digest whatever the duration spelling or key order', () => {
    const a = n24(12, { policy: { observation_ttl: '1m', conflict_window: '600s' } });
    const b = n24(12, { policy: { conflict_window: '10m', observation_ttl: '60s' } });
    expect(a.digest).toBe(b.digest);
    expect(a.digest).toBe(n24(12).digest);
    expect(a.digest).toMatch(/^sha256:[a-f0-9]{64}$/);
    expect(n24(12, { workers: 9 }).digest).not.toBe(a.digest);
  });
});
