import { jsonEqual, type Json } from './canonical';
import { desiredValue, type BoundIntent } from './desired';
import type { History } from './history';
import type { Mode, ObservedResource, Observation, Ownership, ResourceSpec, ResourceType } from './schemas';

/** One resource_key as this pass sees it: who owns it, what should be, what is. */
export interface Assessment {
  resource_key: string;
  type: ResourceType | null;
  ownership: Ownership;
  ownership_provenance: Json;
  /** Why the ownership is what it is, in words (for UNKNOWN it is the condition's message). */
  ownership_reason: string;
  spec: ResourceSpec | null;
  desired: Json;
  observed: ObservedResource | null;
  drift: boolean;
  effective_mode: Mode;
}

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
  const keys = new Set<string>([...Object.keys(intent.resources), ...Object.keys(observation.overrides), ...Object.keys(history.yielded)]);
  for (const u of observation.undeclared) keys.add(u.resource_key);

  const assessed = [...keys].sort().map((key): Assessment => {
    const spec = intent.resources[key] ?? null;
    const undeclared = observation.undeclared.find((u) => u.resource_key === key);
    const observed: ObservedResource | null =
      observation.resources[key] ?? (undeclared ? { type: undeclared.type, value: undeclared.value, marker: undeclared.marker, obstruction: null, detail: {} } : null);
    const desired: Json = spec ? desiredValue(key, intent.resources) : null;
    const drift = spec !== null && !jsonEqual(observed?.value ?? null, desired);
    const base = { resource_key: key, type: spec?.type ?? observed?.type ?? null, spec, desired, observed, drift, effective_mode: effectiveMode(observation, key) };

    // undefined: no override; null: an override without provenance.
    const override = Object.prototype.hasOwnProperty.call(observation.overrides, key) ? (observation.overrides[key] ?? null) : undefined;
    const contested = history.conflicts[key]?.resolution === null;
    const yielded = history.yielded[key];

    if (override === null) {
      return { ...base, ownership: 'UNKNOWN', ownership_provenance: null, ownership_reason: `"${key}" has a local override without provenance (approved_by, reason, since)` };
    }
    if (override && contested) {
      return { ...base, ownership: 'UNKNOWN', ownership_provenance: override, ownership_reason: `"${key}" is both overridden locally and contested by another writer` };
    }
    if (override) {
      return { ...base, ownership: 'OPERATOR_OWNED', ownership_provenance: override, ownership_reason: `local override approved by ${override.approved_by}: ${override.reason}` };
    }
    if (yielded && spec) {
      const provenance = { approved_by: yielded.by, reason: yielded.note ?? 'conflict yielded to the other writer', since: yielded.at, via: 'resolveConflict' };
      return { ...base, ownership: 'OPERATOR_OWNED', ownership_provenance: provenance, ownership_reason: `yielded to the other writer by ${yielded.by}` };
    }
    if (!spec) {
      return { ...base, ownership: 'UNKNOWN', ownership_provenance: null, ownership_reason: `"${key}" is on the node but declared neither in desired state nor as an override` };
    }
    if (!observed) {
      return { ...base, ownership: 'UNKNOWN', ownership_provenance: null, drift: false, ownership_reason: `the agent did not report "${key}", so its state is not proven` };
    }
    return { ...base, ownership: 'MANAGED', ownership_provenance: { source: intent.provenance.source, revision: intent.provenance.revision }, ownership_reason: 'declared in desired state; no local override' };
  });
  return assessed.map((a) => (a.spec?.type === 'service' ? withServiceInputs(a, a.spec, assessed) : a));
}

/**
 * A service should run what its node is meant to hold: the desired build and config where
 * Datum manages them, and what is actually on disk where an operator owns them ("managed
 * convergence is evaluated without" operator-owned state).
 */
function withServiceInputs(a: Assessment, spec: Extract<ResourceSpec, { type: 'service' }>, all: Assessment[]): Assessment {
  const input = (key: string, pick: (v: Json) => Json) => {
    const dep = all.find((d) => d.resource_key === key);
    if (!dep) return null;
    // By ownership only, never by mode: observe must plan exactly what enforce would.
    const source = dep.ownership === 'MANAGED' ? dep.desired : (dep.observed?.value ?? null);
    return source === null ? null : pick(source);
  };
  const desired: Json = {
    build: input(spec.release, (v) => (v && typeof v === 'object' && !Array.isArray(v) ? (v.version ?? null) : null)),
    config_sha256: input(spec.config, (v) => v),
  };
  const drift = a.ownership === 'UNKNOWN' && !a.observed ? false : !jsonEqual(a.observed?.value ?? null, desired);
  return { ...a, desired, drift };
}
