import { canonicalJson, sha256Hex } from './canonical';
import { withheldBecause } from './causes';
import type { Assessment } from './classify';
import { kindOf } from './resources';
import { specDigest } from './targets';
import type { BoundIntent, ResourceSpec } from '../contract/desired';
import type { PlannedAction } from '../contract/ledger';

/** idempotency_key = sha256 of (node, resource_key, desired_generation, desired_digest). */
export function idempotencyKey(node: string, resourceKey: string, generation: number, digest: string): string {
  return sha256Hex(canonicalJson([node, resourceKey, generation, digest]));
}

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
  // Each type's order (src/domain/resources): releases first, then what services read, then the services.
  drifted.sort((x, y) => kindOf(x.spec).order - kindOf(y.spec).order || x.a.resource_key.localeCompare(y.a.resource_key));
  return drifted.map(({ a, spec }) => {
    const obstruction = a.observed?.obstruction ?? null;
    const planned = kindOf(spec).plan(a, spec, intent);
    const action: PlannedAction = {
      resource_key: a.resource_key,
      action: planned.action,
      desired_generation: intent.generation,
      desired_digest: intent.digest,
      idempotency_key: idempotencyKey(intent.node, a.resource_key, intent.generation, intent.digest),
      observed_marker: a.observed?.marker ?? null,
      action_seq: actionSeq,
      spec: planned.spec,
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

/** The resources whose values a resource's correctness depends on (a service's release and config). */
export function dependenciesOf(spec: ResourceSpec): string[] {
  return kindOf(spec).dependencies(spec);
}
