import { canonicalJson, type Json } from './canonical';
import { desiredDigest } from './desired';
import { idempotencyKey } from './plan';
import { kindOf, typeOfAction } from './resources';
import { specDigest } from './targets';
import type { Assessment } from './assessment';
import type { BoundIntent, DesiredState, ResourceSpec } from '../contract/desired';
import type { AuthorizedAction } from '../contract/ledger';

/*
 * Whether an action is one a desired-state document's own plan yields (docs/security.md, "Trust
 * anchors"): the node's agent derives it from the signed document with the same table the
 * controller plans with (src/domain/resources), so an apply that passes carries out nothing the
 * document's signer did not write: the same target, value, artifact sha256 and command. Pure: the
 * agent parses and verifies the document; this compares.
 */

/** Why `action` is not one `document`'s plan yields on `node`, or null when it is. */
export function notPlanned(document: DesiredState, node: string, action: AuthorizedAction): string | null {
  const digest = desiredDigest(document.resources, document.policy);
  const key = action.resource_key;
  // What the action says it is bound to: this node, this generation, this content, its own key.
  const bound: [boolean, string][] = [
    [document.node === node, `the document is for node "${document.node}", not this node "${node}"`],
    [
      document.generation === action.desired_generation,
      `the document is generation ${document.generation}, and the action claims generation ${action.desired_generation}`,
    ],
    [digest === action.desired_digest, `the document's digest is ${digest}, and the action claims ${action.desired_digest}`],
    [
      idempotencyKey(node, key, document.generation, digest) === action.idempotency_key,
      'its idempotency_key is not the one of this node, resource, generation and digest',
    ],
    [
      (action.observation_ttl ?? null) === null || action.observation_ttl === document.policy.observation_ttl,
      `its observation_ttl ${action.observation_ttl} is not the document's ${document.policy.observation_ttl}`,
    ],
  ];
  const broken = bound.find(([holds]) => !holds);
  if (broken) return broken[1];
  const spec = Object.hasOwn(document.resources, key) ? document.resources[key] : undefined;
  if (spec === undefined) return `the document declares no resource "${key}"`;
  const kind = kindOf(spec);
  if (typeOfAction(action.action) !== spec.type || !kind.actions.includes(action.action as never))
    return `"${key}" is a ${spec.type} resource, whose plans are ${kind.actions.join(' or ')}, not ${action.action}`;
  if ((action.spec_digest ?? null) !== null && action.spec_digest !== specDigest(spec))
    return `its spec_digest is not the digest of "${key}" as the document declares it`;
  if (!planYields(document, digest, key, spec, action)) {
    return `its ${action.action} spec is not what the document's plan for "${key}" writes (target, value, artifact sha256 or command differ)`;
  }
  return null;
}

/**
 * Whether the document's plan for `key` yields exactly this action and spec. A plan depends on
 * what was observed only to choose between a type's actions (a file's content or only its mode; a
 * service's start or restart), so it is asked for both: nothing there, and what the action's own
 * write would leave. Every field the agent acts on is compared; a kind's `unsigned` fields (where
 * an artifact is fetched, bound by its sha256; what a probe expects, which depends on what an
 * operator owns) are not the signer's to fix.
 */
function planYields(document: DesiredState, digest: string, key: string, spec: ResourceSpec, action: AuthorizedAction): boolean {
  const kind = kindOf(spec);
  const intent: BoundIntent = {
    ...document,
    digest,
    provenance: { source: 'signed document', revision: digest, author: null, loaded_at: '' },
  };
  const written = action.spec;
  if (written === null || typeof written !== 'object' || Array.isArray(written)) return false;
  const after = kind.valueAfter(action.action, written);
  const desired = kind.desiredValue(key, spec, document.resources);
  const seen = [null, after === undefined ? null : after];
  const bound = (s: Json) => withoutFields(s, kind.unsigned ?? []);
  return seen.some((value) => {
    const a: Assessment = {
      resource_key: key,
      type: spec.type,
      ownership: 'MANAGED',
      ownership_provenance: null,
      ownership_reason: '',
      spec,
      desired,
      observed: value === null ? null : { type: spec.type, value, marker: null, detail: {}, obstruction: null },
      drift: true,
      effective_mode: 'enforce',
    };
    const plan = kind.plan(a, spec, intent);
    return plan.action === action.action && canonicalJson(bound(plan.spec)) === canonicalJson(bound(written));
  });
}

function withoutFields(spec: Json, fields: readonly string[]): Json {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return spec;
  return Object.fromEntries(Object.entries(spec).filter(([field]) => !fields.includes(field)));
}
