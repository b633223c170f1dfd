import { DECISION_RULE } from '../contract/patches';
import type { Assessment } from './classify';
import { durationMs, formatDuration, msBetween } from './duration';
import { sameMarker } from './markers';
import { kindOf } from './resources';
import { targetOf } from './targets';
import type { Classified } from './verdict';
import { blockingOf, openConflicts, type RepairRecord, type StageInput, type Writers } from './writers';
import { WRITER_DEFAULTS, type Policy } from '../contract/desired';
import type { History, PastRepair } from '../contract/history';
import type { Observation, WriterEvidence } from '../contract/observation';

/*
 * Repeated drift is a writer (seed 000 §9: "when another writer keeps changing the field, stop").
 * conflict_window catches a writer that undoes a repair soon after it; one that comes back more
 * slowly would be new drift every time, repaired with a fresh budget, forever. So the loop
 * remembers, per target (what is written, not the key that names it), the repairs that took within
 * policy.writer_horizon, across passes and continue-as-new (History.repair_trail). When a target
 * that was repaired writer_repairs times within the horizon drifts again under a marker that is not
 * Datum's own, that drift is another writer's: its conflict opens before any repair, with the
 * earlier repairs as the evidence, and an operator resolves it like any conflict.
 */

export interface WriterRule {
  horizon: string;
  horizon_ms: number;
  /** Repairs within the horizon after which the next drift is a writer's; 0: the rule is off. */
  repairs: number;
}

export function writerRule(policy: Policy): WriterRule {
  // In the one stored spelling, as normalizePolicy writes a horizon desired state sets.
  const horizon_ms = durationMs(policy.writer_horizon ?? WRITER_DEFAULTS.writer_horizon);
  return { horizon: formatDuration(horizon_ms), horizon_ms, repairs: policy.writer_repairs ?? WRITER_DEFAULTS.writer_repairs };
}

/** The target an assessed resource writes: the agent's resolved identity where it reports one, else its spelling. */
export function writtenTarget(a: Assessment): string | null {
  if (!a.spec) return null;
  const identity = a.observed?.detail.identity;
  return typeof identity === 'string' ? identity : targetOf(a.resource_key, a.spec);
}

/** A trail as the rule counts it at `now`: the repairs within the horizon, at most the last `repairs`. */
function recent(trail: PastRepair[] | undefined, rule: WriterRule, now: string): PastRepair[] {
  if (!trail || rule.repairs === 0) return [];
  return trail.filter((r) => msBetween(r.repaired.at, now) <= rule.horizon_ms).slice(-rule.repairs);
}

/**
 * After the probe: each repair it proved joins its target's trail, with the drift it answered
 * (the pre-action snapshot) and the probe's proof. Bounded: the horizon and writer_repairs prune
 * every trail, and an empty one is dropped. Unchanged (the same object) when nothing was repaired.
 */
export function trailAfterRepairs(
  history: History,
  proofs: Record<string, RepairRecord>,
  post: Classified,
  pre: Observation,
  policy: Policy,
  now: string,
): History['repair_trail'] {
  const keys = Object.keys(proofs);
  if (keys.length === 0) return history.repair_trail;
  const rule = writerRule(policy);
  const trails: Record<string, PastRepair[]> = {};
  for (const [target, trail] of Object.entries(history.repair_trail ?? {})) {
    const kept = recent(trail, rule, now);
    if (kept.length > 0) trails[target] = kept;
  }
  if (rule.repairs === 0) return trails;
  for (const key of keys) {
    const a = post.byKey.get(key);
    const target = a ? writtenTarget(a) : null;
    const proof = proofs[key];
    if (!target || !proof) continue;
    const found = pre.resources[key];
    const repair: PastRepair = {
      resource_key: key,
      found: { at: pre.observed_at, value: found?.value ?? null, marker: found?.marker ?? null },
      repaired: { at: proof.at, value: proof.value, marker: proof.marker },
    };
    trails[target] = [...(trails[target] ?? []), repair].slice(-rule.repairs);
  }
  return trails;
}

