import {
  InvalidDesiredState,
  bindIntent,
  decisionRequest,
  durationMs,
  emptyHistory,
  fileBytes,
  msBetween,
  namesTarget,
  nextWakeMs,
  noteDecision,
  recordResolution,
  recordSignal,
  sha256Hex,
  shouldWrite,
  sameIntent,
  targetOf,
  targetOfAction,
  valueDigest,
  valueDigestOfAction,
  type ApplyFailure,
  type AuthorityView,
  type AuthorizedAction,
  type BoundIntent,
  type Decision,
  type DecisionRule,
  type ExecutionEvidence,
  type History,
  type Json,
  type Mode,
  type Observation,
  type OperatorDecision,
  type RecordDecisionRequest,
} from '../../src/domain';
import { claimResources, observedProtections, protecting, resolveEntries, type ClaimsFile } from '../../src/agent/node/claims';
import { MAINTENANCE_OVERRIDE, NOW, pass } from './fixtures';
import { type AgentConfig, agentConfig, operatorDecision, validateDesiredState } from '../../src/schemas';

/*
 * A node carried through a sequence of generations, as the workflow carries it: one loop per
 * generation, each pass the loop's real pass (fixtures' `pass` → src/domain/pass.ts runPass) with
 * the history chained, signals handled between passes as reconcileNode handles them
 * (recordResolution, the agent's recordDecision, a note), hand-over to a new generation's loop
 * with an empty history plus the ledger store's operator decisions, and decisions_to_record sent
 * to the agent after every pass.
 *
 * The agent is a model: values and change markers per target, and the records it keeps under
 * .datum/ (claims, decisions, fence, its own last writes). Its observation reports protections
 * and decisions through the agent's own pure functions (src/agent/node/claims.ts), so the properties
 * judge what the controller does with what a real agent would report. Its refusals follow
 * applyLocked's order (observe, override, kept decision, fence, stale snapshot, compare-and-swap).
 *
 * Beside it runs an auditor's record (`Oracle`), kept from the script's events alone and never
 * from a decision: which targets agent.yaml protects, which were yielded for which spec, which
 * saw MARKER_MOVED for which spec. Every action the controller sends is stamped with what the
 * auditor says about its target at that moment: the properties check the stamps.
 */

// ---------------------------------------------------------------------------------------------
// Desired state: one node, a fixed set of targets, keys that move between them.

export const SHA: Record<Version, string> = { '7.3': 'b'.repeat(64), '7.4': 'a'.repeat(64), '7.5': 'c'.repeat(64) };
export type Version = '7.3' | '7.4' | '7.5';
export const PATHS = ['etc/app/config.json', 'etc/app/alt.json'] as const;
export type ConfigPath = (typeof PATHS)[number];

/** One generation's desired state, as its author varies it: keys, versions, paths, content. */
export interface GenSpec {
  releaseKey: 'build' | 'release';
  version: '7.4' | '7.5';
  configKey: 'config' | 'settings';
  configPath: ConfigPath;
  workers: 8 | 16;
  /** The maintenance flag's desired value; null: not declared. */
  flag: boolean | null;
  /**
   * Invalid on purpose: the other release key also declared (two releases switch one current),
   * or the other config key at the same path (spelled with backslashes when `spelled` is set).
   */
  shared: null | 'release' | 'file';
  spelled: boolean;
}

export const otherRelease = (k: GenSpec['releaseKey']) => (k === 'build' ? 'release' : 'build');
export const otherConfig = (k: GenSpec['configKey']) => (k === 'config' ? 'settings' : 'config');

export function docOf(generation: number, g: GenSpec): Record<string, unknown> {
  const release = (version: Version) => ({
    type: 'release',
    version,
    artifact: `artifacts/app-${version}.tgz`,
    sha256: SHA[version],
  });
  const resources: Record<string, unknown> = {
    [g.releaseKey]: release(g.version),
    [g.configKey]: { type: 'file', path: g.configPath, content: { workers: g.workers } },
    app: { type: 'service', release: g.releaseKey, config: g.configKey, command: ['node', 'server.js'] },
  };
  if (g.flag !== null) resources.maintenance = { type: 'flag', value: g.flag };
  if (g.shared === 'release') resources[otherRelease(g.releaseKey)] = release(g.version === '7.4' ? '7.5' : '7.4');
  if (g.shared === 'file') {
    const path = g.spelled ? g.configPath.replaceAll('/', '\\') : g.configPath;
    resources[otherConfig(g.configKey)] = { type: 'file', path, content: { workers: 4 } };
  }
  return { node: 'N-24', generation, resources };
}

/** What the authority holds: a valid, bound intent, or the error its validation gives. */
export type AuthorityRead = { ok: true; intent: BoundIntent } | { ok: false; error: string; shared: boolean };

const reads = new Map<string, AuthorityRead>();
/** The authority's reading of a document (validated once per distinct document: zod is the cost). */
export function readDoc(generation: number, g: GenSpec): AuthorityRead {
  const id = `${generation}:${JSON.stringify(g)}`;
  const cached = reads.get(id);
  if (cached) return cached;
  let read: AuthorityRead;
  try {
    const desired = validateDesiredState(docOf(generation, g), 'desired/nodes/N-24.yaml', 'N-24');
    read = {
      ok: true,
      intent: bindIntent(desired, {
        source: 'desired/nodes/N-24.yaml',
        revision: `rev-${generation}`,
        author: 'alice',
        loaded_at: NOW,
      }),
    };
  } catch (err) {
    if (!(err instanceof InvalidDesiredState)) throw err;
    read = { ok: false, error: err.message, shared: g.shared !== null };
  }
  reads.set(id, read);
  return read;
}

