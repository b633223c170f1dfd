import { canonicalJson, sha256Hex, type Json } from './canonical';
import { clip } from './bounds';
import { lengthProblem, pathSegments, pathSpellingProblem } from './rootPath';
import type { ResourceSpec } from '../contract/desired';

/*
 * Targets: what the agent writes, as opposed to the resource key that names it in one
 * desired-state file (docs/architecture.md §4 "Targets and operator decisions"). Protections
 * (overrides, observe entries, yields, open conflicts) bind to targets, so renaming a resource
 * cannot escape them.
 */

export const TARGET_KINDS = ['file', 'flag', 'release', 'service'] as const;

/** The one link every release switches. */
export const RELEASE_TARGET = 'release:current';

/** A file's target: its path under the root, separators normalised to "/". */
export function fileTarget(path: string): string {
  return `file:${pathSegments(path).join('/')}`;
}

/** The target a resource spec writes. The one function that names it (the agent uses targetOfAction, below). */
export function targetOf(key: string, spec: ResourceSpec): string {
  switch (spec.type) {
    case 'file':
      return fileTarget(spec.path);
    case 'flag':
      return `flag:${key}`;
    case 'release':
      return RELEASE_TARGET;
    case 'service':
      return `service:${key}`;
  }
}

/**
 * The target an action writes, read from its write spec (what the agent is about to touch), not
 * from what the controller says the action is for; null when the spec does not say.
 */
export function targetOfAction(kind: string, resourceKey: string, spec: Json): string | null {
  const field = (name: string): string | null => {
    const v = spec && typeof spec === 'object' && !Array.isArray(spec) ? spec[name] : undefined;
    return typeof v === 'string' ? v : null;
  };
  if (kind.startsWith('file.')) {
    const path = field('path');
    return path === null ? null : fileTarget(path);
  }
  if (kind.startsWith('flag.')) return `flag:${field('name') ?? resourceKey}`;
  if (kind.startsWith('release.')) return RELEASE_TARGET;
  if (kind.startsWith('service.')) return `service:${resourceKey}`;
  return null;
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
  if (!(TARGET_KINDS as readonly string[]).includes(kind))
    return `"${entry}" names no target kind ("${kind}" is not one of ${TARGET_KINDS.join(', ')})`;
  if (rest === '') return `"${entry}" names a ${kind} target without saying which`;
  if (kind === 'release' && entry !== RELEASE_TARGET)
    return `"${entry}" is not a release target (the only one is ${RELEASE_TARGET})`;
  if (kind === 'file' && fileTarget(rest) !== entry) return `"${entry}" is not spelled as Datum names it (${fileTarget(rest)})`;
  if (kind === 'file' && pathSegments(rest).some((s) => s === '' || s === '.' || s === '..' || rest.startsWith('/')))
    return `"${entry}" is not a plain path under the node root`;
  const spelling = kind === 'file' ? pathSpellingProblem(rest) : null;
  if (spelling !== null) return `"${clip(entry, 60)}" names a path Datum cannot write: ${lengthProblem(rest)}`;
  return null;
}
