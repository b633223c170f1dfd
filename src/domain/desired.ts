import { canonicalJson, sha256Hex, type Json } from './canonical';
import type { BoundIntent, DesiredProvenance, DesiredState, Policy, ReleaseSpec, ResourceSpec } from '../contract/desired';

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

/** Where the agent fetches a release's artifact: the location the controller resolved, else as written. */
export function artifactLocation(intent: BoundIntent, key: string, spec: ReleaseSpec): string {
  return intent.locations?.[key] ?? spec.artifact;
}

/** The resources as the agent reads and writes them: each release's artifact at artifactLocation. */
export function agentResources(intent: BoundIntent): Record<string, ResourceSpec> {
  const out: Record<string, ResourceSpec> = {};
  for (const [key, spec] of Object.entries(intent.resources)) {
    out[key] = spec.type === 'release' ? { ...spec, artifact: artifactLocation(intent, key, spec) } : spec;
  }
  return out;
}

/** The exact bytes a file resource writes: text as given, structured content as sorted, indented JSON. */
export function fileBytes(content: string | Json): string {
  if (typeof content === 'string') return content;
  return `${JSON.stringify(JSON.parse(canonicalJson(content)), null, 2)}\n`;
}

/**
 * What a correct node shows for a resource, in the shape the agent's provider observes it.
 * A service is judged by what it reports it loaded, not by being alive (docs/architecture.md §8: correctness).
 */
export function desiredValue(key: string, resources: Record<string, ResourceSpec>): Json {
  const spec = resources[key];
  // An undeclared key has no desired value.
  if (!spec) return null;
  switch (spec.type) {
    case 'release':
      return { version: spec.version, sha256: spec.sha256 };
    case 'file':
      return sha256Hex(fileBytes(spec.content));
    case 'flag':
      return spec.value;
    case 'service': {
      const release = resources[spec.release];
      const config = resources[spec.config];
      return {
        build: release?.type === 'release' ? release.version : null,
        config_sha256: config?.type === 'file' ? sha256Hex(fileBytes(config.content)) : null,
      };
    }
  }
}
