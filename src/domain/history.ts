import type { Json } from './canonical';
import type { Condition, ConvergenceStatus, Mode, OperatorDecision, Reason, WriterEvidence } from './schemas';

/**
 * What the loop carries from one decision to the next, as plain JSON (it crosses
 * continue-as-new and the workflow's queries). It never stands in for observation: it only
 * holds what observation cannot show, such as the marker our own repair left or an operator's
 * resolution.
 */
export interface History {
  /** Repairs tried in the current episode; compared with retry_budget. */
  attempt_count: number;
  /** Monotonic across the whole run chain; tells a replayed apply from a new attempt. */
  action_seq: number;
  /** Resources a repair brought to desired, with the marker seen then (conflict_window starts here). */
  repaired: Record<string, { at: string; value: Json; marker: string | null }>;
  /** Evidence of another writer, per resource, and the operator's resolution once signalled. */
  conflicts: Record<string, ConflictRecord>;
  /** Resources an operator yielded to the other writer (treated as OPERATOR_OWNED). */
  yielded: Record<string, { by: string; note: string | null; at: string }>;
  /**
   * Operator retakes, by key: a decision the agent reports from before the retake is not carried
   * again (seedDecisions), and the retake is re-sent until the agent shows it. Absent in older carries.
   */
  retaken?: Record<string, { by: string; note: string | null; at: string }>;
  /**
   * Operator decisions read back from the ledger store when a run chain opens
   * (ControlActivities.storedDecisions): carried like the agent's own record where the agent
   * reports none for the target (its .datum/ was lost), then sent to it. Cleared by the first
   * snapshot that seeds. Absent in older carries.
   */
  stored_decisions?: OperatorDecision[];
  /** Refused applies: not tried again until what was observed about them changes. */
  refused: Record<string, { idempotency_key: string; marker: string | null; mode: Mode; refusal: string; at: string }>;
  /** Signals rejected for a malformed payload, by signal name, until a valid one arrives. */
  rejected_signals: Record<string, { error: string; at: string }>;
  conditions: Condition[];
  /**
   * Stale snapshots in a row: each re-take waits longer (policy.backoff), so a node whose
   * snapshots always arrive stale is not re-observed back to back. Absent in older carries.
   */
  stale_retakes?: number;
  last_status: ConvergenceStatus | null;
  last_reason: Reason | null;
}

export interface ConflictRecord {
  since: string;
  sequence: WriterEvidence[];
  resolution: { resolution: 'retake' | 'yield'; by: string; note: string | null; at: string } | null;
}

export function emptyHistory(): History {
  return {
    attempt_count: 0,
    action_seq: 0,
    repaired: {},
    conflicts: {},
    yielded: {},
    refused: {},
    rejected_signals: {},
    conditions: [],
    last_status: null,
    last_reason: null,
  };
}

export interface ResolveConflictSignal {
  resource_key: string;
  resolution: 'retake' | 'yield';
  by: string;
  note?: string | null;
}

/**
 * Records an operator's resolution. It does not clear the conflict: only a later observation
 * does (docs/architecture.md §6 "Conditions": a signal alone never clears one). A retake starts a fresh budget.
 */
export function recordResolution(
  history: History,
  signal: ResolveConflictSignal,
  now: string,
): { history: History; error: string | null } {
  const conflict = history.conflicts[signal.resource_key];
  if (!conflict) {
    const open = Object.keys(history.conflicts);
    return {
      history,
      error: `no conflict is open on "${signal.resource_key}"${open.length ? `; open conflicts: ${open.join(', ')}` : '; this node has no open conflict'}`,
    };
  }
  const resolution = { resolution: signal.resolution, by: signal.by, note: signal.note ?? null, at: now };
  const next: History = { ...history, conflicts: { ...history.conflicts, [signal.resource_key]: { ...conflict, resolution } } };
  if (signal.resolution === 'yield') {
    next.yielded = { ...history.yielded, [signal.resource_key]: { by: signal.by, note: signal.note ?? null, at: now } };
  } else {
    const { [signal.resource_key]: _gone, ...rest } = history.yielded;
    next.yielded = rest;
    next.retaken = { ...history.retaken, [signal.resource_key]: { by: signal.by, note: signal.note ?? null, at: now } };
    const { [signal.resource_key]: _repair, ...repaired } = history.repaired;
    next.repaired = repaired;
    // A retake is the operator's word that Datum may write again: a refusal the agent gave while
    // it still held the conflict (or the yield) is not a standing "no" any more.
    const { [signal.resource_key]: _refusal, ...refused } = history.refused;
    next.refused = refused;
    next.attempt_count = 0;
  }
  return { history: next, error: null };
}
