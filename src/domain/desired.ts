import { canonicalJson, sha256Hex, type Json } from './canonical';
import { kindOf } from './resources';
import type { BoundIntent, DesiredProvenance, DesiredState, Policy, ResourceSpec } from '../contract/desired';

export { fileBytes } from './resources';

/**
 * desired_digest = "sha256:" + hex sha256 of the canonical JSON of {resources, policy} with
 * defaults applied. The generation is deliberately outside the digest: a generation whose
 * content changed without a new number shows up as a digest mismatch.
 */
export function desiredDigest(resources: Record<string, ResourceSpec>, policy: Policy): string {
  return `sha256:${sha256Hex(canonicalJson({ resources, policy }))}`;
}

export function bindIntent(desired: DesiredState, provenance: DesiredProvenance): BoundIntent {
  return { ...desired, digest: desiredDigest(desired.resources, desired.policy), provenance };
}

/** Which signed document a loop holds (a short digest of its signature), or null for an unsigned one. */
export function intentSignature(intent: Pick<BoundIntent, 'signed'>): string | null {
  return intent.signed ? sha256Hex(intent.signed.signature).slice(0, 16) : null;
}

/** The resources as the agent reads and writes them (each release's artifact where the controller resolved it). */
export function agentResources(intent: BoundIntent): Record<string, ResourceSpec> {
  const out: Record<string, ResourceSpec> = {};
  for (const [key, spec] of Object.entries(intent.resources)) {
    out[key] = kindOf(spec).forAgent?.(intent, key, spec) ?? spec;
  }
  return out;
}

/**
 * What a correct node shows for a resource, in the shape the agent's provider observes it.
 * A service is judged by what it reports it loaded, not by being alive (docs/architecture.md §8: correctness).
 */
export function desiredValue(key: string, resources: Record<string, ResourceSpec>): Json {
  const spec = resources[key];
  // An undeclared key has no desired value.
  if (!spec) return null;
  return kindOf(spec).desiredValue(key, spec, resources);
}
