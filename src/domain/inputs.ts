/*
 * What decide() is given and what it gives back (src/domain/decide.ts). A module of their own so
 * that the stages decide calls (gates, judge, ladder, signals) can name them without importing
 * decide itself.
 */
import type { DecisionRule } from './writers';
import type { RecordDecisionRequest } from '../contract/agent';
import type { BoundIntent } from '../contract/desired';
import type { History } from '../contract/history';
import type { AuthorizedAction, Decision, ExecutionEvidence, PlannedAction } from '../contract/ledger';
import type { Observation } from '../contract/observation';

/** What the authority says right now (re-read before every decision that could act). */
export type AuthorityView = { ok: true; generation: number; digest: string } | { ok: false; error: string };

/** A pass that acted: what was planned and authorized, what the agent reported, from which snapshot. */
export interface ActedPass {
  planned: PlannedAction[];
  actions: AuthorizedAction[];
  evidence: ExecutionEvidence[];
  pre: Observation;
}

export interface DecideInput {
  intent: BoundIntent;
  authority: AuthorityView;
  /** The snapshot this decision is made from (after acting: the fresh post-action probe); null = no snapshot. */
  observation: Observation | null;
  /** Why there is no snapshot, when there is none. */
  unreachable?: string | null;
  history: History;
  now: string;
  acted?: ActedPass | null;
  /**
   * When the loop's resync timer is due, where one already runs (patch keep-wake-timer): a
   * CONVERGED decision's not_before (onResyncCadence in loop.ts). Absent: resync_interval from now.
   */
  resync_at?: string | null;
  /** Whether a rule added after a loop started is in force for it; default: every rule is. */
  rules?: ((rule: DecisionRule) => boolean) | undefined;
}

export interface DecideResult {
  decision: Decision;
  history: History;
  /** What the agent must be told so its record of operator decisions follows the history (decisions.ts). */
  decisions_to_record?: RecordDecisionRequest[];
}