export const viewOf = (read: AuthorityRead): AuthorityView =>
  read.ok ? { ok: true, generation: read.intent.generation, digest: read.intent.digest } : { ok: false, error: read.error };

// ---------------------------------------------------------------------------------------------
// The node: what is on it, per target.

export const TARGET_NAMES = ['release', 'config', 'alt', 'flag', 'app'] as const;
export type TargetName = (typeof TARGET_NAMES)[number];
export const TARGET: Record<TargetName, string> = {
  release: 'release:current',
  config: `file:${PATHS[0]}`,
  alt: `file:${PATHS[1]}`,
  flag: 'flag:maintenance',
  app: 'service:app',
};

const NAME_OF: Record<string, TargetName> = Object.fromEntries(TARGET_NAMES.map((n) => [TARGET[n], n]));

const rel = (v: Version) => ({ version: v, sha256: SHA[v] });
export const configSha = (workers: number) => sha256Hex(fileBytes({ workers }));
const svc = (v: Version, workers: number) => ({ build: v, config_sha256: configSha(workers) });
/** The values a target can be found at (by an index the generators pick), desired ones among them. */
export const VALUES: Record<TargetName, Json[]> = {
  release: [null, rel('7.3'), rel('7.4'), rel('7.5')],
  config: [null, configSha(4), configSha(8), configSha(16)],
  alt: [null, configSha(4), configSha(8), configSha(16)],
  flag: [null, false, true],
  app: [null, svc('7.3', 8), svc('7.4', 8), svc('7.5', 16), svc('7.4', 16)],
};

// ---------------------------------------------------------------------------------------------
// The script: what happens to the node, the authority and the operator, in order.

export type Outcome = 'ok' | 'ineffective' | 'failed';

export interface PassStep {
  kind: 'pass';
  /** Another writer changes this target after the plan and before the first apply (MARKER_MOVED). */
  between: { target: TargetName | 'planned'; value: number } | null;
  /** How the agent carries out an action it accepts: it takes, it runs without taking, it fails. */
  outcome: Outcome;
  /** The fresh probe after acting, or none (the agent went away). */
  probe: 'fresh' | 'unreachable';
  /** How long the observe took: the snapshot's age when the pass decides on it. */
  observeMs: number;
  /** How long each apply takes (a batch can outlive its snapshot). */
  applyMs: number;
  /**
   * How far the agent's clock runs ahead of the controller's in this pass: its snapshots carry an
   * observed_at that much later. The agent judges a write's age on its own clock, so that age is
   * unchanged; the controller must not take a snapshot from beyond CLOCK_SKEW_MS ahead as fresh.
   */
  aheadMs: number;
}

export type Linger = 0 | 1 | 2 | 3;

export type EntryName =
  | 'build'
  | 'release'
  | 'config'
  | 'settings'
  | 'maintenance'
  | 'app'
  | 'release:current'
  | 'file:etc/app/config.json'
  | 'file:etc/app/alt.json'
  | 'flag:maintenance'
  | 'service:app';

export type ConfigChange =
  { op: 'mode'; mode: Mode } | { op: 'add'; kind: 'override' | 'observe'; name: EntryName } | { op: 'remove'; pick: number };

export type Step =
  | PassStep
  /** Another writer, between passes. */
  | { kind: 'writer'; target: TargetName; value: number }
  /** An operator resolves an open conflict (the pick-th one), as `datum resolve` does. */
  | { kind: 'resolve'; resolution: 'yield' | 'retake'; pick: number }
  | { kind: 'config'; change: ConfigChange }
  /**
   * The authority moves to the next generation (a GenSpec changed from the last valid one), and
   * a rollout refreshes the loop. `linger`: the old loop's pass that read the authority before the
   * move acts after the new loop's first pass (1), and then runs one more pass before it takes the
   * refresh (2); or it acts between the new loop's first plan and its applies (3).
   */
  | { kind: 'generation'; change: Partial<GenSpec>; linger: Linger }
  /** The authority goes back to an earlier valid generation (a revert). */
  | { kind: 'regress' }
  | { kind: 'wait'; ms: number }
  /** The agent loses .datum/ (claims, decisions, fence, journal). */
  | { kind: 'lose-datum' };

export interface Script {
  values: Record<TargetName, number>;
  spec: GenSpec;
  mode: Mode;
  entries: { kind: 'override' | 'observe'; name: EntryName }[];
  steps: Step[];
}

// ---------------------------------------------------------------------------------------------
// The trace: what the properties read.

/** An action the controller sent, stamped with what the auditor said about its target then. */
export interface Sent {
  action: AuthorizedAction;
  target: string | null;
  /** The agent.yaml entry (or the host mode) protecting the target when the action was planned. */
  protectedBy: string | null;
  /** How: by the key's own name, by an entry bound to the target under another key, by a target-named entry. */
  protectedHow: 'host' | 'name' | 'bound' | 'target' | null;
  /** A yield stands on the target for the action's spec. */
  yielded: boolean;
  /** MARKER_MOVED was answered on the target for the action's spec, and no operator retake since. */
  contested: boolean;
  /** The agent's answer: applied, failed, or the refusal's type. */
  answer: string;
  /** Refused because Datum's own last write moved the marker since the snapshot (not another writer). */
  ownWrite: boolean;
}

