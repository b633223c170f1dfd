import type { Json } from './canonical';
import type { Condition } from '../contract/ledger';
import type { ConditionType } from '../contract/vocabulary';

export type ConditionDraft = Omit<Condition, 'since'>;

const WHO: Record<ConditionType, Pick<Condition, 'resolver' | 'needs_judgement'>> = {
  NODE_UNREACHABLE: { resolver: 'operator', needs_judgement: false },
  STALE_OBSERVATION: { resolver: 'datum', needs_judgement: false },
  STALE_INTENT: { resolver: 'operator', needs_judgement: false },
  INTENT_DIGEST_MISMATCH: { resolver: 'desired-state author', needs_judgement: true },
  INVALID_DESIRED_STATE: { resolver: 'desired-state author', needs_judgement: false },
  AGENT_CONFIG_INVALID: { resolver: 'operator', needs_judgement: false },
  UNKNOWN_OWNERSHIP: { resolver: 'operator', needs_judgement: true },
  DESTRUCTIVE_REPAIR_REQUIRED: { resolver: 'operator', needs_judgement: true },
  RETRY_BUDGET_EXHAUSTED: { resolver: 'operator', needs_judgement: true },
  REPAIR_DEADLINE_EXCEEDED: { resolver: 'operator', needs_judgement: true },
  REPAIR_RETRYING: { resolver: 'datum', needs_judgement: false },
  ACTION_REFUSED: { resolver: 'operator', needs_judgement: true },
  CONFLICTING_WRITER: { resolver: 'operator', needs_judgement: true },
  OBSERVED_DRIFT: { resolver: 'operator', needs_judgement: true },
  // The operator who held the node has judged already: the hold's end repairs it.
  DRIFT_HELD: { resolver: 'operator', needs_judgement: false },
  INVALID_SIGNAL: { resolver: 'operator', needs_judgement: false },
};

/** Whether a condition of this type needs someone's judgement: each such condition opens a work item. */
export function needsJudgement(type: ConditionType): boolean {
  return WHO[type].needs_judgement;
}

export function draft(
  type: ConditionType,
  resourceKey: string | null,
  message: string,
  evidence: Json,
  tried: string[] = [],
): ConditionDraft {
  return { type, resource_key: resourceKey, message, evidence, tried, ...WHO[type] };
}

/**
 * The open conditions after a pass. `since` moves only when a condition first appears, so an
 * operator can tell how long something has been wrong; a condition absent from `current` is
 * closed, which only a pass that could observe it may decide (callers pass carried conditions).
 */
export function mergeConditions(previous: Condition[], current: ConditionDraft[], now: string): Condition[] {
  const key = (c: { type: string; resource_key: string | null }) => `${c.type}\u0000${c.resource_key ?? ''}`;
  const before = new Map(previous.map((c) => [key(c), c]));
  const seen = new Set<string>();
  const merged: Condition[] = [];
  for (const c of current) {
    const k = key(c);
    if (seen.has(k)) continue;
    seen.add(k);
    merged.push({ ...c, since: before.get(k)?.since ?? now });
  }
  return merged.sort((a, b) => key(a).localeCompare(key(b)));
}
