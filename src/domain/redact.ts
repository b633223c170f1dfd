import { utf8ToBytes } from '@noble/hashes/utils';
import { sha256Hex, type Json } from './canonical';
import type { BoundIntent } from '../contract/desired';
import type { Decision } from '../contract/ledger';

/*
 * What the ledger keeps of a file's content: its digest and size, never the bytes. The ledger
 * store, the `ledger` and `state` queries and every CLI command read entries through this, so a
 * config file's content (a password in it, say) is not copied into every entry. A resource
 * marked `sensitive: true` is flagged as such, so a reader knows why there is nothing to read.
 * The content still reaches the node in the apply's input, which is workflow history: that is
 * Temporal's store, protected by the payload codec, not by the ledger.
 */

/** The part of a planned or authorized action the ledger keeps. */
interface ActionLike {
  resource_key: string;
  action: string;
  spec: Json;
}

/**
 * A file write's spec with its content replaced by its size (its sha256 is already there), and
 * `sensitive: true` when desired state marks the file so; any other action's spec unchanged.
 */
export function redactAction<T extends ActionLike>(action: T, sensitive: ReadonlySet<string>): T {
  const spec = action.spec;
  if (action.action !== 'file.write' || !spec || typeof spec !== 'object' || Array.isArray(spec)) return action;
  const content = typeof spec.content === 'string' ? spec.content : '';
  const kept: Record<string, Json> = { ...spec, content: { sha256: sha256Hex(content), bytes: utf8ToBytes(content).length } };
  if (sensitive.has(action.resource_key)) kept.sensitive = true;
  return { ...action, spec: kept };
}

/** The keys whose file content desired state marks sensitive. */
export function sensitiveKeys(intent: Pick<BoundIntent, 'resources'>): Set<string> {
  return new Set(
    Object.entries(intent.resources).flatMap(([key, spec]) => (spec.type === 'file' && spec.sensitive === true ? [key] : [])),
  );
}

/** The decision as the ledger records it: planned and authorized actions without file contents. */
export function ledgerView(decision: Decision, intent: Pick<BoundIntent, 'resources'>): Decision {
  const sensitive = sensitiveKeys(intent);
  return {
    ...decision,
    planned_actions: decision.planned_actions.map((p) => redactAction(p, sensitive)),
    authorized_actions: decision.authorized_actions.map((a) => redactAction(a, sensitive)),
  };
}
