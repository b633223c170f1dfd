import { classify, type Assessment } from './classify';
import type { ConditionDraft } from './conditions';
import { durationMs } from './duration';
import type { BoundIntent } from '../contract/desired';
import type { History } from '../contract/history';
import type { RecheckTrigger } from '../contract/ledger';
import type { Observation } from '../contract/observation';
import type { ConvergenceStatus, Reason, RecheckTriggerKind } from '../contract/vocabulary';

/*
 * What the stages of decide() share: a snapshot classified once, and the verdict a gate or a
 * rung of the ladder hands to the one function that builds the Decision (decide.ts).
 */

/** A snapshot as this pass judges it. classify runs once per snapshot, here. */
export interface Classified {
  observation: Observation;
  assessments: Assessment[];
  byKey: Map<string, Assessment>;
}

export function classified(intent: BoundIntent, observation: Observation, history: History): Classified {
  const assessments = classify(intent, observation, history);
  return { observation, assessments, byKey: new Map(assessments.map((a) => [a.resource_key, a])) };
}

/** What a gate or a rung concluded; decide.ts turns it into the Decision and the carried history. */
export interface Verdict {
  status: ConvergenceStatus;
  reason: Reason;
  detail: string;
  recheck: RecheckTrigger;
  /** Conditions this verdict raises (signal conditions are added by the builder). */
  drafts: ConditionDraft[];
  /** The delay before the next attempt, when the verdict is a backoff. */
  next_delay_ms: number | null;
  /** The repair episode ends here: the next drift starts with a fresh retry_budget. */
  ends_episode: boolean;
}

export function trigger(kind: RecheckTriggerKind, detail: string, notBefore: string | null = null): RecheckTrigger {
  return { trigger: kind, not_before: notBefore, detail };
}

export function backoffMs(intent: BoundIntent, attempt: number): number {
  const { initial, factor, max } = intent.policy.backoff;
  return Math.min(durationMs(max), Math.round(durationMs(initial) * Math.pow(factor, Math.max(attempt - 1, 0))));
}

/** Resource keys as a reader sees them in a sentence: quoted, each once. */
export function list(keys: string[]): string {
  const unique = [...new Set(keys)];
  return unique.map((k) => `"${k}"`).join(', ');
}
