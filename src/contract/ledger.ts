/*
 * A decision and the ledger entry that records it (ledger v1, docs/architecture.md §5): the
 * fields users, dashboards and the ledger store rely on. The ledger store validates entries with
 * their schema (src/schemas/ledger.ts), which validates exactly these types. A field added to a
 * stored format is optional here (entries written before it still read), with a line saying so.
 */
import type { Extend, Json } from './json';
import type { DesiredProvenance } from './desired';
import type { FenceReset, OperatorDecision, WriterEvidence } from './observation';
import type { DecisionAuthor } from './trust';
import type {
  ConditionType,
  ConvergenceStatus,
  ExecutionOutcome,
  Mode,
  Ownership,
  Reason,
  RecheckTriggerKind,
  Resolution,
  Resolver,
  ResourceType,
} from './vocabulary';

/** A hold on a node: who, why, since and until when, and the identity Temporal recorded for the request. */
export interface NodeHold {
  by: string;
  reason: string;
  since: string;
  /** When it ends by itself; null: until `datum unhold`. */
  until: string | null;
  /** The identity of the client that sent the hold (its Update), null when it could not be read. */
  identity: string | null;
}

/** What evidence must change before the loop judges again, and not before when. */
export type RecheckTrigger = {
  trigger: RecheckTriggerKind;
  not_before: string | null;
  detail: string;
};

/** A durable fact that stays open until a later observation shows it resolved. */
export type Condition = {
  type: ConditionType;
  resource_key: string | null;
  since: string;
  message: string;
  evidence: Json;
  tried: string[];
  resolver: Resolver;
  needs_judgement: boolean;
};

export type AuthorizedAction = {
  resource_key: string;
  /** An ActionKind (a refused destructive kind is recorded as planned, never authorized). */
  action: string;
  desired_generation: number;
  desired_digest: string;
  idempotency_key: string;
  /** The marker the plan was made against; with action_seq it tells a replay from a new attempt. */
  observed_marker: string | null;
  action_seq: number;
  spec: Json;
  /**
   * When the snapshot the plan was made from was taken, and the TTL it was judged against: the
   * agent refuses the write once that snapshot is older than the TTL (StaleSnapshotRefusal).
   * Optional so ledger entries written before they existed stay valid; the agent refuses an
   * action without them, since a snapshot of unknown age never drives a write.
   */
  observed_at?: string | null;
  observation_ttl?: string | null;
  /**
   * The digest of the resource spec the action carries out (specDigest): the agent refuses it while
   * a yield or an open conflict stands for the same spec on its target. Optional: older entries lack it.
   */
  spec_digest?: string | null;
};

export type PlannedAction = Extend<
  AuthorizedAction,
  {
    destructive: boolean;
    authorized: boolean;
    /** Why a planned action is not authorized (observe mode, destructive, budget, …); null when it is. */
    withheld_because: string | null;
  }
>;

export type ExecutionEvidence = {
  resource_key: string;
  action: string;
  idempotency_key: string;
  outcome: ExecutionOutcome;
  executed_at: string;
  /** The change marker our own write left; null when nothing was written. */
  marker_after: string | null;
  detail: string;
  refusal: string | null;
  /** The refusal's failure type (REFUSALS), so the judgement reads a type, not the sentence. Optional: older entries lack it. */
  refusal_type?: string | null;
};

/** One resource as the decision saw it. */
export type ResourceEntry = {
  resource_key: string;
  type: ResourceType | null;
  ownership: Ownership;
  ownership_provenance: Json;
  desired: Json;
  observed: Json;
  drift: boolean;
  effective_mode: Mode;
  idempotency_key: string | null;
};

/** An OPERATOR_OWNED resource: recorded, never reverted. */
export type OperatorException = {
  resource_key: string;
  provenance: Json;
  desired: Json;
  observed: Json;
};

/** The policy's backoff, and the delay this decision waits when it is a backoff. */
export type BackoffRecord = {
  initial: string;
  factor: number;
  max: string;
  next_delay: string | null;
};

/** Per contested resource, the sightings of the other writer. */
export type ConflictingWriter = {
  resource_key: string;
  sequence: WriterEvidence[];
};

/**
 * An operator's resolveConflict as the ledger records it on the note that acknowledges it: the
 * yield the agent is told to keep, or the retake that ends the target's decision, for the key's
 * spec at the time. The ledger store's copy of the decisions follows it (src/activities/ledger-store/decisions.ts).
 */
