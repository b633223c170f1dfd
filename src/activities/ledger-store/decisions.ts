import {
  NOTE_REASONS,
  canonicalJson,
  sameIntent,
  targetOfAction,
  valueDigestOfAction,
  type IntentDigests,
  type LedgerEntry,
  type OperatorDecision,
} from '../../domain';
import { operatorDecision, problemsFromZod } from '../../schemas';
import { InvalidLedgerEntry } from './common';

/*
 * The ledger store's copy of the agent's operator decisions (docs/architecture.md §4 "Targets and
 * operator decisions"), one record per node, kept by the rules the agent keeps its own
 * (.datum/decisions.json, src/agent/node/claims.ts):
 *
 *   - a yield or a conflict is set when the loop holds it (operator_decisions of an entry) or the
 *     operator yields (operator_resolution); a conflict never replaces a yield for the same value
 *     (written.ts: by value where both records know it, else by spec);
 *   - it ends only by a retake (operator_resolution) or by Datum's own accepted write of another
 *     value to its target (an `applied` execution evidence). A later entry that does not hold it
 *     (a changed spec, a moved target, a pass without a snapshot) does not end it: the agent keeps
 *     it too, and after a revert both copies must give the same answer;
 *   - an entry from a generation below the newest the store has seen for the node changes
 *     nothing (fenced per node, as the agent fences an old loop's requests).
 *
 * Why a record kept beside the entries, in the append's own transaction, and not a query over
 * them at read time: the fence is about the order the store saw entries in, which no column of
 * an entry says (an old loop's pass decided after a hand-over is appended after the new loop's
 * entries, and decided_at would put it last); the fold runs once per entry instead of over a
 * node's whole history at every chain start; and a store written by an older release is
 * migrated once (legacyRecord) instead of being read by two sets of rules forever.
 */

/** A node's copy: the decision per target, and the newest generation seen (the fence). */
export interface DecisionRecord {
  generation: number | null;
  targets: Record<string, OperatorDecision>;
}

export const EMPTY_RECORD: DecisionRecord = { generation: null, targets: {} };

/** The record after `entry`, or null when the entry changes nothing (then nothing is written). */
export function foldEntry(record: DecisionRecord, entry: LedgerEntry): DecisionRecord | null {
  if (record.generation !== null && entry.desired_generation < record.generation) return null;
  const targets = { ...record.targets };
  // 1. Datum's own accepted writes, in the pass, before the loop tells the agent what it holds.
  for (const { target, written } of appliedWrites(entry)) {
    const held = targets[target];
    if (held && written && !sameIntent(held, written)) delete targets[target];
  }
  // 2. The operator's word: a retake ends the target's decision whatever its spec.
  const resolution = entry.operator_resolution;
  if (resolution?.kind === 'retake') delete targets[resolution.target];
  else if (resolution) keep(targets, { ...resolution, kind: 'yield' });
  // 3. What the loop holds, as the agent is told it when it lacks it (decisionsToRecord).
  for (const d of entry.operator_decisions ?? []) {
    const held = targets[d.target];
    const gainsValue = !held?.value_digest && d.value_digest !== null;
    if (!(held && held.kind === d.kind && sameIntent(held, d)) || gainsValue) keep(targets, d);
  }
  const next: DecisionRecord = { generation: entry.desired_generation, targets };
  return canonicalJson(next) === canonicalJson(record) ? null : next;
}

/**
 * The record after a newly appended entry, for the append's transaction to save (null: leave it).
 * A stored record that does not read (another tool wrote it) is left as it is, and the entry is
 * still appended: the ledger must not stop recording decisions for it. Reading it says what is wrong.
 */
export function foldInto(
  p: { entry: LedgerEntry; node_id: string },
  stored: () => DecisionRecord,
  location: string,
): DecisionRecord | null {
  let record: DecisionRecord;
  try {
    record = stored();
  } catch (error) {
    if (!(error instanceof InvalidLedgerEntry)) throw error;
    console.warn(
      `ledger: the operator decisions kept for node ${p.node_id} in ${location} do not read, so entry seq ${p.entry.seq} of ${p.entry.workflow_id} ` +
        `is recorded without updating them (${error.message}); fix: delete that node's row of node_operator_decisions to start its copy afresh`,
    );
    return null;
  }
  return foldEntry(record, p.entry);
}

