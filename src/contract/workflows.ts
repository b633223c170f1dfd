/*
 * The two workflows' inputs, results and signatures. Clients start them by typed reference,
 * `client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, …)`, so the
 * arguments are checked without importing workflow code.
 */
import type { InventoryAnswer, InventoryRequest } from './agent';
import type { BoundIntent } from './desired';
import type { History } from './history';
import type { Decision, LedgerEntry } from './ledger';
import type { ConvergenceStatus, Reason } from './vocabulary';
import type { WorkflowType } from './names';
import type { WorkItemWorkflow, WorkMemory } from './work';
import type { FleetWorkflow } from './fleet';

export interface ReconcileNodeInput {
  node: string;
  generation: number;
  /** Set only by continue-as-new: the state the previous run hands over, as plain JSON. */
  carry?: ReconcileCarry;
}

/** The loop's passes: begun and recorded, counted across continue-as-new. */
export interface PassCount {
  started: number;
  done: number;
}

/** Everything continue-as-new carries, as plain JSON (a Map would arrive as {}). */
export interface ReconcileCarry {
  intent: BoundIntent;
  history: History;
  ledger_tail: LedgerEntry[];
  next_seq: number;
  last_verified_at: string | null;
  last_fingerprint: string | null;
  /** The last decision, recorded or not (absent in carries from before it was added). */
  last_decision?: Decision | null;
  runs: number;
  /** Entries the ledger store has not confirmed yet; appended again by the next run. */
  unstored: LedgerEntry[];
  /** The work items the loop tells (docs/work-items.md); absent in carries from before work items. */
  work?: WorkMemory;
  /** The loop's passes so far (absent in older carries): `datum reconcile --wait` counts them. */
  passes?: PassCount;
}

/** A reconcileNode run ends only when a newer generation's loop takes the node over. */
export interface ReconcileResult {
  node: string;
  generation: number;
  convergence_status: 'SUPERSEDED';
  superseded_by: string;
}

/**
 * reconcileNode continues as new past this many events even if the server has not suggested it
 * yet (servers differ in when they suggest; the time-skipping test server never does). Keeps
 * replay cheap, and bounds every run's history (bench/soak.mjs checks that bound).
 */
export const MAX_HISTORY_EVENTS = 2000;

export interface RolloutInput {
  generation: number;
  nodes: string[];
  /** Set only by continue-as-new: the nodes already prepared, so none is started twice. */
  prepared?: PreparedNode[];
}

/** What preparing a node for a rollout came to: its loop started (or attached to), or refused. */
export type PreparedNode =
  | { node: string; outcome: 'started'; workflow_id: string; digest: string; handed_over_from: string[] }
  | { node: string; outcome: 'refused'; error: string };

/** reported: the node's loop settled (ROLLOUT_SETTLED); refused: it was never started; pending: not settled yet. */
export const ROLLOUT_OUTCOMES = { reported: 'reported', refused: 'refused', pending: 'pending' } as const;

/** A node's outcome once the rollout is done with it. */
export type RolloutNodeOutcome =
  | {
      node: string;
      outcome: typeof ROLLOUT_OUTCOMES.reported;
      workflow_id: string;
      status: ConvergenceStatus;
      reason: Reason;
      reason_detail: string;
      handed_over_from: string[];
    }
  | { node: string; outcome: typeof ROLLOUT_OUTCOMES.refused; error: string };

/** A node as the `progress` query shows it: settled, or still reconciling. */
export type RolloutNodeProgress =
  | RolloutNodeOutcome
  | { node: string; outcome: typeof ROLLOUT_OUTCOMES.pending; workflow_id: string; handed_over_from: string[] };

export interface RolloutResult {
  generation: number;
  nodes: RolloutNodeOutcome[];
}

/** What a cancelled rollout records in its memo (MEMO_ROLLOUT_CANCELLED): the loops it started go on. */
export interface RolloutCancelled {
  at: string;
  started: string[];
  refused: string[];
  not_started: string[];
}

export interface RolloutProgress {
  generation: number;
  nodes: RolloutNodeProgress[];
}

/** Statuses a node settles in for a rollout's purposes: nothing more happens without new evidence. */
export const ROLLOUT_SETTLED: readonly ConvergenceStatus[] = ['CONVERGED', 'DRIFTED', 'BLOCKED', 'CONFLICT'];

/** `datum import NODE`: what to ask the node's agent, and how long to wait for one to take it. */
export interface ImportNodeInput extends InventoryRequest {
  /** An agent that does not pick the read up within this long is unreachable (a duration, "30s"). */
  node_timeout: string;
}

export interface ImportNodeResult {
  node: string;
  /** When the agent answered (the workflow's clock). */
  read_at: string;
  answer: InventoryAnswer;
}

export type ImportNodeWorkflow = (input: ImportNodeInput) => Promise<ImportNodeResult>;
export type ReconcileNodeWorkflow = (input: ReconcileNodeInput) => Promise<ReconcileResult>;
export type RolloutWorkflow = (input: RolloutInput) => Promise<RolloutResult>;

/** Every workflow type with its signature: what src/workflows/index.ts must export. */
export interface DatumWorkflows extends Record<WorkflowType, (input: never) => Promise<unknown>> {
  reconcileNode: ReconcileNodeWorkflow;
  rollout: RolloutWorkflow;
  workItem: WorkItemWorkflow;
  importNode: ImportNodeWorkflow;
  fleet: FleetWorkflow;
}
