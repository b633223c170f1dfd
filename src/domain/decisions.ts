import { specDigest, targetOf } from './targets';
import type { RecordDecisionRequest } from '../contract/agent';
import type { BoundIntent } from '../contract/desired';
import type { History } from '../contract/history';
import type { NewIntent } from '../contract/ledger';
import type { Observation, OperatorDecision, WriterEvidence } from '../contract/observation';

/*
 * Operator decisions that outlive a generation (docs/architecture.md §4 "Targets and operator
 * decisions"). A yield and an open conflict are about a target with a given spec. The agent keeps
 * them per target; each pass carries the ones whose spec is unchanged into the loop's history and
 * lists what the agent must be told, so its record follows the history by level.
 */

export interface SeededHistory {
  history: History;
  /** Decisions the agent reported that this pass carried into the history. */
  carried: OperatorDecision[];
  /** Decisions about a spec that has changed since: new intent, not carried. */
  new_intent: NewIntent[];
}

/**
 * Carries the agent's decisions for the current keys into the history: a yield into `yielded`,
 * a conflict into `conflicts` (unresolved), when the key's spec has the digest the decision was
 * about. The loop's own record wins (it knows later resolutions), and an operator's retake after
 * the decision ends it.
 */
export function seedDecisions(intent: BoundIntent, observation: Observation | null, history: History): SeededHistory {
  const out: SeededHistory = { history, carried: [], new_intent: [] };
  if (!observation) return out;
  let { conflicts, yielded } = history;
  const reported = { ...storedByKey(intent, history.stored_decisions ?? []), ...reportedDecisions(observation) };
  for (const key of Object.keys(reported).sort()) {
    const held = reported[key];
    const spec = intent.resources[key];
    if (!held || !spec) continue;
    const now = specDigest(spec);
    if (held.spec_digest !== now) {
      out.new_intent.push({ ...held, spec_digest_now: now });
      continue;
    }
    const retaken = history.retaken?.[key];
    if (conflicts[key] || yielded[key] || (retaken && Date.parse(retaken.at) >= Date.parse(held.at))) continue;
    if (held.kind === 'yield') yielded = { ...yielded, [key]: { by: held.by, note: held.note, at: held.at } };
    else conflicts = { ...conflicts, [key]: { since: held.at, sequence: held.sequence, resolution: null } };
    out.carried.push(held);
  }
  out.history = { ...history, conflicts, yielded };
  delete out.history.stored_decisions;
  return out;
}

/** The ledger store's decisions under the keys that claim their targets now (a renamed key included). */
function storedByKey(intent: BoundIntent, stored: OperatorDecision[]): Record<string, OperatorDecision> {
  const out: Record<string, OperatorDecision> = {};
  for (const [key, spec] of Object.entries(intent.resources)) {
    const d = stored.find((s) => s.target === targetOf(key, spec));
    if (d) out[key] = d;
  }
  return out;
}

/**
 * The decisions an observation reports. Activity results reach the workflow unparsed, and
 * snapshots recorded before agents reported decisions have none.
 */
function reportedDecisions(observation: Observation): Observation['decisions'] {
  const { decisions }: { decisions?: Observation['decisions'] } = observation;
  return decisions ?? {};
}

/** The decisions the history holds for the current keys: what the agent and the ledger must keep. */
export function heldDecisions(intent: BoundIntent, history: History): OperatorDecision[] {
  const out: OperatorDecision[] = [];
  for (const key of Object.keys(intent.resources).sort()) {
    const d = wantedDecision(intent, history, key);
    if (d && d.kind !== 'retake') {
      const { node: _node, ...rest } = d;
      out.push(rest as OperatorDecision);
    }
  }
  return out;
}

/**
 * What the agent must be told after a pass: every decision the history holds that the agent did
 * not report for the same spec, and a retake the agent has not seen yet. Never a retake the
 * operator did not send: only resolveConflict ends a decision.
 */
export function decisionsToRecord(
  intent: BoundIntent,
  observation: Observation | null,
  history: History,
): RecordDecisionRequest[] {
  if (!observation) return [];
  const out: RecordDecisionRequest[] = [];
  for (const key of Object.keys(intent.resources).sort()) {
    const wanted = wantedDecision(intent, history, key);
    if (!wanted) continue;
    const held = reportedDecisions(observation)[key];
    const heldNow = held && held.spec_digest === wanted.spec_digest ? held : null;
    const missing =
      wanted.kind === 'retake'
        ? heldNow !== null && Date.parse(wanted.at) >= Date.parse(heldNow.at)
        : heldNow === null || heldNow.kind !== wanted.kind;
    if (missing) out.push(wanted);
  }
  return out;
}

function wantedDecision(intent: BoundIntent, history: History, key: string): RecordDecisionRequest | null {
  const conflict = history.conflicts[key];
  const yielded = history.yielded[key];
  const retaken = history.retaken?.[key];
  if (conflict && conflict.resolution === null)
    return decisionRequest(intent, key, { kind: 'conflict', by: 'datum', at: conflict.since, note: null }, conflict.sequence);
  if (yielded) return decisionRequest(intent, key, { kind: 'yield', ...yielded });
  if (retaken) return decisionRequest(intent, key, { kind: 'retake', ...retaken });
  return null;
}

/** The request that records `what` about a key of this intent, with its target and spec digest. */
export function decisionRequest(
  intent: BoundIntent,
  key: string,
  what: { kind: RecordDecisionRequest['kind']; by: string; at: string; note: string | null },
  sequence: WriterEvidence[] = [],
): RecordDecisionRequest | null {
  const spec = intent.resources[key];
  if (!spec) return null;
  return {
    node: intent.node,
    resource_key: key,
    target: targetOf(key, spec),
    kind: what.kind,
    spec_digest: specDigest(spec),
    generation: intent.generation,
    by: what.by,
    at: what.at,
    note: what.note,
    sequence,
  };
}

/** One sentence for the ledger about decisions a changed spec ended. */
export function newIntentSentence(ended: NewIntent[]): string {
  if (ended.length === 0) return '';
  const each = ended.map(
    (d) =>
      `the ${d.kind} on ${d.target} ("${d.resource_key}", by ${d.by} at ${d.at}) was about another spec of "${d.resource_key}"`,
  );
  return ` New intent: ${each.join('; ')}; the spec changed, so this is a new episode and the ${ended.length > 1 ? 'decisions are' : 'decision is'} not carried.`;
}
