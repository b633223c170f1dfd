import type { History } from '../contract/history';
import { forgetRepairs } from './repeated-drift';

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
  const key = signal.resource_key;
  const conflict = history.conflicts[key];
  const revalued = history.revalued?.[key];
  if (!conflict && !revalued) {
    const open = [...Object.keys(history.conflicts), ...Object.keys(history.revalued ?? {})];
    return {
      history,
      error: `no conflict is open on "${key}"${open.length ? `; open conflicts: ${open.join(', ')}` : '; this node has no open conflict'}`,
    };
  }
  const resolution = { resolution: signal.resolution, by: signal.by, note: signal.note ?? null, at: now };
  const next: History = conflict
    ? { ...history, conflicts: { ...history.conflicts, [key]: { ...conflict, resolution } } }
    : { ...history };
  // The operator's word is the new baseline: repeated drift counts the target's repairs afresh.
  if (history.repair_trail) next.repair_trail = forgetRepairs(history.repair_trail, key);
  // A yield kept for another value is decided now: either way it is no longer pending.
  if (revalued) {
    const { [key]: _decided, ...pending } = history.revalued ?? {};
    next.revalued = pending;
  }
  if (signal.resolution === 'yield') {
    next.yielded = { ...history.yielded, [key]: { by: signal.by, note: signal.note ?? null, at: now } };
  } else {
    const { [key]: _gone, ...rest } = history.yielded;
    next.yielded = rest;
    next.retaken = { ...history.retaken, [key]: { by: signal.by, note: signal.note ?? null, at: now } };
    const { [key]: _repair, ...repaired } = history.repaired;
    next.repaired = repaired;
    // A retake is the operator's word that Datum may write again: a refusal the agent gave while
    // it still held the conflict (or the yield) is not a standing "no" any more.
    const { [key]: _refusal, ...refused } = history.refused;
    next.refused = refused;
    next.attempt_count = 0;
    // And a fresh repair_deadline: the next authorized repair starts the episode's clock again.
    delete next.episode_started;
  }
  return { history: next, error: null };
}
