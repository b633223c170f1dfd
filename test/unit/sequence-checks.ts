import fc from 'fast-check';
import { expect } from 'vitest';
import {
  decide,
  desiredValue,
  jsonEqual,
  msBetween,
  valueDigest,
  targetOf,
  type BoundIntent,
  type Decision,
  type Json,
  type Observation,
} from '../../src/domain';
import { coverage, propertyRuns, scriptArb, timeoutFor, type Focus } from './generators';
import { CLOCK_SKEW_MS, OBSERVATION_TTL_MS, runScript, type NodeModel, type OracleView, type PassRecord } from './node-model';

/*
 * The checks every sequence property runs (properties-sequences.test.ts,
 * properties-generations.test.ts): each case is a script run on the node model (./node-model.ts),
 * each of its passes is held to the core invariants (checkCore), then to the property's own.
 * What a target "is" to the checks comes from the model's auditor (the script's events), never
 * from a decision.
 *
 * Cases per property: 10^4 on CI, 2,000 elsewhere, 10^5 with `npm run properties:full`
 * (generators.ts propertyRuns).
 */

const RUNS = propertyRuns('sequences');
/** A case is a few to a few dozen passes: about 2 ms here; the limit allows 25. */
export const TIMEOUT = timeoutFor(RUNS, 25);

export type Passes = PassRecord[];
export const passesOf = (m: NodeModel): Passes => m.trace.flatMap((e) => (e.kind === 'pass' ? [e.pass] : []));

/** The model's stamp of an answer: applied, failed, or the refusal's type. */
const isRefusal = (answer: string) => answer !== 'applied' && answer !== 'replayed' && answer !== 'failed';

/** Keys of the intent with the target each claims and the digest of the value it writes there (written.ts). */
export const claims = (intent: BoundIntent) =>
  Object.entries(intent.resources).map(([key, spec]) => ({
    key,
    spec,
    target: targetOf(key, spec),
    digest: valueDigest(key, intent.resources) ?? '',
  }));

/** Differs from what desired state declares (what a planner that ignored protections would repair). */
export const driftedKey = (o: Observation, intent: BoundIntent, key: string) =>
  !jsonEqual(o.resources[key]?.value ?? null, desiredValue(key, intent.resources));
export const anyDrift = (p: PassRecord) => Object.keys(p.intent.resources).some((k) => driftedKey(p.pre, p.intent, k));

// ---------------------------------------------------------------------------------------------
// The core invariants, on every pass of every sequence.

/** The operator's, as the auditor reads it: an override on the key or its target, or a yield for this spec. */
function notOurs(view: OracleView, intent: BoundIntent, key: string): boolean {
  const spec = intent.resources[key];
  if (!spec) return true;
  const target = targetOf(key, spec);
  // A yield for another value is not ours either: it waits for an operator (UNKNOWN).
  return view.owner(key, target) !== null || view.yields.has(target);
}

/** What a key must show to count as converged; a service runs what is on disk where an operator owns its inputs. */
function expectedValue(view: OracleView, intent: BoundIntent, judged: Observation, key: string): Json {
  const spec = intent.resources[key];
  if (spec?.type !== 'service') return desiredValue(key, intent.resources);
  const want = desiredValue(key, intent.resources) as { build: Json; config_sha256: Json };
  const onDisk = (k: string) => judged.resources[k]?.value ?? null;
  const build = notOurs(view, intent, spec.release)
    ? ((onDisk(spec.release) as { version?: Json } | null)?.version ?? null)
    : want.build;
  const config = notOurs(view, intent, spec.config) ? onDisk(spec.config) : want.config_sha256;
  return { build, config_sha256: config };
}

/** Fresh at `at`: no older than the TTL, and not stamped further ahead of the controller's clock than the skew. */
const freshAt = (o: Observation, at: string) => {
  const age = msBetween(o.observed_at, at);
  return age <= OBSERVATION_TTL_MS && age >= -CLOCK_SKEW_MS;
};

/** Why a CONVERGED decision is not backed by its snapshot, or null when it is. */
function unprovenConvergence(p: PassRecord, judged: Observation | null, at: string): string | null {
  if (!judged) return 'CONVERGED without a snapshot';
  if (!freshAt(judged, at)) return `CONVERGED from a snapshot stamped ${judged.observed_at}, judged at ${at}`;
  for (const c of claims(p.intent)) {
    const moved = p.oracle.contested.get(c.target);
    if (moved?.open && moved.digest === c.digest) return `CONVERGED while ${c.target} is contested (MARKER_MOVED, unresolved)`;
    if (notOurs(p.oracle, p.intent, c.key)) continue;
    const want = expectedValue(p.oracle, p.intent, judged, c.key);
    if (!jsonEqual(judged.resources[c.key]?.value ?? null, want))
      return `CONVERGED with ${c.key} at ${JSON.stringify(judged.resources[c.key]?.value)}, not ${JSON.stringify(want)}`;
  }
  return null;
}

const planOnly = (d: Decision) => d.planned_actions.map(({ authorized: _a, withheld_because: _w, ...rest }) => rest);

