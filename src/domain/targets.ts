import { canonicalJson, sha256Hex, type Json } from './canonical';
import { kindOf, RESOURCE_KINDS, typeOfAction } from './resources';
import type { ResourceSpec } from '../contract/desired';
import { RESOURCE_TYPES, type ResourceType } from '../contract/vocabulary';

/*
 * Targets: what the agent writes, as opposed to the resource key that names it in one
 * desired-state file (docs/architecture.md §4 "Targets and operator decisions"). Protections
 * (overrides, observe entries, yields, open conflicts) bind to targets, so renaming a resource
 * cannot escape them.
 */

/** The kinds of target agent.yaml may name ("file:etc/app.json"): one per resource type. */
export const TARGET_KINDS: readonly ResourceType[] = RESOURCE_TYPES;

export { RELEASE_TARGET, fileTarget } from './resources';

/** The target a resource spec writes. The one function that names it (the agent uses targetOfAction, below). */
export function targetOf(key: string, spec: ResourceSpec): string {
  return kindOf(spec).target(key, spec);
}

/**
 * The target an action writes, read from its write spec (what the agent is about to touch), not
 * from what the controller says the action is for; null when the spec does not say.
 */
export function targetOfAction(kind: string, resourceKey: string, spec: Json): string | null {
  const type = typeOfAction(kind);
  if (type === null) return null;
  const fields = spec && typeof spec === 'object' && !Array.isArray(spec) ? spec : {};
  return RESOURCE_KINDS[type].targetOfAction(resourceKey, fields);
}

/** "sha256:" + hex sha256 of a resource spec's canonical JSON: what a yield or a conflict was about. */
export function specDigest(spec: ResourceSpec): string {
  return `sha256:${sha256Hex(canonicalJson(spec))}`;
}

/** Every target of a desired state, by resource key. */
export function targetsOf(resources: Record<string, ResourceSpec>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, spec] of Object.entries(resources)) out[key] = targetOf(key, spec);
  return out;
}

/** Targets claimed by more than one resource: each with its claimants, in declaration order. */
export function sharedTargets(resources: Record<string, ResourceSpec>): { target: string; keys: string[] }[] {
  const byTarget = new Map<string, string[]>();
  for (const [key, target] of Object.entries(targetsOf(resources))) byTarget.set(target, [...(byTarget.get(target) ?? []), key]);
  return [...byTarget.entries()].filter(([, keys]) => keys.length > 1).map(([target, keys]) => ({ target, keys }));
}

/** Whether an agent.yaml entry names a target ("file:etc/app.json") rather than a resource key. */
export function namesTarget(entry: string): boolean {
  return entry.includes(':');
}

/**
 * Why a target named in agent.yaml is not one, or null when it is. The spelling of a target is
 * exactly what targetOf writes, so an entry that passes can match a resource.
 */
export function targetNameProblem(entry: string): string | null {
  const colon = entry.indexOf(':');
  const kind = entry.slice(0, colon);
  const rest = entry.slice(colon + 1);
  if (!Object.hasOwn(RESOURCE_KINDS, kind))
    return `"${entry}" names no target kind ("${kind}" is not one of ${TARGET_KINDS.join(', ')})`;
  if (rest === '') return `"${entry}" names a ${kind} target without saying which`;
  return RESOURCE_KINDS[kind as ResourceType].targetNameProblem(entry, rest);
}
