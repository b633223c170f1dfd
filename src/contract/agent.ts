/*
 * The node agent's activities (task queue `datum-node-<node>`, see names.ts): what the
 * controller sends and what the agent answers. The agent imports these, never workflow code.
 */
import type { ResourceSpec } from './desired';
import type { AuthorizedAction, ExecutionEvidence } from './ledger';
import type { Observation, OperatorDecision, WriterEvidence } from './observation';
import type { ResourceType } from './vocabulary';
import type { RemovalResult, RemovalTarget } from './removal';
import type { DecisionAuthor, OperatorSignature, SignedIntent } from './trust';

export interface ObserveRequest {
  node: string;
  /** Declared resources of the bound generation; artifact references already resolved. */
  resources: Record<string, ResourceSpec>;
  /**
   * The bound generation: the agent records which key claims which target from which generation
   * (<root>/.datum/claims.json). Optional: older workflows do not send it (the claim has none).
   */
  generation?: number;
}

export interface ApplyRequest {
  node: string;
  action: AuthorizedAction;
  /**
   * The bound intent's desired-state document and its signature, exactly as the authority holds
   * them: what a host that requires signed intent verifies the action against. Absent when the
   * file is not signed, and in requests of older loops.
   */
  signed?: SignedIntent;
  /**
   * Where given (on the last action of a pass), once the action is carried out the agent observes
   * the node, as `observe` would for this generation and these resources, and hands the snapshot
   * back with the evidence (ApplyAnswer.probe): the pass's post-action probe without another
   * round trip. Absent in requests of older loops, which probe for themselves.
   */
  probe_after?: ObserveRequest;
}

/** What apply answers: the action's evidence and, when asked (probe_after), the snapshot after it. */
export type ApplyAnswer = ExecutionEvidence & { probe?: Observation };

export interface WatchRequest {
  node: string;
  resources: Record<string, ResourceSpec>;
  /** Return with no change after this long (the workflow starts another watch). */
  window_ms: number;
  /**
   * The change markers of the loop's last observation, by resource key. The watch compares with
   * these rather than with what it reads when it starts, so a change made between that
   * observation and the watch's start is seen at once, not at the next resync. Keys missing or
   * null here are compared with what the watch reads first. Absent in requests of older loops.
   */
  baseline?: Record<string, string | null>;
  /**
   * Where given, a watch that returns a change also observes the node, as `observe` would for this
   * generation (through the same gate, moving the same fence), and hands the snapshot back
   * (WatchResult.observation): the pass the change wakes decides on it instead of asking for
   * another. Absent in requests of older loops, which observe for themselves.
   */
  observe_on_change?: { generation: number };
  /**
   * With observe_on_change: a watch whose window ends with nothing changed observes the node too,
   * and hands that snapshot back (WatchResult.observation, reason 'window elapsed'). The loop sets
   * the window to end at its resync, so the resync pass decides on it (patch watch-ends-at-resync).
   * Absent in requests of older loops; an older agent ignores it and the loop observes.
   */
  observe_at_end?: boolean;
}

export interface WatchResult {
  /** Resource keys whose change marker moved since the baseline (the last observation, or the watch's start). */
  changed: string[];
  at: string;
  /**
   * 'changed since observation': found on the watch's first read, against the request's baseline.
   * 'agent restarted': the agent running it died, and the next agent on the node ended it when it started.
   */
  reason: 'changed' | 'changed since observation' | 'window elapsed' | 'cancelled' | 'agent restarted';
  /**
   * The snapshot taken after the change, or at the window's end where the request asked for that
   * too (observe_at_end), when the request asked for one (observe_on_change) and the observation
   * succeeded; absent otherwise, and from older agents: the loop then observes.
   */
  observation?: Observation;
}

