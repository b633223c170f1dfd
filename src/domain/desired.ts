import { canonicalJson, sha256Hex, type Json } from './canonical';
import { InvalidDesiredState, problemsFromZod, type Problem } from './errors';
import { RELEASE_TARGET, sharedTargets } from './targets';
import { desiredStateFile, normalizePolicy, resourceKey, resourceSpec } from './schemas';
import type { BoundIntent, DesiredProvenance, DesiredState, Policy, ReleaseSpec, ResourceSpec } from '../contract/desired';
import { RESOURCE_TYPES } from '../contract/vocabulary';

/**
 * desired_digest = "sha256:" + hex sha256 of the canonical JSON of {resources, policy} with
 * defaults applied. The generation is deliberately outside the digest: a generation whose
 * content changed without a new number shows up as a digest mismatch.
 */
export function desiredDigest(resources: Record<string, ResourceSpec>, policy: Policy): string {
  return `sha256:${sha256Hex(canonicalJson({ resources, policy }))}`;
}

/**
 * Validates a parsed desired-state document. Throws InvalidDesiredState naming the file, every
 * bad field and its fix; returns nothing partial, so no node ever acts on half a file.
 */
export function validateDesiredState(data: unknown, source: string, expectedNode?: string): DesiredState {
  const top = desiredStateFile.safeParse(data, { reportInput: true });
  const problems: Problem[] = [];
  if (!top.success) {
    problems.push(...problemsFromZod(top.error));
    if (!top.data) {
      // Still check the resources we can reach, so one run shows every problem in the file.
      const raw = (data && typeof data === 'object' ? (data as Record<string, unknown>).resources : undefined) ?? {};
      if (raw && typeof raw === 'object') checkResources(raw as Record<string, unknown>, problems);
      throw new InvalidDesiredState(source, dedupe(problems));
    }
  }
  const doc = top.data;
  if (expectedNode !== undefined && doc.node !== expectedNode) {
    problems.push({
      field: 'node',
      problem: `names "${doc.node}" but the file is for node "${expectedNode}"`,
      fix: `write node: ${expectedNode}, or rename the file to ${doc.node}.yaml`,
    });
  }
  const resources = checkResources(doc.resources, problems);
  if (problems.length > 0) throw new InvalidDesiredState(source, dedupe(problems));
  return { node: doc.node, generation: doc.generation, resources, policy: normalizePolicy(doc.policy) };
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

function checkResources(raw: Record<string, unknown>, problems: Problem[]): Record<string, ResourceSpec> {
  const out: Record<string, ResourceSpec> = {};
  for (const [key, value] of Object.entries(raw)) {
    const keyCheck = resourceKey.safeParse(key);
    if (!keyCheck.success) problems.push(...problemsFromZod(keyCheck.error, ['resources', key]));
    const type = value && typeof value === 'object' ? (value as { type?: unknown }).type : undefined;
    if (typeof type !== 'string' || !(RESOURCE_TYPES as readonly string[]).includes(type)) {
      problems.push({
        field: `resources.${key}.type`,
        problem: type === undefined ? 'is missing' : `unknown resource type ${JSON.stringify(type)}`,
        fix: `use one of ${RESOURCE_TYPES.join(', ')}`,
      });
      continue;
    }
    const parsed = resourceSpec.safeParse(value, { reportInput: true });
    if (!parsed.success) problems.push(...problemsFromZod(parsed.error, ['resources', key]));
    else out[key] = parsed.data;
  }
  problems.push(...sharedTargetProblems(out));
  for (const [key, r] of Object.entries(out)) {
    if (r.type === 'service') {
      // A reference to a resource that failed validation already has its own problem above.
      const rawType = (k: string) => (raw[k] && typeof raw[k] === 'object' ? (raw[k] as { type?: unknown }).type : undefined);
      if (rawType(r.release) !== 'release') {
        problems.push({
          field: `resources.${key}.release`,
          problem: `"${r.release}" is not a release resource of this node`,
          fix: 'name the key of a resource with type: release',
        });
      }
      if (rawType(r.config) !== 'file') {
        problems.push({
          field: `resources.${key}.config`,
          problem: `"${r.config}" is not a file resource of this node`,
          fix: 'name the key of a resource with type: file',
        });
      }
    }
  }
  return out;
}

/**
 * Two resources may not claim one target (docs/architecture.md §4 "Targets and operator
 * decisions"): two files at one path, or two releases, which would both switch the one current.
 */
function sharedTargetProblems(resources: Record<string, ResourceSpec>): Problem[] {
  return sharedTargets(resources).map(({ target, keys }) => ({
    field: `resources.${keys[keys.length - 1] ?? ''}`,
    problem: `${keys.map((k) => `resources.${k}`).join(' and ')} claim the same target ${target}, and one target has one owner`,
    fix:
      target === RELEASE_TARGET
        ? 'keep one release resource per node: every release switches the one current link'
        : 'give each resource its own target (another path), or remove all but one of them',
  }));
}

function dedupe(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const id = `${p.field}\u0000${p.problem}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
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
