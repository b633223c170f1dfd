// The conditions every pass records, whichever rung of the ladder (ladder.ts) decides its status:
// one per conflict, per resource Datum will not touch or cannot repair, and per standing refusal.
import type { Json } from './canonical';
import type { Assessment } from './classify';
import { draft, type ConditionDraft } from './conditions';
import type { Classified } from './verdict';
import type { RefusalRecord } from './writers';
import type { ConflictRecord } from '../contract/history';
import type { NodeHold } from '../contract/ledger';
import { withFix } from '../contract/fix';
import { holdWords } from './holds';
import type { PlannedAction } from '../contract/ledger';

/** One CONFLICTING_WRITER condition per conflict, open or resolved and waiting for its observation. */
export function conflictDrafts(conflicts: Record<string, ConflictRecord>, attempts: number): ConditionDraft[] {
  return Object.entries(conflicts).map(([key, c]) => {
    const state = c.resolution
      ? `resolved by ${c.resolution.by} (${c.resolution.resolution}); waiting for an observation that confirms it`
      : 'repair is stopped until an operator resolves it';
    const seen = c.repeated_drift
      ? `"${key}" drifted again after ${repeatedFigures({ [key]: c }, [key])}: another writer keeps changing it`
      : `Another writer keeps changing "${key}"`;
    return draft(
      'CONFLICTING_WRITER',
      key,
      `${seen}; ${state}.`,
      c.repeated_drift
        ? { sequence: c.sequence, resolution: c.resolution, repeated_drift: c.repeated_drift }
        : { sequence: c.sequence, resolution: c.resolution },
      [`${attempts} repair(s) this episode`],
    );
  });
}

/** What Datum will not touch or cannot repair: unknown ownership, destructive repairs, observe-only drift. */
export function resourceDrafts(
  judged: Classified,
  unknownOnes: Assessment[],
  destructiveOnes: PlannedAction[],
  observeOnly: Assessment[],
): ConditionDraft[] {
  const unknown = unknownOnes.map((a) =>
    draft(
      'UNKNOWN_OWNERSHIP',
      a.resource_key,
      `Ownership of "${a.resource_key}" is not proven: ${a.ownership_reason}; Datum will not touch it.`,
      // A claim that an operator resolves (a yield for another value) says how, for the CLI and work items.
      resolvable(a.ownership_provenance)
        ? { observed: a.observed?.value ?? null, claim: a.ownership_provenance }
        : { observed: a.observed?.value ?? null },
    ),
  );
  const destructive = destructiveOnes.map((p) =>
    draft(
      'DESTRUCTIVE_REPAIR_REQUIRED',
      p.resource_key,
      `The only repair of "${p.resource_key}" would destroy something (${p.withheld_because}); an operator must decide.`,
      {
        observed: judged.byKey.get(p.resource_key)?.observed?.detail ?? null,
      },
    ),
  );
  const why =
    judged.observation.mode === 'observe' ? 'the host is in observe mode' : 'the resource is set to observe on this host';
  const observed = observeOnly.map((a) =>
    draft(
      'OBSERVED_DRIFT',
      a.resource_key,
      `"${a.resource_key}" differs from desired and ${why}; Datum reports it and changes nothing.`,
      { desired: a.desired, observed: a.observed?.value ?? null },
    ),
  );
  return [...unknown, ...destructive, ...observed];
}

/** One DRIFT_HELD condition per resource whose drift a hold on the node holds back. */
export function heldDrafts(node: string, held: Assessment[], hold: NodeHold | null): ConditionDraft[] {
  if (!hold) return [];
  return held.map((a) =>
    draft(
      'DRIFT_HELD',
      a.resource_key,
      withFix(
        `"${a.resource_key}" differs from desired and ${node} is ${holdWords(hold)}: reported, not repaired`,
        `\`datum unhold ${node} --by NAME\` lets Datum repair it${hold.until ? ` (the hold ends by itself at ${hold.until})` : ''}`,
      ),
      { desired: a.desired, observed: a.observed?.value ?? null, hold: { ...hold } },
    ),
  );
}

/** An ownership claim an operator settles with resolveConflict (classify: a yield for another value). */
function resolvable(claim: Json): boolean {
  return claim !== null && typeof claim === 'object' && !Array.isArray(claim) && Array.isArray(claim.resolutions);
}

/** One ACTION_REFUSED condition per standing refusal. */
export function refusalDrafts(keys: string[], refused: Record<string, RefusalRecord>): ConditionDraft[] {
  return keys.map((key) => {
    const r = refused[key];
    return draft(
      'ACTION_REFUSED',
      key,
      `The agent refused to repair "${key}": ${r?.refusal ?? 'refused'}.`,
      { refusal: r?.refusal ?? null },
      [`${r ? 'apply at ' + r.at : 'apply'}`],
    );
  });
}

/** "3 repairs within writer_horizon 24h(, …)": the figures a repeated-drift conflict was opened with. */
export function repeatedFigures(conflicts: Record<string, ConflictRecord>, keys: string[]): string {
  const said = keys.flatMap((k) => {
    const r = conflicts[k]?.repeated_drift;
    return r ? [`${r.repairs} repair(s) within writer_horizon ${r.horizon}`] : [];
  });
  return [...new Set(said)].join(', ');
}
