import {
  addMs,
  bindIntent,
  runPass,
  desiredValue,
  emptyHistory,
  type ApplyFailure,
  type AuthorityView,
  type AuthorizedAction,
  type BoundIntent,
  type DecideResult,
  type DecisionRule,
  type PassOutcome,
  type PassPorts,
  type ExecutionEvidence,
  type History,
  type Json,
  type Observation,
} from '../../src/domain';
import type { LoopResolution, WorkCondition } from '../../src/contract';
import { observation as observationSchema, type ObservationInput, validateDesiredState } from '../../src/schemas';

export const NOW = '2026-11-29T12:00:00.000Z';
export const later = (ms: number, from = NOW) => addMs(from, ms);
export const SHA_74 = 'a'.repeat(64);
export const SHA_73 = 'b'.repeat(64);
export const MAINTENANCE_OVERRIDE = { approved_by: 'oncall', reason: 'disk swap CHG-1234', since: '2026-11-28T10:00:00Z' };

/** N-24 from the seed: desired build 7.4 with config D7 (workers: 8), maintenance off. */
export function n24(
  generation = 12,
  changes: { workers?: number; policy?: Record<string, unknown>; extra?: Record<string, unknown> } = {},
): BoundIntent {
  const doc = {
    node: 'N-24',
    generation,
    resources: {
      build: { type: 'release', version: '7.4', artifact: 'artifacts/app-7.4.tgz', sha256: SHA_74 },
      config: { type: 'file', path: 'etc/app/config.json', content: { workers: changes.workers ?? 8 } },
      app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
      maintenance: { type: 'flag', value: false },
      ...changes.extra,
    },
    policy: changes.policy,
  };
  const desired = validateDesiredState(doc, 'desired/nodes/N-24.yaml', 'N-24');
  return bindIntent(desired, {
    source: 'desired/nodes/N-24.yaml',
    revision: `rev-${generation}`,
    author: 'alice',
    loaded_at: NOW,
  });
}

export const D7 = () => desiredValue('config', n24().resources) as string;
export const D6 = () => desiredValue('config', n24(12, { workers: 4 }).resources) as string;

export interface NodeState {
  build?: string | null;
  config?: string | null;
  app?: { build: string; config_sha256: string } | null;
  maintenance?: Json;
  markers?: Partial<Record<'build' | 'config' | 'app' | 'maintenance', string | null>>;
}

/** The seed's starting point: build 7.3, config D7, app running 7.3 on D7, maintenance on. */
export function n24Before(): NodeState {
  return { build: '7.3', config: D7(), app: { build: '7.3', config_sha256: D7() }, maintenance: true };
}
export function n24After(): NodeState {
  return { build: '7.4', config: D7(), app: { build: '7.4', config_sha256: D7() }, maintenance: true };
}

export function snapshot(state: NodeState, opts: Partial<ObservationInput> & { at?: string } = {}): Observation {
  const m = state.markers ?? {};
  const release =
    state.build === null || state.build === undefined
      ? null
      : { version: state.build, sha256: state.build === '7.4' ? SHA_74 : SHA_73 };
  const input: ObservationInput = {
    node_id: 'N-24',
    observed_at: opts.at ?? NOW,
    heartbeat_at: opts.heartbeat_at ?? opts.at ?? NOW,
    mode: opts.mode ?? 'enforce',
    resource_modes: opts.resource_modes ?? {},
    overrides: opts.overrides ?? { maintenance: MAINTENANCE_OVERRIDE },
    resources: opts.resources ?? {
      build: { type: 'release', value: release, marker: m.build ?? `current->${state.build}` },
      config: { type: 'file', value: state.config ?? null, marker: m.config ?? `file:${state.config}` },
      app: { type: 'service', value: state.app ?? null, marker: m.app ?? (state.app ? `pid:${state.app.build}` : null) },
      maintenance: { type: 'flag', value: state.maintenance ?? false, marker: m.maintenance ?? 'flag:1' },
    },
    undeclared: opts.undeclared ?? [],
    config_error: opts.config_error ?? null,
  };
  return observationSchema.parse(input);
}

export const authorityOf = (intent: BoundIntent): AuthorityView => ({
  ok: true,
  generation: intent.generation,
  digest: intent.digest,
});

/** The authorized actions as (resource_key, action) pairs: what the tests assert on. */
export const actionsOf = (r: DecideResult) => r.decision.authorized_actions.map((a) => `${a.resource_key}:${a.action}`);

export interface PassOptions {
  intent?: BoundIntent;
  authority?: AuthorityView;
  history?: History;
  now?: string;
  /**
   * The pass's clock, read at each decision and each piece of evidence; default: `now` throughout.
   * A node model whose applies take time backs it with its own clock.
   */
  clock?: () => string;
  /** What the agent answers for each action; default: applied, leaving marker `ours:<key>`. */
  answer?: (action: AuthorizedAction) => ExecutionEvidence | ApplyFailure;
  /** Whether each decision rule is in force, as the workflow answers it from patched(); default: every rule is. */
  rules?: (rule: DecisionRule) => boolean;
}

/**
 * The loop's real pass (src/domain/pass.ts) over a node that answers with `pre`, then with the
 * fresh probe `post` (null: the agent is gone by then), and applies as `answer` says.
 */
export function pass(pre: Observation, post: (() => Observation | null) | null, o: PassOptions = {}): Promise<PassOutcome> {
  const intent = o.intent ?? n24();
  let now = o.now ?? NOW;
  let observed = 0;
  const ports: PassPorts = {
    observe: () => {
      const observation = observed++ === 0 ? pre : (post?.() ?? null);
      // The workflow reads its clock after a snapshot arrives, so without a clock of its own the
      // pass is never behind a snapshot it was handed (a later probe moves it on).
      if (observation && !o.clock && Date.parse(observation.observed_at) > Date.parse(now)) now = observation.observed_at;
      return Promise.resolve({ observation, unreachable: observation ? null : 'agent stopped' });
    },
    readAuthority: () => Promise.resolve(o.authority ?? authorityOf(intent)),
    apply: (a) => Promise.resolve(o.answer?.(a) ?? applied(a, o.clock?.() ?? now)),
    now: () => o.clock?.() ?? now,
    ...(o.rules ? { ruleInForce: o.rules } : {}),
  };
  return runPass(ports, intent, o.history ?? emptyHistory());
}

/** What the agent answers for an action it carried out: applied, leaving marker `ours:<key>`. */
export function applied(a: AuthorizedAction, at = NOW): ExecutionEvidence {
  return {
    resource_key: a.resource_key,
    action: a.action,
    idempotency_key: a.idempotency_key,
    outcome: 'applied',
    executed_at: at,
    marker_after: `ours:${a.resource_key}`,
    detail: 'exit 0',
    refusal: null,
  };
}

/** Markers that match what `pass` reports our own writes left. */
export const oursFor = (keys: string[]): NodeState['markers'] => Object.fromEntries(keys.map((k) => [k, `ours:${k}`]));

/** A work item's resolution as the loop's resolveWork Update takes it: alice grants 1 more attempt on "app", unless `o` says otherwise. */
export const loopResolution = (condition: WorkCondition, o: Partial<LoopResolution> = {}): LoopResolution => ({
  item_id: `datum-work/N-24/${condition}/app`,
  condition,
  resource_key: 'app',
  resolution: 'grant',
  attempts: 1,
  by: 'alice',
  identity: 'alice@laptop',
  note: null,
  ...o,
});
