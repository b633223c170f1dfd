/*
 * What the Web UI and `temporal workflow list` show of a reconcile loop: its search attributes,
 * its memo and its current details. Written only when a value changed: status churn is a defect
 * (STYLE.md), and every upsert is a history event.
 */
import { setCurrentDetails, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { SearchAttributePair, SearchAttributeUpdatePair, TypedSearchAttributes } from '@temporalio/common';
import type { BoundIntent, Decision } from '../domain';
import {
  DATUM_SEARCH_ATTRIBUTES,
  DatumConditions,
  DatumDigest,
  DatumGeneration,
  DatumMode,
  DatumNode,
  DatumStatus,
  MEMO_LAST_VERIFIED,
  MEMO_REASON,
  MEMO_SINCE,
  MEMO_SUMMARY,
  MEMO_VERIFIED_EVERY_MS,
  WORKFLOW_PATCH,
} from '../contract';
import { inForce } from './patches';

/** The values last written, by attribute name (JSON), seeded from what the run started with. */
export interface AttributeWriter {
  written: Map<string, string>;
  /** The memo's last_verified_at and since as last written (or as the run started with). */
  verifiedAt: string | null;
  since: string | null;
}

export function openAttributes(): AttributeWriter {
  const info = workflowInfo();
  const current: TypedSearchAttributes = info.typedSearchAttributes;
  const written = new Map<string, string>();
  for (const key of DATUM_SEARCH_ATTRIBUTES) {
    const value = current.get(key);
    if (value !== undefined) written.set(key.name, JSON.stringify(value));
  }
  const memo = info.memo ?? {};
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return { written, verifiedAt: text(memo[MEMO_LAST_VERIFIED]), since: text(memo[MEMO_SINCE]) };
}

/** The memo `datum nodes` reads (reason, last_verified_at, since), next to the summary. */

function nodeView(w: AttributeWriter, decision: Decision, verifiedAt: string | null): Record<string, string> {
  if (!inForce(WORKFLOW_PATCH.memoNodeView)) return {};
  w.since ??= workflowInfo().runStartTime.toISOString();
  w.verifiedAt = verifiedAt;
  return {
    [MEMO_REASON]: decision.reason,
    [MEMO_SINCE]: w.since,
    ...(verifiedAt ? { [MEMO_LAST_VERIFIED]: verifiedAt } : {}),
  };
}

/**
 * A steady pass records nothing, but it did verify the node: the memo's last_verified_at moves
 * too, at most every MEMO_VERIFIED_EVERY_MS, so `datum nodes` is never further behind than that
 * and a long-lived loop adds one event per interval, not one per pass.
 */
export function publishVerified(w: AttributeWriter, verifiedAt: string | null): void {
  if (!verifiedAt) return;
  const behind = w.verifiedAt ? Date.parse(verifiedAt) - Date.parse(w.verifiedAt) : Infinity;
  if (behind < MEMO_VERIFIED_EVERY_MS || !inForce(WORKFLOW_PATCH.memoNodeView)) return;
  w.verifiedAt = verifiedAt;
  upsertMemo({ [MEMO_LAST_VERIFIED]: verifiedAt });
}

function upsertChanged(w: AttributeWriter, pairs: SearchAttributeUpdatePair[]): void {
  const changed = pairs.filter((p) => w.written.get(p.key.name) !== JSON.stringify(p.value));
  if (changed.length === 0) return;
  upsertSearchAttributes(changed);
  for (const p of changed) w.written.set(p.key.name, JSON.stringify(p.value));
}

/** The node and the intent this loop is bound to. */
export function bindAttributes(w: AttributeWriter, node: string, intent: BoundIntent): void {
  upsertChanged(w, [
    { key: DatumNode, value: node },
    { key: DatumGeneration, value: intent.generation },
    { key: DatumDigest, value: intent.digest },
  ]);
}

/** The same generation re-bound to new content (refreshDesired). */
export function rebindAttributes(w: AttributeWriter, intent: BoundIntent): void {
  upsertChanged(w, [{ key: DatumDigest, value: intent.digest }]);
}

/** What the successor of a hand-over starts with, so it is listed under its node at once. */
export function handOverAttributes(node: string, target: { generation: number; digest: string }): SearchAttributePair[] {
  return [
    { key: DatumNode, value: node },
    { key: DatumGeneration, value: target.generation },
    { key: DatumDigest, value: target.digest },
  ];
}

/** A recorded decision: status, open condition types and mode, the memo's summary, the details. */
export function publishDecision(w: AttributeWriter, decision: Decision, verifiedAt: string | null = null): void {
  upsertChanged(w, [
    { key: DatumStatus, value: decision.convergence_status },
    { key: DatumConditions, value: [...new Set(decision.conditions.map((c) => c.type))].sort() },
    ...(decision.mode ? [{ key: DatumMode, value: decision.mode } as SearchAttributeUpdatePair] : []),
  ]);
  upsertMemo({ [MEMO_SUMMARY]: summarize(decision), ...nodeView(w, decision, verifiedAt) });
  // Shown at the top of the workflow's page in the Web UI ("current details"); not history.
  setCurrentDetails(
    `**${decision.convergence_status}** ${decision.reason} (generation ${decision.desired_generation})\n\n${decision.reason_detail}`,
  );
}

function summarize(d: Decision): string {
  return summaryLine(d.convergence_status, d.reason, d.desired_generation, d.reason_detail);
}

/** The memo's one line: status, reason, generation and the reason's sentence, at most 240 characters. */
function summaryLine(status: string, reason: string, generation: number, detail: string): string {
  const line = `${status} ${reason} (gen ${generation}): ${detail}`;
  return line.length > 240 ? `${line.slice(0, 237)}...` : line;
}

/**
 * A loop waiting at its start for desired state that validates: listed under its node as
 * BLOCKED with INVALID_DESIRED_STATE, with the error as its summary, before any decision exists.
 */
export function showInvalidAtStart(input: { node: string; generation: number }, error: string): void {
  upsertSearchAttributes([
    { key: DatumNode, value: input.node },
    { key: DatumGeneration, value: input.generation },
    { key: DatumStatus, value: 'BLOCKED' },
    { key: DatumConditions, value: ['INVALID_DESIRED_STATE'] },
  ]);
  upsertMemo({ [MEMO_SUMMARY]: summaryLine('BLOCKED', 'INVALID_DESIRED_STATE', input.generation, error) });
  setCurrentDetails(`**BLOCKED** INVALID_DESIRED_STATE (generation ${input.generation})\n\n${error}`);
}