export interface PassRecord {
  index: number;
  /** The pass's place in its loop: 0 is the first pass of a new run chain. */
  loopPass: number;
  generation: number;
  /** The old loop's pass that read the authority before a hand-over, acting after it. */
  inflight: boolean;
  /** The old loop's pass after a hand-over, before it took the refresh. */
  lingering: boolean;
  intent: BoundIntent;
  authority: AuthorityView;
  /** The authority holds a document whose resources share a target. */
  authorityShared: boolean;
  /** The newest generation any loop was bound to when this pass read the authority. */
  newestBound: number;
  history: History;
  pre: Observation;
  probe: Observation | null;
  first: Decision;
  final: Decision;
  /** The clock when each decision was made. */
  firstAt: string;
  finalAt: string;
  sent: Sent[];
  /** What the auditor says about each target at the pass's start. */
  oracle: OracleView;
  /**
   * Targets whose writes cannot all be told to be Datum's, as of the pass's end: another writer
   * wrote them; or Datum did before .datum/ was lost (the agent's record of its writes went with
   * it), or in a pass whose probe never came (a known hole: the loop keeps no record of that
   * write; properties-sequences.test.ts, "known holes").
   */
  unattributed: ReadonlySet<string>;
}

export interface OracleView {
  /** What agent.yaml says about a key claiming a target: the host's mode first, then the entries. */
  protects: (key: string, target: string) => { entry: string; kind: 'override' | 'observe'; how: Sent['protectedHow'] } | null;
  /** The override entry (if any) that makes the key claiming the target the operator's. */
  owner: (key: string, target: string) => string | null;
  hostObserve: boolean;
  /** Yields standing, by target: the spec digest they were about and the generation they were made in. */
  yields: ReadonlyMap<string, { digest: string; generation: number }>;
  /**
   * Targets that saw MARKER_MOVED for a spec, with no retake since (open: no yield either), and
   * the generation in which it happened.
   */
  contested: ReadonlyMap<string, { digest: string; generation: number; open: boolean }>;
  /** Targets retaken after MARKER_MOVED, by the spec digest retaken. */
  retaken: ReadonlyMap<string, string>;
}

export type TraceEvent =
  | { kind: 'pass'; pass: PassRecord }
  | { kind: 'resolve'; generation: number; key: string; target: string; resolution: 'yield' | 'retake' }
  | { kind: 'authority'; generation: number; spec: GenSpec; read: AuthorityRead; handedOver: boolean }
  | { kind: 'writer'; target: string; between: boolean };

// ---------------------------------------------------------------------------------------------
// The auditor.

class Oracle {
  /** Key-named entries and the target each was bound to when first seen. */
  bindings = new Map<string, string>();
  /** The target each key claimed last. */
  lastTarget = new Map<string, string>();
  yields = new Map<string, { digest: string; generation: number }>();
  contested = new Map<string, { digest: string; generation: number; open: boolean }>();
  retaken = new Map<string, string>();

  /** Called on every observe: entries are bound the way the design binds them (first sight). */
  seen(config: AgentConfig, resources: BoundIntent['resources']) {
    for (const { entry, name } of entriesOf(config)) {
      if (namesTarget(name) || this.bindings.has(entry)) continue;
      const spec = resources[name];
      const target = spec ? targetOf(name, spec) : this.lastTarget.get(name);
      if (target) this.bindings.set(entry, target);
    }
    for (const [key, spec] of Object.entries(resources)) this.lastTarget.set(key, targetOf(key, spec));
  }

  configChanged(config: AgentConfig) {
    const listed = new Set(entriesOf(config).map((e) => e.entry));
    for (const entry of [...this.bindings.keys()]) if (!listed.has(entry)) this.bindings.delete(entry);
  }

  view(config: AgentConfig): OracleView {
    const entries = entriesOf(config);
    const bindings = new Map(this.bindings);
    const match = (key: string, target: string, kind?: 'override' | 'observe') => {
      for (const e of entries) {
        if (kind && e.kind !== kind) continue;
        if (e.name === key) return { entry: e.entry, kind: e.kind, how: 'name' as const };
        if (namesTarget(e.name) ? e.name === target : bindings.get(e.entry) === target)
          return { entry: e.entry, kind: e.kind, how: namesTarget(e.name) ? ('target' as const) : ('bound' as const) };
      }
      return null;
    };
    const hostObserve = config.reconciliation.mode === 'observe';
    return {
      hostObserve,
      yields: new Map(this.yields),
      contested: new Map([...this.contested].map(([t, c]) => [t, { ...c }])),
      retaken: new Map(this.retaken),
      owner: (key, target) => match(key, target, 'override')?.entry ?? null,
      protects: (key, target) =>
        hostObserve ? { entry: 'reconciliation.mode', kind: 'observe', how: 'host' } : match(key, target),
    };
  }

  resolved(target: string, digest: string, generation: number, resolution: 'yield' | 'retake') {
    const c = this.contested.get(target);
    if (resolution === 'yield') {
      this.yields.set(target, { digest, generation });
      if (c) c.open = false;
      return;
    }
    this.yields.delete(target);
    if (c) this.retaken.set(target, digest);
    this.contested.delete(target);
  }

  /**
   * MARKER_MOVED: the target is contested for this spec. The conflict the loop records replaces a
   * yield about another spec on the agent (recordDecisionAt), so that yield is over.
   */
  moved(target: string, digest: string, generation: number) {
    this.contested.set(target, { digest, generation, open: true });
    if (this.yields.has(target) && this.yields.get(target)?.digest !== digest) this.yields.delete(target);
  }

