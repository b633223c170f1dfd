import { DECISION_RULE, type DecisionRule } from '../contract/patches';
import { durationMs, msBetween } from './duration';
import { sameMarker } from './markers';
import type { Classified } from './verdict';
import type { BoundIntent } from '../contract/desired';
import type { ConflictRecord, History } from '../contract/history';
import type { Decision } from '../contract/ledger';
import type { WriterEvidence } from '../contract/observation';

/*
 * What the loop carries about other writers and refusals from one pass to the next. Both stages
 * (authorize before acting, judgeProbe after) run these on the snapshot they judge; a pass whose
 * probe a gate closed on runs trackWithoutProbe on the agent's answers alone.
 */

/**
 * The decision rules (src/contract/patches.ts) reach these stages as `rules`, which the workflow
 * answers from patched(). Each is asked only where it changes the outcome, so its marker is
 * written only there.
 */
export type { DecisionRule };

/** What both judgement stages start from. */
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
  /** Actions carried out (applied, replayed, or failed on the way): each may have moved its marker. */
  executed: string[];
}

/** Findings with nothing in them, fresh each call: judgeProbe fills its own copy in. */
export function noFindings(): ProbeFindings {
  return {
    acted_keys: new Set(),
    repaired: {},
    overwritten: {},
    refused: {},
    refused_now: [],
    stale: [],
    ineffective: [],
    failed: [],
    executed: [],
  };
}

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
  if (ended.length > 0 && rules(DECISION_RULE.ownIneffectiveWriteEndsProof)) for (const key of ended) delete repaired[key];
  // So has any other write of this pass the probe does not settle as taken or overwritten: one
  // that failed on the way (a restart that crashed, an apply that timed out after writing).
  const settled = new Set([...Object.keys(probe.repaired), ...probe.ineffective, ...Object.keys(probe.overwritten)]);
  const unsettled = probe.executed.filter((key) => !settled.has(key));
  endOwnWrites(repaired, unsettled, rules);
  const fresh: Record<string, WriterEvidence[]> = {
    ...probe.overwritten,
    ...flipsAfterRepair(repaired, snapshot, probe.acted_keys),
  };
  const conflicts = openConflicts(history.conflicts, fresh, now);
  for (const key of Object.keys(fresh)) delete repaired[key];
  // A resolved conflict closes only on observation: a yield on the first fresh snapshot after
  // it, a retake once the resource is seen at desired.
  for (const [key, c] of Object.entries(conflicts)) {
    if (!c.resolution || fresh[key]) continue;
    if (c.resolution.resolution === 'yield' || !snapshot.byKey.get(key)?.drift) delete conflicts[key];
  }
  return { repaired, conflicts, ...blockingOf(conflicts, fresh) };
}

/**
 * After acting, when a gate closed on the probe (the agent went away, the probe was stale, or
 * agent.yaml became invalid): what the agent's own answers say needs no probe. A MARKER_MOVED
 * opens its conflict, a refusal stands, and every write of this pass ends its resource's repair
 * record. Nothing closes here: closing needs an observation.
 */
export function trackWithoutProbe(
  history: History,
  now: string,
  conflictWindow: string,
  answers: ProbeFindings,
  rules: (rule: DecisionRule) => boolean,
): Omit<Writers, 'blocking'> & {
  refused: History['refused'];
  /** Conflicts this pass's MARKER_MOVED answers opened. */
  opened: string[];
  /** Refusals of this pass recorded as standing. */
  standing: string[];
} {
  const repaired = { ...history.repaired };
  // A record past conflict_window is dropped by the next pass anyway: the rule changes nothing there.
  const inWindow = repairsInWindow(history.repaired, now, conflictWindow);
  const written = answers.executed.filter((key) => key in inWindow);
  endOwnWrites(repaired, written, rules);
  const heard = Object.keys(answers.overwritten).length > 0 || answers.refused_now.length > 0;
  if (!heard || !rules(DECISION_RULE.answersOutliveLostProbe))
    return { repaired, conflicts: history.conflicts, evidence: null, refused: history.refused, opened: [], standing: [] };
  const opened = Object.keys(answers.overwritten);
  const conflicts = openConflicts(history.conflicts, answers.overwritten, now);
  for (const key of opened) delete repaired[key];
  return {
    repaired,
    conflicts,
    evidence: opened.length > 0 ? blockingOf(conflicts, answers.overwritten).evidence : null,
    refused: { ...history.refused, ...answers.refused },
    opened,
    standing: answers.refused_now,
  };
}

