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

export { RELEASE_TARGET } from './resources';

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

/**
 * The path a target names under the root ("etc/app" of "file:etc/app" or "directory:etc/app"),
 * for the types whose target is a path; null for any other target.
 */
export function pathOfTarget(target: string): string | null {
  const colon = target.indexOf(':');
  const type = target.slice(0, colon);
  return colon > 0 && Object.hasOwn(RESOURCE_KINDS, type) && RESOURCE_KINDS[type as ResourceType].targetIsPath
    ? target.slice(colon + 1)
    : null;
}

/**
 * Where a target is, for "one target, one owner": a path target by its path alone, since a file
 * and a directory at one path are one place that both would have to be; any other by itself.
 */
export function placeOf(target: string): string {
  const path = pathOfTarget(target);
  return path === null ? target : `path:${path}`;
}

/**
 * Targets claimed by more than one resource (path targets by their place, whatever their types):
 * each with its claimants in declaration order, and the target as the first of them writes it.
 */
export function sharedTargets(resources: Record<string, ResourceSpec>): { target: string; keys: string[] }[] {
  const byPlace = new Map<string, { target: string; keys: string[] }>();
  for (const [key, target] of Object.entries(targetsOf(resources))) {
    const place = placeOf(target);
    const seen = byPlace.get(place);
    if (seen) seen.keys.push(key);
    else byPlace.set(place, { target, keys: [key] });
  }
  return [...byPlace.values()].filter(({ keys }) => keys.length > 1);
}

/**
 * A file whose path is a parent of another path resource's: the other needs that path to be a
 * directory, the file needs it to be a file, and neither can converge. Judged by spelling; the
 * agent sees the same through symlinks as an obstruction.
 */
export function pathsUnderFiles(resources: Record<string, ResourceSpec>): { file: string; under: string; path: string }[] {
  const paths = Object.entries(targetsOf(resources)).flatMap(([key, target]) => {
    const path = pathOfTarget(target);
    return path === null ? [] : [{ key, path, isFile: resources[key]?.type === 'file' }];
  });
  return paths.flatMap((f) =>
    f.isFile
      ? paths.filter((o) => o.path.startsWith(`${f.path}/`)).map((o) => ({ file: f.key, under: o.key, path: f.path }))
      : [],
  );
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