  /** .datum/ lost: the bindings go (yields and conflicts stay: the store keeps them). */
  lost() {
    this.bindings.clear();
    this.lastTarget.clear();
  }

  /**
   * An accepted write of another value ends a conflict about the old one (new intent acted); a
   * yield only before hole 5 was closed (`yieldsEnd`), since the agent now refuses such a write.
   */
  wrote(target: string, digest: string, yieldsEnd: boolean) {
    if (yieldsEnd && this.yields.has(target) && this.yields.get(target)?.digest !== digest) this.yields.delete(target);
    if (this.contested.has(target) && this.contested.get(target)?.digest !== digest) this.contested.delete(target);
  }
}

function entriesOf(config: AgentConfig): { entry: string; name: string; kind: 'override' | 'observe' }[] {
  return [
    ...Object.keys(config.overrides).map((name) => ({ entry: `overrides.${name}`, name, kind: 'override' as const })),
    ...Object.keys(config.reconciliation.resources).map((name) => ({
      entry: `reconciliation.resources.${name}`,
      name,
      kind: 'observe' as const,
    })),
  ];
}

// ---------------------------------------------------------------------------------------------
// The world: node, agent, authority, ledger store, loops.

interface Loop {
  /** Passes this loop has run. */
  passes: number;
  intent: BoundIntent;
  history: History;
  lastDecision: Decision | null;
  lastFingerprint: string | null;
}

interface Begun {
  loop: Loop;
  pre: Observation;
  authority: AuthorityView;
  authorityShared: boolean;
  newestBound: number;
  oracle: OracleView;
  history: History;
}

const TTL_MS = 60_000;

export class NodeModel {
  clock = Date.parse(NOW);
  private markerSeq = 0;
  readonly node: Record<string, { value: Json; marker: string | null }> = {};
  // The agent's records under .datum/.
  config: AgentConfig;
  private claims: ClaimsFile = { targets: {}, keys: {}, bindings: {} };
  private decisions: Record<string, OperatorDecision> = {};
  private fence: number | null = null;
  /** Datum's own last write, by target (or by key: Holes.ownWritesByKey). */
  private written: Record<string, { marker: string | null; generation: number }> = {};
  // The authority and the loops.
  private spec: GenSpec;
  private authority: AuthorityRead;
  private validGenerations: { generation: number; spec: GenSpec }[] = [];
  private generation: number;
  private loop: Loop;
  private newestBound: number;
  /** The ledger store's copy of operator decisions, as the code keeps it: per recorded pass entry, in the order decided. */
  private store: { generation: number; operator_decisions: Decision['operator_decisions'] }[] = [];
  /** The same, as the design means it (Holes.storeCopiesLoop closed): a copy of the agent's record, by target. */
  private storeMirror: Record<string, OperatorDecision> = {};
  /** Which loop's pass is acting: only the newest loop's MARKER_MOVED is its conflict (an old loop's record is fenced). */
  private acting: { inflight?: boolean; lingering?: boolean } = {};
  /** The agent loses .datum/ once the current loop has run a pass (see the lose-datum step). */
  private lossPending = false;
  private readonly unattributed = new Set<string>();
  private passes = 0;
  readonly oracle = new Oracle();
  readonly trace: TraceEvent[] = [];

  constructor(
    script: Script,
    private readonly holes: Holes = HOLES_CLOSED,
  ) {
    for (const name of TARGET_NAMES)
      this.node[TARGET[name]] = { value: VALUES[name][script.values[name]] ?? null, marker: this.marker('init') };
    this.config = agentConfig.parse({
      node: 'N-24',
      root: '/var/lib/datum/N-24',
      reconciliation: {
        mode: script.mode,
        resources: Object.fromEntries(script.entries.filter((e) => e.kind === 'observe').map((e) => [e.name, 'observe'])),
      },
      overrides: Object.fromEntries(
        script.entries.filter((e) => e.kind === 'override').map((e) => [e.name, MAINTENANCE_OVERRIDE]),
      ),
    });
    this.spec = { ...script.spec, shared: null };
    this.generation = 12;
    const read = readDoc(this.generation, this.spec);
    if (!read.ok) throw new Error(`the initial desired state must validate: ${read.error}`);
    this.authority = read;
    this.validGenerations.push({ generation: this.generation, spec: this.spec });
    this.loop = this.openLoop(read.intent);
    this.newestBound = this.generation;
  }

  private iso = () => new Date(this.clock).toISOString();
  /** The agent's clock in this pass (PassStep.aheadMs). */
  private agentAheadMs = 0;
  private agentIso = () => new Date(this.clock + this.agentAheadMs).toISOString();
  private marker = (who: string) => `${who}#${++this.markerSeq}`;

  // -- the run ------------------------------------------------------------------------------

  async run(steps: Step[]): Promise<void> {
    for (const step of steps) await this.step(step);
  }

  private async step(step: Step): Promise<void> {
    switch (step.kind) {
      case 'pass':
        return await this.runPass(this.begin(this.loop, step), step, {});
      case 'writer':
        return this.otherWriter(step.target, step.value, false);
      case 'resolve':
        return this.resolve(step.resolution, step.pick);
      case 'config':
        return this.changeConfig(step.change);
      case 'generation':
        return await this.nextGeneration(step.change, step.linger);
      case 'regress':
        return this.regress();
      case 'wait':
        this.clock += step.ms;
        return;
      case 'lose-datum':
        // Once the loop has seeded its history from the agent (its first pass), the store holds it.
        if (this.loop.passes > 0) this.loseDatum();
        else this.lossPending = true;
        return;
    }
  }

