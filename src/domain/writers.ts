import type { BoundIntent } from './desired';
import { durationMs, msBetween } from './duration';
import type { ConflictRecord, History } from './history';
import type { Decision, WriterEvidence } from './schemas';
import type { Classified } from './verdict';

/*
 * What the loop carries about other writers and refusals from one pass to the next. Both stages
 * (authorize before acting, judgeProbe after) run these on the snapshot they judge.
 */

/** What both judgement stages start from. */
/**
 * Decision rules added after loops were already running. A running loop replays its history on
 * new code, so the workflow answers each from patched(): a rule is in force only where no earlier
 * decision was made without it.
 */
export type DecisionRule = 'own-ineffective-write-ends-proof';

export interface StageInput {
  intent: BoundIntent;
  now: string;
  /** The history the pass started with. */
  history: History;
  /** The same, with this pass's attempt and action_seq counted. */
  carried: History;
  /** Whether a rule added after a loop started is in force for it. */
  rules: (rule: DecisionRule) => boolean;
}

export type RefusalRecord = History['refused'][string];
export type RepairRecord = History['repaired'][string];

/** What the fresh probe said about this pass's own actions (empty before acting). */
export interface ProbeFindings {
  acted_keys: ReadonlySet<string>;
  /** Repairs the probe shows at desired, with the marker seen (conflict_window starts here). */
  repaired: Record<string, RepairRecord>;
  /** Actions the probe shows overwritten: the marker moved after our own write. */
  overwritten: Record<string, WriterEvidence[]>;
  refused: Record<string, RefusalRecord>;
  refused_now: string[];
  /** Refused because the snapshot the plan was made from was stale at the moment of the write: not a standing refusal. */
  stale: string[];
  ineffective: string[];
  failed: string[];
}

export const NO_FINDINGS: ProbeFindings = {
  acted_keys: new Set(),
  repaired: {},
  overwritten: {},
  refused: {},
  refused_now: [],
  stale: [],
  ineffective: [],
  failed: [],
};

export interface Writers {
  repaired: History['repaired'];
  conflicts: Record<string, ConflictRecord>;
  /** Resources with an unresolved conflict: repair stops on the whole node. */
  blocking: string[];
  /** The ledger's conflicting_writer_evidence: set when a conflict is new this pass or still blocks. */
  evidence: Decision['conflicting_writer_evidence'];
}

/**
 * Another writer shows as a marker that moved after our own write, or between the plan and the
 * write (the agent's MARKER_MOVED refusal; both found by judgeProbe), or as a value our repair
 * proved at desired that flips away within conflict_window (found here).
 */
export function trackConflicts(
  history: History,
  snapshot: Classified,
  now: string,
  conflictWindow: string,
  probe: ProbeFindings,
  rules: (rule: DecisionRule) => boolean = () => true,
): Writers {
  const repaired = { ...repairsInWindow(history.repaired, now, conflictWindow), ...probe.repaired };
  // Our own write that did not take has moved the marker since the repair: that proof is gone.
  const ended = probe.ineffective.filter((key) => key in repaired);
  if (ended.length > 0 && rules('own-ineffective-write-ends-proof')) for (const key of ended) delete repaired[key];
  const fresh: Record<string, WriterEvidence[]> = {
    ...probe.overwritten,
    ...flipsAfterRepair(repaired, snapshot, probe.acted_keys),
  };
  const conflicts: Record<string, ConflictRecord> = { ...history.conflicts };
  for (const [key, sequence] of Object.entries(fresh)) {
    const prior = conflicts[key];
    conflicts[key] = {
      since: prior?.since ?? now,
      sequence: [...(prior && prior.resolution === null ? prior.sequence : []), ...sequence].slice(-10),
      resolution: null,
    };
    delete repaired[key];
  }
  // A resolved conflict closes only on observation: a yield on the first fresh snapshot after
  // it, a retake once the resource is seen at desired.
  for (const [key, c] of Object.entries(conflicts)) {
    if (!c.resolution || fresh[key]) continue;
    if (c.resolution.resolution === 'yield' || !snapshot.byKey.get(key)?.drift) delete conflicts[key];
  }
  const blocking = Object.entries(conflicts).flatMap(([key, c]) => (c.resolution === null ? [key] : []));
  const evidence =
    Object.keys(fresh).length > 0 || blocking.length > 0
      ? Object.entries(conflicts).map(([resource_key, c]) => ({ resource_key, sequence: c.sequence }))
      : null;
  return { repaired, conflicts, blocking, evidence };
}

/** Repairs older than conflict_window no longer make a flip a conflict: that is ordinary drift. */
function repairsInWindow(repaired: History['repaired'], now: string, conflictWindow: string): History['repaired'] {
  const windowMs = durationMs(conflictWindow);
  return Object.fromEntries(Object.entries(repaired).filter(([, rec]) => msBetween(rec.at, now) <= windowMs));
}

/** Managed resources a repair proved at desired that now differ under someone else's marker. */
function flipsAfterRepair(
  repaired: History['repaired'],
  snapshot: Classified,
  actedKeys: ReadonlySet<string>,
): Record<string, WriterEvidence[]> {
  const flips: Record<string, WriterEvidence[]> = {};
  for (const [key, rec] of Object.entries(repaired)) {
    const a = snapshot.byKey.get(key);
    if (actedKeys.has(key) || !a || a.ownership !== 'MANAGED' || !a.drift) continue;
    const marker = a.observed?.marker ?? null;
    if (marker === null || marker === rec.marker) continue;
    flips[key] = [
      { at: rec.at, value: rec.value, marker: rec.marker, source: 'observation after repair' },
      { at: snapshot.observation.observed_at, value: a.observed?.value ?? null, marker, source: 'fresh observation' },
    ];
  }
  return flips;
}

/** Refusals are not retried until something they were about has changed (marker, mode, drift). */
export function standingRefusals(refusals: History['refused'], snapshot: Classified, refusedNow: string[]): History['refused'] {
  const refused = { ...refusals };
  for (const [key, r] of Object.entries(refused)) {
    const a = snapshot.byKey.get(key);
    if (refusedNow.includes(key)) continue;
    if (!a || !a.drift || a.observed?.marker !== r.marker || a.effective_mode !== r.mode) delete refused[key];
  }
  return refused;
}