/** An operator's resolution of a key starts its target's count afresh: what they decided is the new baseline. */
export function forgetRepairs(trail: History['repair_trail'], key: string): History['repair_trail'] {
  if (!trail) return trail;
  const out: Record<string, PastRepair[]> = {};
  for (const [target, repairs] of Object.entries(trail)) {
    const kept = repairs.filter((r) => r.resource_key !== key);
    if (kept.length > 0) out[target] = kept;
  }
  return out;
}

/**
 * Whether this drift is one the rule may call a writer's: managed, enforced, repairable, with no
 * conflict about it yet. Where a type's absence is its failure (a service that is not running has
 * crashed or been stopped), that is not a writer, and its restart is an ordinary repair.
 */
function judgeable(a: Assessment, conflicts: Writers['conflicts']): boolean {
  if (a.ownership !== 'MANAGED' || !a.drift || a.effective_mode !== 'enforce' || !a.observed) return false;
  if (a.observed.obstruction !== null || a.resource_key in conflicts) return false;
  return !(a.spec !== null && kindOf(a.spec).absenceIsFailure && a.observed.value === null);
}

/** The drifts of this snapshot that are a writer's by the rule, each with its evidence. */
export function repeatedDrift(
  history: History,
  snapshot: Classified,
  conflicts: Writers['conflicts'],
  policy: Policy,
  now: string,
): Record<string, WriterEvidence[]> {
  const rule = writerRule(policy);
  const found: Record<string, WriterEvidence[]> = {};
  if (rule.repairs === 0) return found;
  for (const a of snapshot.assessments) {
    const target = writtenTarget(a);
    if (!target || !judgeable(a, conflicts)) continue;
    const trail = recent(history.repair_trail?.[target], rule, now);
    const last = trail[trail.length - 1];
    // Datum's own last write still there means intent moved (a re-bound generation), not a writer.
    if (!last || trail.length < rule.repairs || sameMarker(a.observed?.marker ?? null, last.repaired.marker)) continue;
    found[a.resource_key] = evidence(trail, a, snapshot.observation.observed_at, rule);
  }
  return found;
}

/** Each earlier repair as two points (the drift found, Datum's proven repair), then this drift. */
function evidence(trail: PastRepair[], a: Assessment, at: string, rule: WriterRule): WriterEvidence[] {
  const n = trail.length;
  const points = trail.flatMap((r, i): WriterEvidence[] => [
    {
      ...r.found,
      source: `drift ${i + 1} of ${n + 1} on ${r.resource_key === a.resource_key ? 'this target' : `this target (as "${r.resource_key}")`}`,
    },
    { ...r.repaired, source: `Datum's repair ${i + 1} of ${n}, proven by the fresh probe` },
  ]);
  const window = formatDuration(msBetween(trail[0]?.repaired.at ?? at, at));
  return [
    ...points,
    {
      at,
      value: a.observed?.value ?? null,
      marker: a.observed?.marker ?? null,
      source: `fresh observation: drift ${n + 1}, ${window} after the first of ${n} repairs (writer_horizon ${rule.horizon})`,
    },
  ];
}

/**
 * Before acting: a drift the rule calls a writer's opens its conflict (marked repeated_drift), so
 * the pass repairs nothing and the ladder says CONFLICT/REPEATED_DRIFT. Asked of `rules` only when
 * some drift qualifies, so a loop that ran before the rule keeps repairing.
 */
export function withRepeatedDrift(writers: Writers, snapshot: Classified, input: StageInput): Writers {
  const fresh = repeatedDrift(input.history, snapshot, writers.conflicts, input.intent.policy, input.now);
  if (Object.keys(fresh).length === 0 || !input.rules(DECISION_RULE.repeatedDriftIsWriter)) return writers;
  const rule = writerRule(input.intent.policy);
  const conflicts = openConflicts(writers.conflicts, fresh, input.now);
  for (const key of Object.keys(fresh)) {
    const opened = conflicts[key];
    if (opened) conflicts[key] = { ...opened, repeated_drift: { repairs: rule.repairs, horizon: rule.horizon } };
  }
  const repaired = { ...writers.repaired };
  for (const key of Object.keys(fresh)) delete repaired[key];
  return { repaired, conflicts, ...blockingOf(conflicts, fresh) };
}
