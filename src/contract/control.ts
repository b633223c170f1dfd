/*
 * The controller's activities (task queue datum-control), as the workflows call them.
 * src/activities implements this interface; the workflows proxy it from here, so they import no
 * activity module at all, not even for its types, and the sandbox code compiles without Node's
 * types (tsconfig.sandbox.json).
 */
import type { BoundIntent } from './desired';
import type { LedgerEntry } from './ledger';
import type { OperatorDecision } from './observation';
import type { NodeState } from './signals';
import type { NodeHold } from './ledger';
import type { GateEntry, PreparedNode, RollbackRecord, RolloutAct } from './workflows';
import type {
  LoopResolution,
  LoopResolutionResult,
  PassReport,
  ReportCheck,
  RollbackTarget,
  WorkReportInput,
  WorkTargetInput,
} from './work';
import type { FleetLook, FleetLookInput } from './fleet';

/** The authority's answer for one node: a bound intent, or why there is none. */
export type AuthorityRead =
  { ok: true; intent: BoundIntent } | { ok: false; kind: 'unknown_node' | 'invalid' | 'unreadable'; error: string };

export interface NodeStateReport {
  workflow_id: string;
  state: NodeState | null;
  error: string | null;
}

export interface ControlActivities {
  /** Runs as a local activity: it only reads the fleet directory next to the worker. */
  readAuthority(node: string): Promise<AuthorityRead>;
  /** Idempotent by (workflow_id, chain_id, seq): a retried append never writes twice. */
  appendLedger(input: { entry: LedgerEntry; chain_id: string }): Promise<'appended' | 'duplicate'>;
  /**
   * Runs as a local activity: the operator decisions (yields, open conflicts) the ledger store
   * holds for a node, so they survive the loss of the agent's own record (operatorDecisionsOf).
   */
  storedDecisions(node: string): Promise<OperatorDecision[]>;
  /**
   * Runs as a local activity: the hold the node's latest stored entry carries (`datum hold`), or
   * null; a new run chain starts held when it is still in force.
   */
  storedHold(node: string): Promise<NodeHold | null>;
  /**
   * Runs as a local activity of the fleet workflow: the authority's nodes against the running
   * loops, and the fleet's conditions when they differ from the fingerprint the workflow holds.
   */
  lookAtFleet(input: FleetLookInput): Promise<FleetLook>;
  /**
   * The fleet's reports to work items after a look: per node, opens (signal-with-start) the item
   * of each new condition that needs judgement and tells the items whose condition is gone.
   */
  reportFleetWork(input: { reports: Array<{ report: PassReport; open: WorkTargetInput[]; tell: string[] }> }): Promise<void>;
  /** The open work items of the fleet's conditions (visibility): a new fleet run tells them too. */
  openFleetItems(): Promise<string[]>;
  /**
   * Starts or attaches to each node's reconcileNode at the generation, handing over from older
   * ones; a loop it starts tells `report_to` when it settles.
   */
  prepareRolloutNodes(input: { generation: number; nodes: string[]; report_to?: string }): Promise<PreparedNode[]>;
  /**
   * Each workflow's `state`, or null while visibility says it has not settled; with `asked`, the
   * loops told the rollout they settled, so each is queried whatever visibility says yet.
   */
  nodeStates(workflowIds: string[], asked?: 'told'): Promise<NodeStateReport[]>;
  /**
   * A loop's report of a recorded decision to the node's work items: starts (or attaches to) the
   * item of each condition that needs judgement, tells the others the loop told before and, with
   * `discover`, the node's other open items; answers the ids it discovered.
   */
  reportWork(input: WorkReportInput): Promise<{ discovered: string[] }>;
  /**
   * A report a work item received, checked against its source before the item takes it: the
   * loop must be the node's reconcile workflow of the report's generation, and the entry at the
   * report's seq (the loop's own, else the ledger store's) must say what the report says.
   */
  confirmReport(report: PassReport): Promise<ReportCheck>;
  /** The identity Temporal recorded for an Update of a workflow (the client that sent it), or null. */
  updateRequester(input: UpdateRef): Promise<string | null>;
  /**
   * Runs as a local activity: the identity Temporal recorded for a signal a workflow run received
   * (its WorkflowExecutionSignaled event), or null when the history does not hold it.
   */
  signalRequester(input: SignalRef): Promise<string | null>;
  /**
   * A work item's resolution, carried to its loop (reconcileNode's resolveWork Update) with the
   * identity Temporal recorded for the item's resolve Update. The loop's refusal is a
   * non-retryable ResolutionRefused failure with its reason.
   */
  forwardResolution(input: { loop: string; resolution: Omit<LoopResolution, 'identity'>; update: UpdateRef }): Promise<{
    identity: string | null;
    result: LoopResolutionResult;
  }>;
  /** Each node's loop's latest recorded decision (never a note) at the generation, from the ledger store. */
  gateEvidence(input: {
    generation: number;
    nodes: Array<{ node: string; workflow_id: string }>;
  }): Promise<Array<{ node: string; entry: GateEntry | null }>>;
  /**
   * What a rollback of each node would write: the content of the generation its loop had before
   * this rollout (as the ledger store kept it when a loop bound it) as generation+1, or why not.
   */
  rollbackPlan(input: {
    generation: number;
    nodes: Array<{ node: string; handed_over_from: string[] }>;
  }): Promise<RollbackTarget[]>;
  /**
   * A rollback, written to the authority: per node, desired/nodes/<node>.yaml at the target's
   * generation with the earlier content, its header saying who asked, when and why.
   */
  writeRollback(input: {
    rollout: string;
    item: string;
    generation: number;
    targets: RollbackTarget[];
    act: RolloutAct;
  }): Promise<RollbackRecord['nodes']>;
  /** Decommission: the node's running loops ended (never while the authority still declares the node). */
  endNodeLoops(input: { node: string; item: string; by: string }): Promise<{ ended: string[] }>;
}

/**
 * One signal one workflow run received: the `ordinal`-th (from 1) of its name in that run's
 * history. Workflow code is not told a signal's event id, but a run's handlers see its signals of
 * one name in the order they were recorded, so counting them names the event.
 */
export interface SignalRef {
  workflow_id: string;
  run_id: string;
  signal_name: string;
  ordinal: number;
}

/** One Update of one workflow run. */
export interface UpdateRef {
  workflow_id: string;
  run_id: string;
  update_id: string;
}