/** recordDecisionAt's rule: the operator's yield outranks Datum's finding of a conflict about the same spec. */
function keep(targets: Record<string, OperatorDecision>, d: OperatorDecision): void {
  const prior = targets[d.target];
  if (d.kind === 'conflict' && prior?.kind === 'yield' && sameIntent(prior, d)) return;
  targets[d.target] = d;
}

/** The targets the entry's accepted applies wrote, with the spec and value each carried out. */
function appliedWrites(entry: LedgerEntry): { target: string; written: IntentDigests | null }[] {
  const out: { target: string; written: IntentDigests | null }[] = [];
  for (const ev of entry.execution_evidence) {
    if (ev.outcome !== 'applied') continue;
    const action = entry.authorized_actions.find(
      (a) => a.idempotency_key === ev.idempotency_key && a.action === ev.action && a.resource_key === ev.resource_key,
    );
    const target = action ? targetOfAction(action.action, action.resource_key, action.spec) : null;
    if (!action || target === null) continue;
    const written = action.spec_digest
      ? { spec_digest: action.spec_digest, value_digest: valueDigestOfAction(action.action, action.spec) }
      : null;
    out.push({ target, written });
  }
  return out;
}

/**
 * The SQL both back ends run once, when they migrate a store written by an older release: per
 * node, its newest entry recorded by a pass (the copy that release answered with; notes record a
 * signal, not a pass, and that release kept no decisions on them) and its newest generation.
 */
export const LEGACY_SQL = `SELECT g.node_id AS node_id, g.generation AS generation, p.entry AS entry
     FROM (SELECT node_id, MAX(desired_generation) AS generation FROM ledger_entries GROUP BY node_id) g
     LEFT JOIN (SELECT node_id, entry,
                       ROW_NUMBER() OVER (PARTITION BY node_id ORDER BY decided_at DESC, seq DESC, id DESC) AS rn
                  FROM ledger_entries
                 WHERE reason NOT IN (${NOTE_REASONS.map((r) => `'${r}'`).join(', ')})) p
       ON p.node_id = g.node_id AND p.rn = 1
    ORDER BY g.node_id`;

/**
 * What a store written by an older release answered for a node (the operator decisions of its
 * newest pass entry), as the record the new rules start from: nothing it held is lost by the
 * upgrade. A decision in it that does not parse is left out: only another tool writes those.
 */
export function legacyRecord(newestPassEntry: unknown, generation: number): DecisionRecord {
  const held = (newestPassEntry as { operator_decisions?: unknown } | null)?.operator_decisions;
  const targets: Record<string, OperatorDecision> = {};
  for (const d of Array.isArray(held) ? held : []) {
    const parsed = operatorDecision.safeParse(d);
    if (parsed.success) targets[parsed.data.target] = parsed.data;
  }
  return { generation, targets };
}

/** A stored record as the store answers it, checked again like a stored entry. */
export function readRecord(node: string, stored: unknown, generation: unknown): DecisionRecord {
  const targets: Record<string, OperatorDecision> = {};
  for (const [target, d] of Object.entries((stored ?? {}) as Record<string, unknown>)) {
    const parsed = operatorDecision.safeParse(d);
    if (!parsed.success)
      throw new InvalidLedgerEntry(
        `stored operator decision of node ${node} on ${target}`,
        problemsFromZod(parsed.error),
        'in the ledger but not a valid decision (written by another tool or a newer Datum?)',
      );
    targets[target] = parsed.data;
  }
  return { generation: generation === null || generation === undefined ? null : Number(generation), targets };
}

/** The record's decisions, by target: what storedDecisions gives a new run chain. */
export function decisionsOf(record: DecisionRecord): OperatorDecision[] {
  return Object.keys(record.targets)
    .sort()
    .flatMap((t) => (record.targets[t] ? [record.targets[t]] : []));
}
