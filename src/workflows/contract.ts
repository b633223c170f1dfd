/*
 * Datum's Temporal contract, in one module imported by the workflows, the workers, the agent,
 * the CLI and the tests (DESIGN.md "Temporal contract"). Users and external tools rely on these
 * names: change them only with a migration note. Workflow-safe: no Node built-ins.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type {
  AuthorizedAction,
  Condition,
  ConvergenceStatus,
  Decision,
  ExecutionEvidence,
  LedgerEntry,
  Mode,
  Observation,
  Reason,
  RecheckTrigger,
  ResourceSpec,
} from '../domain';
import { sha256Hex } from '../domain/canonical';

export const CONTROL_TASK_QUEUE = 'datum-control';
export const agentTaskQueue = (node: string) => `datum-node-${node}`;
export const reconcileWorkflowId = (node: string, generation: number) => `datum/${node}/gen-${generation}`;
/** One id per (generation, node set): a second `rollout start` for the same set attaches. */
/** Statuses a node settles in for a rollout's purposes: nothing more happens without new evidence. */
export const ROLLOUT_SETTLED: readonly ConvergenceStatus[] = ['CONVERGED', 'DRIFTED', 'BLOCKED', 'CONFLICT'];
export const rolloutWorkflowId = (generation: number, nodes: string[]) =>
  `datum-rollout/gen-${generation}/${nodes.length === 1 ? nodes[0] : `${nodes.length}-nodes-${sha256Hex([...nodes].sort().join(',')).slice(0, 12)}`}`;

// ---------------------------------------------------------------------------------------------
// Workflows

export interface ReconcileNodeInput {
  node: string;
  generation: number;
  /** Set only by continue-as-new: the state the previous run hands over, as plain JSON. */
  carry?: ReconcileCarry;
}

export interface RolloutInput {
  generation: number;
  nodes: string[];
}

export type RolloutNodeOutcome =
  | { node: string; outcome: 'reported'; workflow_id: string; status: ConvergenceStatus; reason: Reason; reason_detail: string; handed_over_from: string[] }
  | { node: string; outcome: 'refused'; error: string };

export interface RolloutResult {
  generation: number;
  nodes: RolloutNodeOutcome[];
}

// ---------------------------------------------------------------------------------------------
// Signals and queries

export const refreshDesiredSignal = defineSignal<[{ generation: number; digest: string }]>('refreshDesired');
export const resolveConflictSignal = defineSignal<[{ resource_key: string; resolution: 'retake' | 'yield'; by: string; note?: string | null }]>('resolveConflict');
export const recheckSignal = defineSignal<[Record<string, never>?]>('recheck');

export interface NodeState {
  node: string;
  workflow_id: string;
  convergence_status: ConvergenceStatus | null;
  reason: Reason | null;
  reason_detail: string | null;
  recheck_trigger: RecheckTrigger | null;
  conditions: Condition[];
  attempt_count: number;
  retry_budget: number;
  desired_generation: number;
  desired_digest: string;
  mode: Mode | null;
  last_verified_at: string | null;
  /** Ledger entries recorded by this run chain (the tail kept across continue-as-new included). */
  ledger_entries: number;
  superseded_by: string | null;
}

export const ledgerQuery = defineQuery<LedgerEntry[]>('ledger');
/** The rollout's per-node view so far (settled nodes carry their status). */
export const rolloutProgressQuery = defineQuery<RolloutResult>('progress');
export const stateQuery = defineQuery<NodeState>('state');

// ---------------------------------------------------------------------------------------------
// Search attributes and memo

export const DatumNode = defineSearchAttributeKey('DatumNode', SearchAttributeType.KEYWORD);
export const DatumGeneration = defineSearchAttributeKey('DatumGeneration', SearchAttributeType.INT);
export const DatumDigest = defineSearchAttributeKey('DatumDigest', SearchAttributeType.KEYWORD);
export const DatumStatus = defineSearchAttributeKey('DatumStatus', SearchAttributeType.KEYWORD);
export const DatumConditions = defineSearchAttributeKey('DatumConditions', SearchAttributeType.KEYWORD_LIST);
export const DatumMode = defineSearchAttributeKey('DatumMode', SearchAttributeType.KEYWORD);
export const DATUM_SEARCH_ATTRIBUTES = [DatumNode, DatumGeneration, DatumDigest, DatumStatus, DatumConditions, DatumMode] as const;

/** Memo key holding the last decision's one-line summary, shown in the Web UI's workflow list. */
export const MEMO_SUMMARY = 'summary';

// ---------------------------------------------------------------------------------------------
// The node agent's activities (task queue datum-node-<node>)

export interface ObserveRequest {
  node: string;
  /** Declared resources of the bound generation; artifact references already resolved. */
  resources: Record<string, ResourceSpec>;
}

export interface ApplyRequest {
  node: string;
  action: AuthorizedAction;
}

export interface WatchRequest {
  node: string;
  resources: Record<string, ResourceSpec>;
  /** Return with no change after this long (the workflow starts another watch). */
  window_ms: number;
}

export interface WatchResult {
  /** Resource keys whose change marker moved since the watch started. */
  changed: string[];
  at: string;
  reason: 'changed' | 'window elapsed' | 'cancelled';
}

export interface AgentActivities {
  observe: (request: ObserveRequest) => Promise<Observation>;
  apply: (request: ApplyRequest) => Promise<ExecutionEvidence>;
  /** Event-driven observation: returns when something the node manages changes (see src/agent/watch.ts). */
  watch: (request: WatchRequest) => Promise<WatchResult>;
}

/**
 * Failure types of the agent's refusals. Each is a non-retryable ApplicationFailure: retrying
 * cannot make an observe-mode host enforce, or a wrong artifact verify.
 */
export const REFUSALS = [
  'ObserveModeRefusal',
  'OperatorOwnedRefusal',
  'DestructiveActionRefusal',
  'ArtifactDigestMismatch',
  'StaleGenerationRefusal',
  'PathOutsideRoot',
  'NodeMismatch',
  'ArtifactUnavailable',
  'InvalidAgentConfig',
  'InvalidAction',
] as const;
export type RefusalType = (typeof REFUSALS)[number];

/** Failure types of controller-side activities that retrying cannot fix. */
export const CONTROL_PERMANENT_ERRORS = ['InvalidDesiredState', 'UnknownNode', 'GenerationNotAtAuthority', 'MisconfiguredWorker'] as const;
/** Ledger append failures that retrying cannot fix (the entry is kept in the workflow either way). */
export const LEDGER_PERMANENT_ERRORS = ['InvalidLedgerEntry', 'LedgerSeqConflict', 'MisconfiguredWorker'] as const;

export type { Decision, ExecutionEvidence, Observation };

/**
 * reconcileNode continues as new past this many events even if the server has not suggested it
 * yet (servers differ in when they suggest; the time-skipping test server never does). Keeps
 * replay cheap, and bounds every run's history (bench/soak.mjs checks that bound).
 */
export const MAX_HISTORY_EVENTS = 2000;

/** Everything continue-as-new carries, as plain JSON (a Map would arrive as {}). */
export interface ReconcileCarry {
  intent: import('../domain').BoundIntent;
  history: import('../domain').History;
  ledger_tail: LedgerEntry[];
  next_seq: number;
  last_verified_at: string | null;
  last_fingerprint: string | null;
  /** The last decision, recorded or not (absent in carries from before it was added). */
  last_decision?: import('../domain').Decision | null;
  runs: number;
  /** Entries the ledger store has not confirmed yet; appended again by the next run. */
  unstored: LedgerEntry[];
}