  // -- the loop, as reconcileNode runs it ----------------------------------------------------

  /**
   * A new run chain: an empty history, plus the operator decisions the ledger store gives back
   * (ControlActivities.storedDecisions; see Holes.storeCopiesLoop for which copy).
   */
  private openLoop(intent: BoundIntent): Loop {
    const stored = this.holes.storeCopiesLoop
      ? (this.store[this.store.length - 1]?.operator_decisions ?? [])
      : Object.values(this.storeMirror);
    const history: History = stored.length > 0 ? { ...emptyHistory(), stored_decisions: stored } : emptyHistory();
    return { passes: 0, intent, history, lastDecision: null, lastFingerprint: null };
  }

  /** 1–2 of a pass: observe, then read the authority (the old loop's in-flight pass stops here for a while). */
  private begin(loop: Loop, step: PassStep): Begun {
    this.agentAheadMs = step.aheadMs;
    const pre = this.observe(loop.intent);
    // After the observe: it binds agent.yaml's new key-named entries, as the agent's does.
    const oracle = this.oracle.view(this.config);
    this.clock += step.observeMs;
    return {
      loop,
      pre,
      authority: viewOf(this.authority),
      authorityShared: !this.authority.ok && this.authority.shared,
      newestBound: this.newestBound,
      oracle,
      history: loop.history,
    };
  }

  /** 3–6 of a pass, then what reconcileNode does after it: record, tell the agent, wait. */
  private async runPass(b: Begun, step: PassStep, how: { inflight?: boolean; lingering?: boolean }): Promise<void> {
    const { loop } = b;
    const sent: Sent[] = [];
    let moved = false;
    let probe: Observation | null = null;
    const firstAt = this.iso();
    this.acting = how;
    const post = () => (probe = step.probe === 'unreachable' ? null : this.observe(loop.intent));
    const { first, final } = await pass(b.pre, post, {
      intent: loop.intent,
      authority: b.authority,
      history: b.history,
      clock: () => this.iso(),
      ...(this.holes.yieldEndsOnNewSpec
        ? { rules: (rule: DecisionRule) => rule !== 'yield-outlives-new-value' && rule !== 'decisions-carry-value' }
        : {}),
      answer: (a) => {
        if (step.between && !moved) {
          moved = true;
          const planned = NAME_OF[targetOfAction(a.action, a.resource_key, a.spec) ?? ''];
          const name = step.between.target === 'planned' ? planned : step.between.target;
          if (name) this.otherWriter(name, step.between.value, true);
        }
        return this.apply(a, b.oracle, sent, step);
      },
    });
    loop.history = final.history;
    loop.lastDecision = final.decision;
    if (probe === null) for (const x of sent) if (x.answer === 'applied' && x.target) this.unattributed.add(x.target);
    const { write, fingerprint } = shouldWrite(final.decision, 'pass', loop.lastFingerprint);
    if (write) loop.lastFingerprint = fingerprint;
    if (write) this.store.push({ generation: loop.intent.generation, operator_decisions: final.decision.operator_decisions });
    for (const r of final.decisions_to_record ?? []) this.recordDecision(r);
    this.trace.push({
      kind: 'pass',
      pass: {
        index: this.passes++,
        loopPass: loop.passes++,
        generation: loop.intent.generation,
        inflight: how.inflight ?? false,
        lingering: how.lingering ?? false,
        intent: loop.intent,
        authority: b.authority,
        authorityShared: b.authorityShared,
        newestBound: b.newestBound,
        history: b.history,
        pre: b.pre,
        probe,
        first: first.decision,
        final: final.decision,
        firstAt,
        finalAt: this.iso(),
        sent,
        oracle: b.oracle,
        unattributed: new Set(this.unattributed),
      },
    });
    if (!how.inflight) this.clock += Math.min(nextWakeMs(final.decision, loop.intent.policy, this.clock), 5 * 60_000);
    if (this.lossPending && loop === this.loop) this.loseDatum();
  }

  /**
   * The agent loses .datum/ (claims, decisions, fence, journal). The design keeps yields and
   * conflicts through the ledger store; the bindings of key-named entries are made again on the
   * next observe.
   */
  private loseDatum(): void {
    this.lossPending = false;
    this.claims = { targets: {}, keys: {}, bindings: {} };
    this.decisions = {};
    this.fence = null;
    for (const target of Object.keys(this.node))
      if (this.node[target]?.marker?.startsWith('datum')) this.unattributed.add(target);
    this.written = {};
    this.oracle.lost();
  }

  /** resolveConflict, as the workflow handles it between passes. */
  private resolve(resolution: 'yield' | 'retake', pick: number): void {
    const loop = this.loop;
    const open = Object.keys(loop.history.conflicts).sort();
    const key = open[pick % Math.max(1, open.length)];
    if (key === undefined) return;
    const now = this.iso();
    const resolved = recordResolution(
      recordSignal(loop.history, 'resolveConflict', null),
      { resource_key: key, resolution, by: 'oncall' },
      now,
    );
    if (resolved.error) return;
    loop.history = resolved.history;
    const kept = decisionRequest(loop.intent, key, { kind: resolution, by: 'oncall', at: now, note: null });
    if (kept) this.recordDecision(kept);
    const spec = loop.intent.resources[key];
    if (spec) {
      const target = targetOf(key, spec);
      this.trace.push({ kind: 'resolve', generation: loop.intent.generation, key, target, resolution });
      this.oracle.resolved(target, valueDigest(key, loop.intent.resources) ?? '', loop.intent.generation, resolution);
    }
    const note = noteDecision(
      loop.intent,
      loop.lastDecision,
      loop.history,
      { reason: 'OPERATOR_RESOLUTION_RECORDED', detail: `oncall resolved "${key}" by ${resolution}` },
      now,
    );
    loop.history = note.history;
    loop.lastDecision = note.decision;
    this.clock += 1_000;
  }

