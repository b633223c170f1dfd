import { jsonEqual, type Json } from './canonical';
import { desiredValue } from './desired';
import { kindOf } from './resources';
import type { BoundIntent } from '../contract/desired';
import type { History } from '../contract/history';
import type { Observation, ObservedResource } from '../contract/observation';
import type { Mode } from '../contract/vocabulary';
import type { Assessment } from './assessment';

export type { Assessment } from './assessment';

/**
 * The mode a resource is judged in: observe when the host or the resource says so. The one copy
 * of this rule in the domain; observe and enforce share everything else (plan, ledger, conditions).
 */
export function effectiveMode(observation: Pick<Observation, 'mode' | 'resource_modes'>, key: string): Mode {
  return observation.mode === 'observe' || observation.resource_modes[key] === 'observe' ? 'observe' : 'enforce';
}

/**
 * Ownership of every resource_key the desired state declares, the agent overrides or the node
 * shows. MANAGED only when declared and nothing local claims it; anything whose ownership is
 * not proven is UNKNOWN and is never touched.
 */
export function classify(intent: BoundIntent, observation: Observation, history: History): Assessment[] {
  const keys = new Set<string>([
    ...Object.keys(intent.resources),
    ...Object.keys(observation.overrides),
    ...Object.keys(history.yielded),
  ]);
  for (const u of observation.undeclared) keys.add(u.resource_key);
  const assessed = [...keys].sort().map((key): Assessment => {
    const base = sighting(key, intent, observation);
    return { ...base, ...ownershipOf(base, intent, observation, history) };
  });
  // A type may judge a key by the others' values (a service by its release and config): once all are classified.
  return assessed.map((a) => (a.spec ? (kindOf(a.spec).refine?.(a, a.spec, assessed) ?? a) : a));
}

type Sighting = Omit<Assessment, 'ownership' | 'ownership_provenance' | 'ownership_reason'>;

/** What should be and what is, for one key, before anyone's claim on it is weighed. */
function sighting(key: string, intent: BoundIntent, observation: Observation): Sighting {
  const spec = intent.resources[key] ?? null;
  const undeclared = observation.undeclared.find((u) => u.resource_key === key);
  const observed: ObservedResource | null =
    observation.resources[key] ??
    (undeclared
      ? { type: undeclared.type, value: undeclared.value, marker: undeclared.marker, obstruction: null, detail: {} }
      : null);
  const desired: Json = spec ? desiredValue(key, intent.resources) : null;
  const drift = spec !== null && !jsonEqual(observed?.value ?? null, desired);
  return {
    resource_key: key,
    type: spec?.type ?? observed?.type ?? null,
    spec,
    desired,
    observed,
    drift,
    effective_mode: effectiveMode(observation, key),
  };
}

type Claim = Pick<Assessment, 'ownership' | 'ownership_provenance' | 'ownership_reason'> & { drift?: boolean };

/**
 * Who owns a key, highest claim first: a local override (without provenance or contested: not
 * proven), an operator's yield, the desired state. What nobody is proven to own is UNKNOWN.
 */
function ownershipOf(base: Sighting, intent: BoundIntent, observation: Observation, history: History): Claim {
  const key = base.resource_key;
  // undefined: no override; null: an override without provenance.
  const override = Object.prototype.hasOwnProperty.call(observation.overrides, key)
    ? (observation.overrides[key] ?? null)
    : undefined;
  const unknown = (ownership_reason: string, provenance: Json = null): Claim => ({
    ownership: 'UNKNOWN',
    ownership_provenance: provenance,
    ownership_reason,
  });
  const left = leftClaim(key, history, override === null || !base.spec);
  if (left) return left;
  if (override === null) return unknown(`"${key}" has a local override without provenance (approved_by, reason, since)`);
  if (override && history.conflicts[key]?.resolution === null)
    return unknown(`"${key}" is both overridden locally and contested by another writer`, override);
  if (override) {
    // An override reached through its target (the key was renamed, or agent.yaml names the target)
    // says which entry and which target protect this key.
    // Unparsed activity results recorded before agents reported protections have none.
    const protections = (observation.protections as Observation['protections'] | undefined) ?? {};
    const via = (protections[key] ?? []).filter((p) => p.kind === 'override');
    const through = via.map((p) => `${p.entry}${p.target ? ` on ${p.target}` : ''}`).join(', ');
    return {
      ownership: 'OPERATOR_OWNED',
      ownership_provenance: via.length > 0 ? { ...override, protected_by: via } : override,
      ownership_reason: `local override approved by ${override.approved_by}: ${override.reason}${through ? ` (${through})` : ''}`,
    };
  }
  const yielded = base.spec ? yieldClaim(key, history) : null;
  if (yielded) return yielded;
  if (!base.spec) return unknown(`"${key}" is on the node but declared neither in desired state nor as an override`);
  if (!base.observed) return { ...unknown(`the agent did not report "${key}", so its state is not proven`), drift: false };
  const provenance = { source: intent.provenance.source, revision: intent.provenance.revision };
  return {
    ownership: 'MANAGED',
    ownership_provenance: provenance,
    ownership_reason: 'declared in desired state; no local override',
  };
}

/**
 * A resolver's `leave` (a work item on UNKNOWN_OWNERSHIP) supplies the provenance that was
 * missing: an override without one, or a resource nothing declares.
 */
function leftClaim(key: string, history: History, unproven: boolean): Claim | null {
  const left = history.left?.[key];
  if (!left || !unproven) return null;
  return {
    ownership: 'OPERATOR_OWNED',
    ownership_provenance: { approved_by: left.by, reason: left.note ?? 'left to its owner', since: left.at, via: 'work item' },
    ownership_reason: `left to its owner by ${left.by} (work item)`,
  };
}

/**
 * An operator's yield: the key is theirs (OPERATOR_OWNED), or, when the yield was for another
 * value than desired state now writes, nobody's until an operator decides (UNKNOWN, with the
 * resolutions resolveConflict takes).
 */
function yieldClaim(key: string, history: History): Claim | null {
  const yielded = history.yielded[key];
  const revalued = history.revalued?.[key];
  if (revalued && !yielded) {
    return {
      ownership: 'UNKNOWN',
      ownership_reason: `"${key}" was yielded to another writer by ${revalued.by} at ${revalued.at}, for another value than desired state now writes there; only an operator decides: resolveConflict "${key}" with retake (Datum writes the new value) or yield (the other writer keeps it)`,
      ownership_provenance: {
        yielded_by: revalued.by,
        yielded_at: revalued.at,
        note: revalued.note,
        target: revalued.target,
        value_digest: revalued.value_digest,
        value_digest_now: revalued.value_digest_now,
        resolutions: ['retake', 'yield'],
      },
    };
  }
  if (!yielded) return null;
  return {
    ownership: 'OPERATOR_OWNED',
    ownership_provenance: {
      approved_by: yielded.by,
      reason: yielded.note ?? 'conflict yielded to the other writer',
      since: yielded.at,
      via: 'resolveConflict',
    },
    ownership_reason: `yielded to the other writer by ${yielded.by}`,
  };
}
