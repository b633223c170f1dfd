import { canonicalJson, sha256Hex, type Json } from './canonical';
import { kindOf, RESOURCE_KINDS, typeOfAction } from './resources';
import type { ResourceSpec } from '../contract/desired';

/*
 * What Datum writes to a target, as opposed to how a spec spells it. An operator's yield and an
 * open conflict are about this value (docs/architecture.md §4 "Targets and operator decisions"):
 * the same bytes written from a spec spelled another way (a YAML mapping instead of a string, the
 * keys in another order, `sensitive` added) are the same decision, and only a changed value is
 * new intent. The controller computes it from the spec, the agent from the action it is asked to
 * carry out; both give the same digest for the same write.
 */

/** "sha256:" + hex sha256 of the canonical JSON of what a resource's write puts on its target. */
export function valueDigest(key: string, resources: Record<string, ResourceSpec>): string | null {
  const spec = resources[key];
  if (!spec) return null;
  return digestOf({ [spec.type]: kindOf(spec).written(key, spec, resources) });
}

/**
 * The same digest from an action's write spec (what the agent is asked to write); null when the
 * spec does not say. The agent checks file content against its sha256 before it writes.
 */
export function valueDigestOfAction(kind: string, spec: Json): string | null {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return null;
  const type = typeOfAction(kind);
  const written = type === null ? undefined : RESOURCE_KINDS[type].writtenByAction(kind, spec);
  return written === undefined ? null : digestOf({ [type!]: written });
}

const digestOf = (value: Json) => `sha256:${sha256Hex(canonicalJson(value))}`;

/** The two digests a decision, an action or a spec can carry: the spec's always, the value's where known. */
export interface IntentDigests {
  spec_digest: string;
  value_digest?: string | null;
}

/**
 * Whether two records are about the same intent for their target: by the value written where both
 * know it, else (records from before values were kept) by the spec's digest.
 */
export function sameIntent(a: IntentDigests, b: IntentDigests): boolean {
  if (a.value_digest && b.value_digest) return a.value_digest === b.value_digest;
  return a.spec_digest === b.spec_digest;
}
