import type { History } from '../contract/history';

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