export interface AgentActivities {
  observe: (request: ObserveRequest) => Promise<Observation>;
  apply: (request: ApplyRequest) => Promise<ApplyAnswer>;
  /** Event-driven observation: returns when something the node manages changes (see src/agent/watch.ts). */
  watch: (request: WatchRequest) => Promise<WatchResult>;
  /**
   * Keeps an operator decision on the node, per target (<root>/.datum/decisions.json): a yield or
   * an open conflict, which the agent then refuses to overwrite while the spec is unchanged, or a
   * retake, which ends it. Answers what the agent now holds for that target.
   */
  recordDecision: (request: RecordDecisionRequest) => Promise<RecordDecisionResult>;
  /**
   * `datum import`: the spec that declares what the node holds now under each name asked, read as
   * observe reads it and writing nothing (src/agent/activities/inventory.ts).
   */
  inventory: (request: InventoryRequest) => Promise<InventoryAnswer>;
  /**
   * A planned removal (docs/operations.md, "Removing things"): what Datum holds on the node that
   * no longer belongs to it, read as observe reads it and writing nothing but the claims an
   * observe of `generation` records (src/agent/activities/removal.ts).
   */
  planRemoval: (request: RemovalPlanRequest) => Promise<RemovalPlanAnswer>;
  /**
   * An approved removal: exactly the targets named, each moved into the backup area and recorded,
   * once per approval; refused whole unless agent.yaml allows removing every one of their types.
   */
  removeTargets: (request: RemovalRequest) => Promise<RemovalResult>;
}

export interface RemovalPlanRequest {
  node: string;
  /** dropped: what generation `generation` no longer declares; decommission: everything Datum holds. */
  cause: 'dropped' | 'decommission';
  /** dropped: the generation whose resources stay (the agent must have accepted it); null for decommission. */
  generation: number | null;
  /** dropped: that generation's resources, as an observe of it sends them. */
  resources: Record<string, ResourceSpec>;
}

export interface RemovalPlanAnswer {
  /** The newest generation the agent had accepted (its fence). */
  generation: number | null;
  targets: RemovalTarget[];
  kept: Array<{ target: string; why: string }>;
}

export interface RemovalRequest {
  node: string;
  /** The work item that approved it. */
  item: string;
  cause: 'dropped' | 'decommission';
  /** Once per key: a second request with it is answered from the agent's record. */
  key: string;
  approval: {
    by: string;
    identity: string | null;
    note: string | null;
    at: string;
    /** The approver's signature, where the approver signed it (required where the host requires signatures). */
    operator?: OperatorSignature | null;
  };
  /** The targets the approver saw, each with the marker it had then. */
  targets: Array<{ target: string; marker: string; sha256: string }>;
}

/** What `datum import` asks a node's agent: for each resource key, a type and its name there (a path, a package or unit name). */
export interface InventoryRequest {
  node: string;
  resources: Record<string, { type: ResourceType; name: string }>;
  /** Also every flag under flags/, each under its own name. */
  include_flags?: boolean;
}

/** Per resource key: the spec that declares what is there now, or why it cannot be declared. */
export type InventoryAnswer = Record<string, { spec: ResourceSpec } | { problem: string }>;

/** What the workflow sends the agent's recordDecision: a decision to keep, or a retake that ends one. */
export interface RecordDecisionRequest {
  node: string;
  resource_key: string;
  target: string;
  kind: 'yield' | 'conflict' | 'retake';
  spec_digest: string;
  /** What Datum would write to the target (valueDigest); null when the spec does not say. */
  value_digest: string | null;
  generation: number;
  by: string;
  at: string;
  note: string | null;
  sequence: WriterEvidence[];
  /** A retake's operator signature, where the operator signed it (required where the host requires signatures). */
  operator?: OperatorSignature | null;
}

export interface RecordDecisionResult {
  target: string;
  /** The decision now kept for the target; null after a retake. */
  holds: OperatorDecision | null;
  /** A retake's author as the host established it (absent for a yield or a conflict, and from older agents). */
  author?: DecisionAuthor;
}