  /**
   * A new generation at the authority, then the rollout's refresh: a valid one hands over to a
   * new loop (judged as judgeRefresh would: newer, readable, same digest); an invalid one leaves
   * the old loop running on its bound intent.
   */
  private async nextGeneration(change: Partial<GenSpec>, linger: Linger): Promise<void> {
    const generation = Math.max(...this.validGenerations.map((v) => v.generation), this.generation) + 1;
    const spec: GenSpec = { ...this.spec, shared: null, spelled: false, ...change };
    const read = readDoc(generation, spec);
    // The old loop's pass in flight read the authority before it moved.
    const inflight = linger > 0 ? this.begin(this.loop, QUIET_PASS) : null;
    this.authority = read;
    this.generation = generation;
    this.trace.push({ kind: 'authority', generation, spec, read, handedOver: read.ok });
    if (!read.ok) return;
    this.spec = spec;
    this.validGenerations.push({ generation, spec });
    const old = this.loop;
    this.loop = this.openLoop(read.intent);
    this.newestBound = generation;
    this.clock += 1_000;
    if (!inflight) return;
    const first = this.begin(this.loop, QUIET_PASS);
    if (linger === 3) await this.runPass(inflight, QUIET_PASS, { inflight: true });
    await this.runPass(first, QUIET_PASS, {});
    if (linger === 1 || linger === 2) await this.runPass(inflight, QUIET_PASS, { inflight: true });
    if (linger === 2) await this.runPass(this.begin(old, QUIET_PASS), QUIET_PASS, { lingering: true });
  }

  /** The authority goes back to the generation before the newest valid one; the loop stays bound. */
  private regress(): void {
    const back = this.validGenerations[this.validGenerations.length - 2];
    if (!back) return;
    this.authority = readDoc(back.generation, back.spec);
    this.generation = back.generation;
    this.trace.push({ kind: 'authority', generation: back.generation, spec: back.spec, read: this.authority, handedOver: false });
  }

  private changeConfig(change: ConfigChange): void {
    const c = structuredClone(this.config);
    if (change.op === 'mode') c.reconciliation.mode = change.mode;
    else if (change.op === 'add' && change.kind === 'override') c.overrides[change.name] = MAINTENANCE_OVERRIDE;
    else if (change.op === 'add') c.reconciliation.resources[change.name] = 'observe';
    else {
      const all = entriesOf(c);
      const gone = all[change.pick % Math.max(1, all.length)];
      if (gone?.kind === 'override') delete c.overrides[gone.name];
      else if (gone) delete c.reconciliation.resources[gone.name];
    }
    this.config = c;
    this.oracle.configChanged(c);
  }

  // -- the agent -----------------------------------------------------------------------------

  /** observe: what the node holds for the intent's keys, with protections as the agent reports them. */
  private observe(intent: BoundIntent): Observation {
    const at = this.iso();
    this.oracle.seen(this.config, intent.resources);
    if (!this.holes.fenceOnApplyOnly) this.fence = Math.max(this.fence ?? intent.generation, intent.generation);
    const claimed = claimResources(this.claims, intent.resources, intent.generation, at);
    const { entries, bindings } = resolveEntries(this.config, claimed, intent.resources, at);
    this.claims = { ...claimed, bindings };
    const reported = observedProtections(
      { entries, claims: this.claims, decisions: { targets: this.decisions } },
      intent.resources,
    );
    const resources: Observation['resources'] = {};
    for (const [key, spec] of Object.entries(intent.resources)) {
      const held = this.node[targetOf(key, spec)] ?? { value: null, marker: null };
      resources[key] = { type: spec.type, value: held.value, marker: held.marker, obstruction: null, detail: {} };
    }
    const observation: Observation = {
      node_id: 'N-24',
      observed_at: this.agentIso(),
      heartbeat_at: this.agentIso(),
      mode: this.config.reconciliation.mode,
      ...reported,
      resources,
      undeclared: [],
      config_error: null,
      fence_reset: null,
    };
    return observation;
  }

  /** apply, in applyLocked's order of refusals; every call is stamped for the properties first. */
  private apply(a: AuthorizedAction, oracle: OracleView, sent: Sent[], step: PassStep): ExecutionEvidence | ApplyFailure {
    this.clock += step.applyMs;
    const target = targetOfAction(a.action, a.resource_key, a.spec);
    const protection = target === null ? null : oracle.protects(a.resource_key, target);
    const stamp: Sent = {
      action: a,
      target,
      protectedBy: protection?.entry ?? null,
      protectedHow: protection?.how ?? null,
      // Any write to a yielded target (a new value needs an operator too); before hole 5, one of the same spec.
      yielded:
        target !== null &&
        oracle.yields.has(target) &&
        (!this.holes.yieldEndsOnNewSpec || oracle.yields.get(target)?.digest === writtenValue(a)),
      contested: target !== null && this.oracle.contested.get(target)?.digest === writtenValue(a),
      answer: 'applied',
      ownWrite: false,
    };
    sent.push(stamp);
    const answer = this.agentAnswer(a, target, step, stamp);
    stamp.answer = 'kind' in answer ? (answer.kind === 'refused' ? answer.refusal_type : 'failed') : answer.outcome;
    return answer;
  }

