import { canonicalJson, sha256Hex, type Json } from './canonical';
import { desiredValue } from './desired';
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
  switch (spec.type) {
    case 'file':
    case 'flag':
    case 'release':
      return digestOf({ [spec.type]: desiredValue(key, resources) });
    case 'service': {
      // A service's write is the process it starts: its command, run on the config file at its path.
      // The build and the config bytes it loads are other targets' values (and where an operator
      // owns them, what is on disk), so they are not this one's.
      const config = resources[spec.config];
      return digestOf({ service: { command: spec.command, config_path: config?.type === 'file' ? config.path : null } });
    }
  }
}

/**
 * The same digest from an action's write spec (what the agent is asked to write); null when the
 * spec does not say. The agent checks file content against its sha256 before it writes.
 */
export function valueDigestOfAction(kind: string, spec: Json): string | null {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return null;
  switch (kind) {
    case 'file.write':
      return typeof spec.sha256 === 'string' ? digestOf({ file: spec.sha256 }) : null;
    case 'flag.write':
      return spec.value === undefined ? null : digestOf({ flag: spec.value });
    case 'release.install':
      return digestOf({ release: { version: spec.version ?? null, sha256: spec.sha256 ?? null } });
    case 'service.start':
    case 'service.restart':
      return digestOf({ service: { command: spec.command ?? null, config_path: spec.config_path ?? null } });
    default:
      return null;
  }
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
