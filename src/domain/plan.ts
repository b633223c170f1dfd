import { canonicalJson, sha256Hex, type Json } from './canonical';
import { artifactLocation, fileBytes } from './desired';
import { withheldBecause } from './causes';
import type { Assessment } from './classify';
import { specDigest } from './targets';
import type { BoundIntent, ResourceSpec } from '../contract/desired';
import type { PlannedAction } from '../contract/ledger';
import type { ActionKind } from '../contract/vocabulary';

/** idempotency_key = sha256 of (node, resource_key, desired_generation, desired_digest). */
export function idempotencyKey(node: string, resourceKey: string, generation: number, digest: string): string {
  return sha256Hex(canonicalJson([node, resourceKey, generation, digest]));
}

// Releases first, then the files and flags a service reads, then the services that load them.
const ORDER: Record<ResourceSpec['type'], number> = { release: 0, file: 1, flag: 2, service: 3 };

/** A planned action with the assessment it was planned from (what authorize() judges it by). */
export interface PlanItem {
  action: PlannedAction;
  assessment: Assessment;
}

/**
 * The ordered plan for every MANAGED resource that drifted. Observe and enforce build the same
 * plan (seed 001: the preview must be exactly what enforcement would do); only authorization
 * differs, and decide() sets it. OPERATOR_OWNED and UNKNOWN resources are never planned.
 * `observedAt` is when the snapshot the assessments come from was taken: every action carries it
 * with the policy's observation_ttl, so the agent can refuse a write once that snapshot is stale.
 */
export function planItems(
  intent: BoundIntent,
  assessments: Assessment[],
  actionSeq: number,
  observedAt: string | null = null,
): PlanItem[] {
  const drifted = assessments.flatMap((a) => (a.ownership === 'MANAGED' && a.drift && a.spec ? [{ a, spec: a.spec }] : []));
  drifted.sort((x, y) => ORDER[x.spec.type] - ORDER[y.spec.type] || x.a.resource_key.localeCompare(y.a.resource_key));
  return drifted.map(({ a, spec }) => {
    const obstruction = a.observed?.obstruction ?? null;
    const action: PlannedAction = {
      resource_key: a.resource_key,
      action: actionFor(spec, a),
      desired_generation: intent.generation,
      desired_digest: intent.digest,
      idempotency_key: idempotencyKey(intent.node, a.resource_key, intent.generation, intent.digest),
      observed_marker: a.observed?.marker ?? null,
      action_seq: actionSeq,
      spec: actionSpec(a, spec, intent),
      observed_at: observedAt,
      observation_ttl: intent.policy.observation_ttl,
      spec_digest: specDigest(spec),
      destructive: obstruction !== null,
      authorized: false,
      withheld_because: obstruction === null ? null : withheldBecause({ kind: 'destructive', obstruction }),
    };
    return { action, assessment: a };
  });
}

function actionFor(spec: ResourceSpec, a: Assessment): ActionKind {
  switch (spec.type) {
    case 'release':
      return 'release.install';
    case 'file':
      return 'file.write';
    case 'flag':
      return 'flag.write';
    case 'service':
      return a.observed?.value == null ? 'service.start' : 'service.restart';
  }
}

/** Everything the agent needs to carry out the action, and nothing it must look up elsewhere. */
function actionSpec(a: Assessment, spec: ResourceSpec, intent: BoundIntent): Json {
  const all = intent.resources;
  switch (spec.type) {
    case 'release':
      return { version: spec.version, artifact: artifactLocation(intent, a.resource_key, spec), sha256: spec.sha256 };
    case 'file': {
      const content = fileBytes(spec.content);
      return { path: spec.path, content, sha256: sha256Hex(content) };
    }
    case 'flag':
      return { name: a.resource_key, value: spec.value };
    case 'service': {
      // What the restarted process must report on its health endpoint (see classify).
      const expect = a.desired as { build: Json; config_sha256: Json };
      const config = all[spec.config];
      return {
        command: spec.command,
        build: expect.build,
        config_path: config?.type === 'file' ? config.path : null,
        config_sha256: expect.config_sha256,
      };
    }
  }
}

/** The resources a service's correctness depends on. */
export function dependenciesOf(spec: ResourceSpec): string[] {
  return spec.type === 'service' ? [spec.release, spec.config] : [];
}