  private agentAnswer(a: AuthorizedAction, target: string | null, step: PassStep, stamp: Sent): ExecutionEvidence | ApplyFailure {
    const refuse = (refusal_type: string): ApplyFailure => ({
      kind: 'refused',
      refusal_type,
      message: `the model agent refused (${refusal_type})`,
    });
    if (target === null) return refuse('InvalidAction');
    const at = this.iso();
    // 3–4: mode, override, the kept decision for this spec (src/agent/activities/refusals.ts ACTION_CHECKS).
    const { entries } = resolveEntries(this.config, this.claims, {}, at);
    const guarding = protecting({ entries }, a.resource_key, target);
    const hostOrKey =
      this.config.reconciliation.mode === 'observe' || this.config.reconciliation.resources[a.resource_key] === 'observe';
    if (hostOrKey || guarding.some((e) => e.kind === 'observe')) return refuse('ObserveModeRefusal');
    if (guarding.some((e) => e.kind === 'override')) return refuse('OperatorOwnedRefusal');
    const kept = this.decisions[target];
    const same = kept !== undefined && (!a.spec_digest || sameIntent(kept, this.digestsOf(a)));
    if (kept?.kind === 'yield' && (same || !this.holes.yieldEndsOnNewSpec)) return refuse('OperatorOwnedRefusal');
    if (kept?.kind === 'conflict' && same) return refuse('ConflictOpenRefusal');
    // 6: per-node fence.
    if (this.fence !== null && a.desired_generation < this.fence) return refuse('StaleGenerationRefusal');
    this.fence = Math.max(this.fence ?? a.desired_generation, a.desired_generation);
    // 8: the snapshot's age at the moment of the write.
    if (!a.observed_at || !a.observation_ttl || msBetween(a.observed_at, this.agentIso()) > durationMs(a.observation_ttl))
      return refuse('StaleSnapshotRefusal');
    // 9: compare-and-swap on the target's own marker.
    const held = this.node[target] ?? { value: null, marker: null };
    if (held.marker !== a.observed_marker) {
      const own = this.written[this.holes.ownWritesByKey ? a.resource_key : target];
      if (own && own.marker === held.marker) {
        stamp.ownWrite = true;
        return refuse('StaleSnapshotRefusal');
      }
      if (!this.acting.inflight && !this.acting.lingering) this.oracle.moved(target, writtenValue(a), a.desired_generation);
      return refuse('MarkerMoved');
    }
    if (step.outcome === 'failed') return { kind: 'failed', detail: 'ServiceStartFailed: the model agent failed to act' };
    const marker = this.marker('datum');
    this.node[target] = { value: step.outcome === 'ok' ? this.written_value(a) : held.value, marker };
    this.written[this.holes.ownWritesByKey ? a.resource_key : target] = { marker, generation: a.desired_generation };
    // After a write: the key claims the target (claimOnApply: an older generation does not move a claim back).
    const prior = this.claims.targets[target];
    if (!prior || prior.generation === null || a.desired_generation >= prior.generation) {
      const since = prior?.resource_key === a.resource_key ? prior.since : at;
      this.claims = {
        ...this.claims,
        targets: { ...this.claims.targets, [target]: { resource_key: a.resource_key, generation: a.desired_generation, since } },
        keys: { ...this.claims.keys, [a.resource_key]: { target, generation: a.desired_generation } },
      };
    }
    const decision = this.decisions[target];
    const ends = decision?.kind === 'conflict' || this.holes.yieldEndsOnNewSpec;
    if (decision && a.spec_digest && ends && !sameIntent(decision, this.digestsOf(a))) {
      delete this.decisions[target];
      delete this.storeMirror[target];
    }
    this.oracle.wrote(target, writtenValue(a), this.holes.yieldEndsOnNewSpec);
    return {
      resource_key: a.resource_key,
      action: a.action,
      idempotency_key: a.idempotency_key,
      outcome: 'applied',
      executed_at: at,
      marker_after: marker,
      detail: step.outcome === 'ok' ? 'exit 0' : 'exit 0 (it did not take)',
      refusal: null,
      refusal_type: null,
    };
  }

  /** What the agent compares a kept decision with: the action's spec digest, and the value it computes from the write spec. */
  private digestsOf(a: AuthorizedAction): { spec_digest: string; value_digest: string | null } {
    return {
      spec_digest: a.spec_digest ?? '',
      value_digest: this.holes.yieldEndsOnNewSpec ? null : valueDigestOfAction(a.action, a.spec),
    };
  }

  /** What an action leaves on its target: the release, the file's digest, the flag, what a started service loaded. */
  private written_value(a: AuthorizedAction): Json {
    const s = a.spec as Record<string, Json>;
    if (a.action === 'release.install') return { version: s.version ?? null, sha256: s.sha256 ?? null };
    if (a.action === 'file.write') return s.sha256 ?? null;
    if (a.action === 'flag.write') return s.value ?? null;
    // A service loads what is on disk: the current release and the file at its config path.
    const release = this.node[TARGET.release]?.value as { version?: Json } | null;
    const config = typeof s.config_path === 'string' ? (this.node[`file:${s.config_path}`]?.value ?? null) : null;
    return { build: release?.version ?? null, config_sha256: config };
  }

