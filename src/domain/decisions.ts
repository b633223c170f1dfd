import { specDigest, targetOf } from './targets';
import { sameIntent, valueDigest } from './written';
import type { RecordDecisionRequest } from '../contract/agent';
import type { BoundIntent } from '../contract/desired';
import type { History, RevaluedYield } from '../contract/history';
import type { NewIntent } from '../contract/ledger';
import type { Observation, OperatorDecision, WriterEvidence } from '../contract/observation';
import { DECISION_RULE, type DecisionRule } from '../contract/patches';

/*
 * Operator decisions that outlive a generation (docs/architecture.md §4 "Targets and operator
 * decisions"). A yield and an open conflict are about a target and the value Datum would write
 * there (written.ts), not how the spec spells it. The agent keeps them per target; each pass
 * carries the ones whose value is unchanged into the loop's history and lists what the agent must
 * be told, so its record follows the history by level. A yield whose value changed stands until
 * an operator decides (revalued); a conflict whose value changed is new intent.
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
 * a conflict into `conflicts` (unresolved), when the key would write the value the decision was
 * about. The loop's own record wins (it knows later resolutions), and an operator's retake after
 * the decision ends it. A yield about another value stands as `revalued` (under the rule
 * yield-outlives-new-value; before it, a changed spec ended it as new intent).
 */
export function seedDecisions(
  intent: BoundIntent,
  observation: Observation | null,
  history: History,
  rules: (rule: DecisionRule) => boolean = () => true,
): SeededHistory {
  const out: SeededHistory = { history, carried: [], new_intent: [] };
  if (!observation) return out;
  let { conflicts, yielded } = history;
  const revalued = { ...history.revalued };
  const reported = { ...storedByKey(intent, history.stored_decisions ?? []), ...reportedDecisions(observation) };
  for (const key of Object.keys(reported).sort()) {
    const held = reported[key];
    const spec = intent.resources[key];
    if (!held || !spec) continue;
    const now = { spec_digest: specDigest(spec), value_digest: valueDigest(key, intent.resources) };
    const retaken = history.retaken?.[key];
    const retakenSince = retaken !== undefined && Date.parse(retaken.at) >= Date.parse(held.at);
    if (!sameIntent(held, now)) {
      const changed = { ...held, spec_digest_now: now.spec_digest, value_digest_now: now.value_digest };
      if (standsForNewValue(held, Boolean(yielded[key] || retakenSince), key in revalued, rules)) revalued[key] = changed;
      else if (!revalued[key]) out.new_intent.push(changed);
      continue;
    }
    // Desired state writes the yielded value again: the yield is an ordinary one once more.
    delete revalued[key];
    if (conflicts[key] || yielded[key] || retakenSince) continue;
    if (held.kind === 'yield') yielded = { ...yielded, [key]: { by: held.by, note: held.note, at: held.at } };
    else conflicts = { ...conflicts, [key]: { since: held.at, sequence: held.sequence, resolution: null } };
    out.carried.push(held);
  }
  out.history = { ...history, conflicts, yielded };
  if (Object.keys(revalued).length > 0 || history.revalued) out.history.revalued = revalued;
  delete out.history.stored_decisions;
  return out;
}

/** Whether a held decision about another value stands (a yield nobody has decided on since), rather than being new intent. */
function standsForNewValue(
  held: OperatorDecision,
  decided: boolean,
  pending: boolean,
  rules: (rule: DecisionRule) => boolean,
): boolean {
  return held.kind === 'yield' && !decided && (pending || rules(DECISION_RULE.yieldOutlivesNewValue));
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
 * Whether the agent's record lacks what the loop wants it to hold: a retake of a decision it still
 * holds, a decision it does not hold for the same value, or (under decisions-carry-value) one it holds
 * from before values were kept, which is sent again so it gains the value's digest.
 */
function lacks(
  wanted: RecordDecisionRequest,
  held: OperatorDecision | undefined,
  rules: (rule: DecisionRule) => boolean,
): boolean {
  const heldNow = held && sameIntent(held, wanted) ? held : null;
  if (wanted.kind === 'retake') {
    if (!held || Date.parse(wanted.at) < Date.parse(held.at)) return false;
    // A yield for another value is not ended by a write (the agent refuses them all): only this retake ends it.
    return heldNow !== null || (held.kind === 'yield' && rules(DECISION_RULE.yieldOutlivesNewValue));
  }
  if (heldNow === null || heldNow.kind !== wanted.kind) return true;
  return !heldNow.value_digest && wanted.value_digest !== null && rules(DECISION_RULE.decisionsCarryValue);
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
  rules: (rule: DecisionRule) => boolean = () => true,
): RecordDecisionRequest[] {
  if (!observation) return [];
  const out: RecordDecisionRequest[] = [];
  for (const key of Object.keys(intent.resources).sort()) {
    const wanted = wantedDecision(intent, history, key);
    if (wanted && lacks(wanted, reportedDecisions(observation)[key], rules)) out.push(wanted);
  }
  return out;
}

function wantedDecision(intent: BoundIntent, history: History, key: string): RecordDecisionRequest | null {
  const conflict = history.conflicts[key];
  const yielded = history.yielded[key];
  const retaken = history.retaken?.[key];
  const revalued = history.revalued?.[key];
  // The yield as it was given, for the value it was given for: the agent keeps refusing the new one.
  if (revalued && !yielded) return keptAsGiven(intent, key, revalued);
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
    value_digest: valueDigest(key, intent.resources),
    generation: intent.generation,
    by: what.by,
    at: what.at,
    note: what.note,
    sequence,
  };
}

/** A revalued yield as the agent must keep holding it; fenced by this loop's generation. */
function keptAsGiven(intent: BoundIntent, key: string, d: RevaluedYield): RecordDecisionRequest {
  return {
    node: intent.node,
    resource_key: key,
    target: d.target,
    kind: 'yield',
    spec_digest: d.spec_digest,
    value_digest: d.value_digest,
    generation: intent.generation,
    by: d.by,
    at: d.at,
    note: d.note,
    sequence: d.sequence,
  };
}

/** One sentence for the ledger about decisions a changed value ended. */
export function newIntentSentence(ended: NewIntent[]): string {
  if (ended.length === 0) return '';
  const each = ended.map(
    (d) =>
      `the ${d.kind} on ${d.target} ("${d.resource_key}", by ${d.by} at ${d.at}) was about another value of "${d.resource_key}"`,
  );
  return ` New intent: ${each.join('; ')}; what Datum writes changed, so this is a new episode and the ${ended.length > 1 ? 'decisions are' : 'decision is'} not carried.`;
}