export type OperatorResolution = Extend<
  Omit<OperatorDecision, 'kind'>,
  {
    kind: Resolution;
  }
>;

/**
 * On the note of a work item's resolution (docs/work-items.md): which item, what was decided, the
 * declared name and the identity Temporal recorded for the Update, and why.
 */
export interface WorkResolutionNote {
  item_id: string;
  condition: ConditionType;
  resource_key: string | null;
  resolution: string;
  attempts: number | null;
  by: string;
  identity: string | null;
  note: string | null;
}

/**
 * On the note of an operator's signal or Update (resolveConflict, refreshDesired, a rejected
 * recheck): which request, how it came, the name it declares (`by`, self-declared: any client can
 * write any name) and the identity Temporal recorded for it (the sending client's `identity`
 * option, such as 4711@ops-laptop; null when it could not be read). The identity is what the
 * server was told by the connection that sent it, not a proof of who that was: with a shared
 * namespace credential, a client chooses its identity too.
 */
export interface RequesterNote {
  request: 'resolveConflict' | 'refreshDesired' | 'recheck' | 'hold' | 'unhold';
  via: 'signal' | 'update';
  by: string | null;
  identity: string | null;
}

/** An operator decision not carried because what the key writes changed since: new intent, a new episode. */
export type NewIntent = Extend<
  OperatorDecision,
  {
    spec_digest_now: string;
    /** What the key would write now (valueDigest). Optional: older entries lack it. */
    value_digest_now?: string | null;
  }
>;

export type Decision = {
  node_id: string;
  desired_generation: number;
  desired_digest: string;
  desired_provenance: DesiredProvenance | null;
  observed_at: string | null;
  observation_ttl: string;
  observation_fresh: boolean;
  mode: Mode | null;
  resources: ResourceEntry[];
  operator_exceptions: OperatorException[];
  planned_actions: PlannedAction[];
  authorized_actions: AuthorizedAction[];
  execution_evidence: ExecutionEvidence[];
  attempt_count: number;
  retry_budget: number;
  backoff: BackoffRecord;
  post_action_observation: Json;
  conflicting_writer_evidence: ConflictingWriter[] | null;
  convergence_status: ConvergenceStatus;
  reason: Reason;
  reason_detail: string;
  recheck_trigger: RecheckTrigger;
  conditions: Condition[];
  /**
   * The operator decisions (yields, open conflicts) this loop holds for the node's current keys:
   * the ledger store's durable copy of them. Optional: older entries lack it.
   */
  operator_decisions?: OperatorDecision[];
  /** Decisions not carried because the key's spec changed since. Optional: older entries lack it. */
  new_intent?: NewIntent[];
  /** On the note of a resolveConflict: what it told the agent to keep or end. Optional: older notes lack it. */
  operator_resolution?: OperatorResolution;
  /** On the note of a work item's resolution. Optional: other entries have none. */
  work_resolution?: WorkResolutionNote;
  /**
   * On the note of an operator decision (resolveConflict, a work item's resolution): who made it,
   * `proven` by the operator key the node's agent checked, or `declared` only (a name and a client
   * identity, both the client's own claims). Optional: other entries, and older notes, have none.
   */
  author?: DecisionAuthor;
  /** On the notes an operator's signal or Update wrote: who asked, declared and as Temporal recorded it. Optional: older notes lack it. */
  requester?: RequesterNote;
  /**
   * The repair episode this decision belongs to, where policy.repair_deadline is set: when it
   * began and its deadline (the ledger auditor holds later entries to it). Optional: others have none.
   */
  repair_episode?: { started_at: string; repair_deadline: string };
  /**
   * The last reset of the node's fence (`datum agent reset-fence`) the agent reported with the
   * snapshot this decision was planned from. Optional: entries from before it, and of nodes whose
   * fence was never reset, have none.
   */
  fence_reset?: FenceReset;
  /** On every entry while the node is held (`datum hold`): by whom, why, until when. Optional: others have none. */
  hold?: NodeHold;
};

export const LEDGER_VERSION = 1;

/** A decision as the ledger keeps it: numbered within its workflow's run chain. */
export type LedgerEntry = Extend<
  Decision,
  {
    ledger_version: typeof LEDGER_VERSION;
    seq: number;
    decided_at: string;
    workflow_id: string;
  }
>;