/**
 * Datum's own write moved the marker a repair record holds, so the record no longer tells its
 * marker from another writer's: the next pass judges the resource afresh (a retry, not a CONFLICT).
 */
function endOwnWrites(repaired: History['repaired'], written: string[], rules: (rule: DecisionRule) => boolean): void {
  const ended = written.filter((key) => key in repaired);
  if (ended.length > 0 && rules(DECISION_RULE.ownExecutedWriteEndsProof)) for (const key of ended) delete repaired[key];
}

/** Each fresh sequence opens (or reopens) its resource's conflict, unresolved. */
export function openConflicts(
  before: Record<string, ConflictRecord>,
  fresh: Record<string, WriterEvidence[]>,
  now: string,
): Record<string, ConflictRecord> {
  const conflicts: Record<string, ConflictRecord> = { ...before };
  for (const [key, sequence] of Object.entries(fresh)) {
    const prior = conflicts[key];
    conflicts[key] = {
      since: prior?.since ?? now,
      sequence: [...(prior && prior.resolution === null ? prior.sequence : []), ...sequence].slice(-10),
      resolution: null,
    };
  }
  return conflicts;
}

/** Any unresolved conflict blocks; the ledger's evidence is set when one is new or still blocks. */
export function blockingOf(
  conflicts: Record<string, ConflictRecord>,
  fresh: Record<string, WriterEvidence[]>,
): Pick<Writers, 'blocking' | 'evidence'> {
  const blocking = Object.entries(conflicts).flatMap(([key, c]) => (c.resolution === null ? [key] : []));
  const evidence =
    Object.keys(fresh).length > 0 || blocking.length > 0
      ? Object.entries(conflicts).map(([resource_key, c]) => ({ resource_key, sequence: c.sequence }))
      : null;
  return { blocking, evidence };
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
    if (marker === null || sameMarker(marker, rec.marker)) continue;
    flips[key] = [
      { at: rec.at, value: rec.value, marker: rec.marker, source: 'observation after repair' },
      { at: snapshot.observation.observed_at, value: a.observed?.value ?? null, marker, source: 'fresh observation' },
    ];
  }
  return flips;
}

/**
 * Refusals are not retried until something they were about has changed (marker, mode, drift), or
 * an operator reset the node's fence after the refusal (`datum agent reset-fence`): what the agent
 * accepts changed on the node itself, so each such refusal is tried once more, and stands again if
 * refused again.
 */
export function standingRefusals(
  refusals: History['refused'],
  snapshot: Classified,
  refusedNow: string[],
  rules: (rule: DecisionRule) => boolean,
  signature: string | null,
): History['refused'] {
  const refused = { ...refusals };
  const reset = snapshot.observation.fence_reset ?? null;
  for (const [key, r] of Object.entries(refused)) {
    const a = snapshot.byKey.get(key);
    if (refusedNow.includes(key)) continue;
    if (!a || !a.drift || !sameMarker(a.observed?.marker ?? null, r.marker) || a.effective_mode !== r.mode) delete refused[key];
    // A refusal of the signed document the loop sent: another signature (signed again, re-bound) is tried.
    else if (r.signature !== undefined && r.signature !== signature) delete refused[key];
    // Asked only where it changes the outcome: a refusal that would stand, older than the reset.
    else if (reset !== null && msBetween(r.at, reset.at) > 0 && rules(DECISION_RULE.fenceResetRetriesRefused))
      delete refused[key];
  }
  return refused;
}