  /** recordDecision, as recordDecisionAt keeps it: a conflict never replaces a yield for the same spec. */
  private recordDecision(r: RecordDecisionRequest): void {
    if (!this.holes.decisionsUnfenced && this.fence !== null && r.generation < this.fence) return;
    const prior = this.decisions[r.target];
    if (r.kind === 'retake') delete this.decisions[r.target];
    else if (!(r.kind === 'conflict' && prior?.kind === 'yield' && sameIntent(prior, r))) {
      const { node: _node, ...rest } = r;
      this.decisions[r.target] = operatorDecision.parse({ ...rest, kind: r.kind });
    }
    const kept = this.decisions[r.target];
    if (kept) this.storeMirror[r.target] = kept;
    else delete this.storeMirror[r.target];
  }

  private otherWriter(name: TargetName, value: number, between: boolean): void {
    const target = TARGET[name];
    const values = VALUES[name];
    this.node[target] = { value: values[value % values.length] ?? null, marker: this.marker('other') };
    this.unattributed.add(target);
    this.trace.push({ kind: 'writer', target, between });
  }
}

/**
 * Holes the properties found in the code around the domain, each switchable: closed (false), the
 * model behaves as the design means and as the code now does, so the properties judge the loop;
 * open (true), it behaves as the code did before the fix, which the "holes found" tests in
 * properties-sequences.test.ts pin next to the closed behaviour. All four are closed in the code:
 * storeCopiesLoop by the ledger store's own copy of the decisions (169a1c4,
 * src/activities/ledger-store/decisions.ts, tested on both back ends in test/ledger/decisions.test.ts
 * and end to end in test/adversarial/store-copy.test.ts); decisionsUnfenced, ownWritesByKey and
 * fenceOnApplyOnly in the agent (3f6da66; test/adversarial/handover-fence.test.ts and
 * test/agent/cas.test.ts, each failing when its fix is reverted).
 */
export interface Holes {
  /**
   * The ledger store's copy of the operator decisions is what the loop held in the newest entry a
   * pass recorded, in the order decided, whatever its generation (heldDecisions into each entry;
   * operatorDecisionsOf, src/activities/ledger-store.ts). So: an old loop's pass after a hand-over
   * is decided after the new loop's entries, and its decisions win; a retake is a note, so until a
   * pass records an entry after it (one whose fingerprint is unchanged records none) the newest
   * pass entry still holds what the retake ended; and a decision is dropped by the first
   * generation that changes its spec or moves its target, where the agent's record keeps it until
   * a write of another spec, so after a revert the two copies disagree and the outcome depends on
   * whether .datum/ survived. Closed: the store keeps a copy of the agent's record.
   */
  storeCopiesLoop: boolean;
  /**
   * The agent keeps whatever recordDecision sends, from any generation (recordDecision,
   * src/agent/activities/record-decision.ts): an old loop's pass after a hand-over gives the agent back a yield or
   * conflict the new generation's write had ended. Closed: fenced per node like an apply.
   */
  decisionsUnfenced: boolean;
  /**
   * The agent remembers Datum's own last write per resource key (fence.json `written`,
   * src/agent/node/journal.ts), and compare-and-swap asks it by the action's key: a hand-over that
   * renames a resource, with the old loop's write landing between the new loop's plan and its
   * apply, has that write taken for another writer's (MARKER_MOVED, a CONFLICT). Closed: by target.
   */
  ownWritesByKey: boolean;
  /**
   * The per-node fence moves only when an action of a newer generation is accepted
   * (journal.accept in apply, src/agent/node/journal.ts): a new loop that observed the node and had
   * nothing to write leaves it where it was, so the old loop's pass in flight still writes after
   * the new generation was bound and observed. Closed: an observe of generation G moves it to G
   * too (the observe request carries its generation).
   */
  fenceOnApplyOnly: boolean;
  /**
   * A yield was about the spec's digest (issue 18, hole 5): a generation that changed the spec, if
   * only its spelling, was new intent, its write went ahead and the agent dropped the yield.
   * Closed: about the value written (src/domain/written.ts), and a new value of a yielded target
   * waits for an operator (revalued, UNKNOWN); the agent refuses every write to a yielded target.
   * Open, the loop runs without the rules yield-outlives-new-value and decisions-carry-value.
   */
  yieldEndsOnNewSpec: boolean;
}

export const HOLES_CLOSED: Holes = {
  storeCopiesLoop: false,
  decisionsUnfenced: false,
  ownWritesByKey: false,
  fenceOnApplyOnly: false,
  yieldEndsOnNewSpec: false,
};

/** The digest an oracle compares an action with: the value it writes (written.ts). */
const writtenValue = (a: AuthorizedAction): string => valueDigestOfAction(a.action, a.spec) ?? '';

/** The passes a hand-over runs on its own: nothing in the way, every action takes. */
const QUIET_PASS: PassStep = { kind: 'pass', between: null, outcome: 'ok', probe: 'fresh', observeMs: 0, applyMs: 0, aheadMs: 0 };

export const OBSERVATION_TTL_MS = TTL_MS;
/** How far ahead of the controller's clock a snapshot may be stamped and still be fresh, as the design has it. */
export const CLOCK_SKEW_MS = 5_000;

/** Runs a script on a fresh node model and returns its trace. */
export async function runScript(script: Script, holes: Holes = HOLES_CLOSED): Promise<NodeModel> {
  const model = new NodeModel(script, holes);
  await model.run(script.steps);
  return model;
}
