import { utf8ToBytes } from '@noble/hashes/utils';
import { sha256Hex, type Json } from './canonical';
import type { BoundIntent } from '../contract/desired';
import type { Decision } from '../contract/ledger';

/*
 * What the ledger keeps of a file's content (and of a unit file Datum writes): its digest and size, never the bytes. The ledger
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

/** Text as the ledger keeps it: its digest and size. */
const digestOf = (content: Json | undefined): Json => {
  const text = typeof content === 'string' ? content : '';
  return { sha256: sha256Hex(text), bytes: utf8ToBytes(text).length };
};

/**
 * A file write's spec with its content replaced by its size (its sha256 is already there), and
 * `sensitive: true` when desired state marks the file so; a unit.apply's unit file or drop-in the
 * same way (an Environment= line may hold a secret); any other action's spec unchanged.
 */
export function redactAction<T extends ActionLike>(action: T, sensitive: ReadonlySet<string>): T {
  const spec = action.spec;
  if (!spec || typeof spec !== 'object' || Array.isArray(spec)) return action;
  if (action.action === 'unit.apply') {
    const file = spec.file;
    if (!file || typeof file !== 'object' || Array.isArray(file)) return action;
    return { ...action, spec: { ...spec, file: { ...file, content: digestOf(file.content) } } };
  }
  if (action.action !== 'file.write') return action;
  const kept: Record<string, Json> = { ...spec, content: digestOf(spec.content) };
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