function checkCore(p: PassRecord): void {
  const at = `pass ${p.index} (generation ${p.generation})`;
  // CONVERGED only from a fresh snapshot matching every enforced managed resource.
  const acted = p.sent.length > 0;
  const judged = acted ? p.final : p.first;
  if (judged.convergence_status === 'CONVERGED') {
    const unproven = unprovenConvergence(p, acted ? p.probe : p.pre, acted ? p.finalAt : p.firstAt);
    if (unproven !== null) expect(unproven, at).toBeNull();
  }
  // RETRY promises another attempt: never once the retry budget is spent (issue 20).
  for (const d of [p.first, p.final])
    if (d.convergence_status === 'RETRY')
      expect(d.attempt_count, `${at}: RETRY (${d.reason}) past retry_budget ${d.retry_budget}`).toBeLessThan(d.retry_budget);
  // A snapshot that is not fresh (too old, or from beyond the skew ahead) never drives an action.
  if (!freshAt(p.pre, p.firstAt) && (p.sent.length > 0 || p.first.convergence_status !== 'BLOCKED')) {
    expect(p.sent, `${at}: acted from a stale snapshot`).toEqual([]);
    expect(p.first.convergence_status, at).toBe('BLOCKED');
  }
  // Observe plans exactly what enforce would, and authorizes nothing.
  if (p.pre.mode === 'observe' || Object.keys(p.pre.resource_modes).length > 0) {
    if (p.pre.mode === 'observe' && p.sent.length > 0) expect(p.sent, `${at}: acted in observe mode`).toEqual([]);
    const enforcing = decide({
      intent: p.intent,
      authority: p.authority,
      observation: { ...p.pre, mode: 'enforce', resource_modes: {} },
      history: p.history,
      now: p.firstAt,
    }).decision;
    if (!jsonEqual(planOnly(p.first), planOnly(enforcing)))
      expect(planOnly(p.first), `${at}: observe plans what enforce would`).toEqual(planOnly(enforcing));
  }
  // A refused apply is never CONVERGED; a failed one only with a matching probe (above).
  if (p.final.convergence_status === 'CONVERGED' && p.sent.some((s) => isRefusal(s.answer)))
    expect(p.final.convergence_status, `${at}: refused, yet`).not.toBe('CONVERGED');
  // A conflict is another writer: one opens only on a target someone besides Datum wrote. (Not
  // judged for an old loop's pass after a hand-over: it reads the new generation's writes over its
  // own repairs as a flip, a false CONFLICT that only its own last entry shows; see the report.)
  for (const c of p.inflight || p.lingering ? [] : p.final.conditions) {
    const spec = c.type === 'CONFLICTING_WRITER' && c.resource_key ? p.intent.resources[c.resource_key] : undefined;
    if (!spec || !c.resource_key) continue;
    const target = targetOf(c.resource_key, spec);
    const known =
      p.history.conflicts[c.resource_key] !== undefined ||
      p.pre.decisions[c.resource_key]?.kind === 'conflict' ||
      (p.history.stored_decisions ?? []).some((d) => d.target === target && d.kind === 'conflict');
    if (!known && !p.unattributed.has(target))
      expect(`a conflict on ${target}`, `${at}: no writer but Datum has written ${target}`).toBe('no conflict');
  }
  // Nothing is planned for a key that is not MANAGED.
  for (const s of p.sent) {
    const entry = p.first.resources.find((r) => r.resource_key === s.action.resource_key);
    if (entry?.ownership !== 'MANAGED') expect(entry?.ownership, `${at}: acted on ${s.action.resource_key}`).toBe('MANAGED');
  }
}

/**
 * The edges of freshness the core invariants decide on, which every property's scripts must reach:
 * a snapshot on the stale side of an edge that would be acted on were it fresh (so the gate, not
 * the node, held the pass), and one stamped ahead within the skew that is acted on. Shares of the
 * cases, well below what the generator gives.
 */
const CORE_COVERAGE = {
  'a snapshot past the TTL that a fresh one would act on': 0.002,
  'a snapshot stamped ahead within the skew, acted on': 0.01,
  'a snapshot stamped ahead beyond the skew that a fresh one would act on': 0.005,
};
type CoreLabel = keyof typeof CORE_COVERAGE;

function coreReached(p: PassRecord, hit: (label: CoreLabel) => void): void {
  const age = msBetween(p.pre.observed_at, p.firstAt);
  if (freshAt(p.pre, p.firstAt)) {
    if (age < 0 && p.sent.length > 0) hit('a snapshot stamped ahead within the skew, acted on');
    return;
  }
  const asFresh = { ...p.pre, observed_at: p.firstAt };
  const { decision } = decide({
    intent: p.intent,
    authority: p.authority,
    observation: asFresh,
    history: p.history,
    now: p.firstAt,
  });
  if (decision.authorized_actions.length === 0) return;
  hit(
    age < 0
      ? 'a snapshot stamped ahead beyond the skew that a fresh one would act on'
      : 'a snapshot past the TTL that a fresh one would act on',
  );
}

// ---------------------------------------------------------------------------------------------
// The properties.

export async function checkSequences<K extends string>(
  focus: Focus,
  minShare: Record<K, number>,
  check: (model: NodeModel, passes: Passes, hit: (label: K) => void) => void,
): Promise<void> {
  const runs = RUNS;
  const cov = coverage<K | CoreLabel>({ ...CORE_COVERAGE, ...minShare });
  await fc.assert(
    fc.asyncProperty(scriptArb(focus), async (script) => {
      const model = await runScript(script);
      const passes = passesOf(model);
      const reached = new Set<K | CoreLabel>();
      for (const p of passes) {
        checkCore(p);
        coreReached(p, (label) => reached.add(label));
      }
      check(model, passes, (label) => reached.add(label));
      for (const label of reached) cov.hit(label);
    }),
    { numRuns: runs },
  );
  expect(cov.missed(runs), 'every case the property is about was generated').toEqual([]);
}
