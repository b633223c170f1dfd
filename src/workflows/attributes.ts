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
  MEMO_SUMMARY,
} from '../contract';

/** The values last written, by attribute name (JSON), seeded from what the run started with. */
export interface AttributeWriter {
  written: Map<string, string>;
}

export function openAttributes(): AttributeWriter {
  const current: TypedSearchAttributes = workflowInfo().typedSearchAttributes;
  const written = new Map<string, string>();
  for (const key of DATUM_SEARCH_ATTRIBUTES) {
    const value = current.get(key);
    if (value !== undefined) written.set(key.name, JSON.stringify(value));
  }
  return { written };
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
export function publishDecision(w: AttributeWriter, decision: Decision): void {
  upsertChanged(w, [
    { key: DatumStatus, value: decision.convergence_status },
    { key: DatumConditions, value: [...new Set(decision.conditions.map((c) => c.type))].sort() },
    ...(decision.mode ? [{ key: DatumMode, value: decision.mode } as SearchAttributeUpdatePair] : []),
  ]);
  upsertMemo({ [MEMO_SUMMARY]: summarize(decision) });
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
