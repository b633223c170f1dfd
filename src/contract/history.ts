/*
 * What a loop carries from one decision to the next: the state continue-as-new hands over
 * (ReconcileCarry) and the workflow's queries show, as plain JSON. The domain keeps it
 * (src/domain/history.ts); its shape is here because it crosses runs of the workflow.
 */
import type { Json } from './json';
import type { Condition, NodeHold } from './ledger';
import type { OperatorDecision, WriterEvidence } from './observation';
import type { ConvergenceStatus, Mode, Reason, Resolution } from './vocabulary';

/**
 * What the loop carries from one decision to the next, as plain JSON (it crosses
 * continue-as-new and the workflow's queries). It never stands in for observation: it only
 * holds what observation cannot show, such as the marker our own repair left or an operator's
 * resolution.
 */
export interface History {
  /** Repairs tried in the current episode; compared with retry_budget. */
  attempt_count: number;
  /**
   * When the current repair episode began (the workflow time of its first decision that authorized
   * a repair); policy.repair_deadline counts from it. Absent outside an episode and in older carries.
   */
  episode_started?: string;
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
  /**
   * Yields the agent (or the ledger store) holds for another value than desired state now asks
   * to write, by key: the yield stands, the resource is UNKNOWN, and only an operator decides
   * (resolveConflict: retake writes the new value, yield hands it over too). Absent in older carries.
   */
  revalued?: Record<string, RevaluedYield>;
  /**
   * Resources a work item's resolver left to whoever has them (UNKNOWN_OWNERSHIP resolved by
   * `leave`): classified OPERATOR_OWNED with the resolver's provenance for this run chain.
   * Absent in older carries.
   */
  left?: Record<string, { by: string; note: string | null; at: string }>;
  /** Refused applies: not tried again until what was observed about them changes. */
  refused: Record<
    string,
    {
      idempotency_key: string;
      marker: string | null;
      mode: Mode;
      refusal: string;
      at: string;
      /**
       * For a refusal about the signed document (INTENT_REFUSALS): the signature the loop sent
       * (intentSignature), null for none; it stands only while the loop holds that one. Absent otherwise.
       */
      signature?: string | null;
    }
  >;
  /**
   * Repairs that took, per target (what is written, not the key), newest last, within
   * policy.writer_horizon and at most policy.writer_repairs of them: the next drift of a target
   * with a full trail is another writer's (src/domain/repeated-drift.ts). Absent in older carries.
   */
  repair_trail?: Record<string, PastRepair[]>;
  /** Signals rejected for a malformed payload, by signal name, until a valid one arrives. */
  rejected_signals: Record<string, { error: string; at: string }>;
  conditions: Condition[];
  /**
   * Stale snapshots in a row: each re-take waits longer (policy.backoff), so a node whose
   * snapshots always arrive stale is not re-observed back to back. Absent in older carries.
   */
  stale_retakes?: number;
  /**
   * Passes in a row the node did not answer (NODE_UNREACHABLE): each re-probe waits longer
   * (policy.backoff, never past resync_interval), so an agent that was only late is asked again
   * soon and one that is gone is not asked back to back. Absent in older carries.
   */
  unreachable_in_a_row?: number;
  last_status: ConvergenceStatus | null;
  last_reason: Reason | null;
  /**
   * An operator's hold on the node (`datum hold`): repairs stop, observing and reporting go on,
   * until `until` passes or `datum unhold`. Absent or null: not held (and in older carries).
   */
  hold?: NodeHold | null;
}

/** A yield kept for another value than desired state asks for now. */
export type RevaluedYield = OperatorDecision & { spec_digest_now: string; value_digest_now: string | null };

export interface ConflictRecord {
  since: string;
  sequence: WriterEvidence[];
  resolution: { resolution: Resolution; by: string; note: string | null; at: string } | null;
  /**
   * Set when the conflict was opened because the target drifted again after `repairs` repairs
   * within `horizon` (policy.writer_repairs, writer_horizon), each slower than conflict_window.
   * Absent for a flip within conflict_window or a moved marker.
   */
  repeated_drift?: { repairs: number; horizon: string };
}

/** One repair that took: the drift it answered (another writer's value and marker) and the proof. */
export interface PastRepair {
  resource_key: string;
  /** The pre-action snapshot the repair was planned from. */
  found: { at: string; value: Json; marker: string | null };
  /** The fresh probe that showed the target at desired, and the marker Datum's write left. */
  repaired: { at: string; value: Json; marker: string | null };
}
