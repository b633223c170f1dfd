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
import type { RemovalWorkflow, RolloutGateWorkflow, WorkItemWorkflow, WorkMemory } from './work';
import type { FleetWorkflow } from './fleet';

export interface ReconcileNodeInput {
  node: string;
  generation: number;
  /** Set only by continue-as-new: the state the previous run hands over, as plain JSON. */
  carry?: ReconcileCarry;
  /**
   * The rollout that started this loop (a `datum-rollout/…` id): the loop tells it, by the
   * rollout's nodeSettled signal, when it first settles. Absent, it tells nobody.
   */
  report_to?: string;
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
  /** The rollout this loop tells when it first settles; null once told (absent in older carries). */
  report?: SettledReport | null;
}

/** Whom a loop tells when it first settles. */
export interface SettledReport {
  to: string;
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
  /** A rollout in waves (docs/operations.md): absent, every node starts at once. */
  waves?: RolloutWaves;
  /** Set only by continue-as-new of a rollout in waves: where it is. */
  waves_carry?: WavesProgress;
  /**
   * How often the rollout reads the state of the nodes that have not told it they settled (a
   * loop tells its rollout by the nodeSettled signal; this read catches a loop that started
   * before it told rollouts, and one attached to rather than started). Default 15.
   */
  poll_seconds?: number;
}

/**
 * A rollout in waves: each wave's nodes (every node of the rollout in exactly one), how many of a
 * wave change at once, and the gate's deadline. A wave starts only when the one before it is
 * settled by the ledger's evidence: each node CONVERGED, by a fresh observation, within the
 * deadline counted from its start.
 */
export interface RolloutWaves {
  waves: Array<{ name: string; nodes: string[] }>;
  /** "2", or "25%" of a wave; null: each wave's nodes all at once. */
  max_unavailable: string | null;
  /** A duration such as "10m". */
  gate_deadline: string;
}

/** A loop's latest recorded decision (never a note), as the gate reads it from the ledger store. */
export interface GateEntry {
  workflow_id: string;
  seq: number;
  decided_at: string;
  generation: number;
  digest: string;
  status: ConvergenceStatus;
  reason: Reason;
  reason_detail: string;
  observation_fresh: boolean;
  /** When the loop looks again by itself (its recheck's not_before); absent from older workers' answers. */
  not_before?: string | null;
}

/**
 * converged: the gate holds for it. waiting: on its way. settled: its loop waits for new evidence
 * short of CONVERGED (BLOCKED, CONFLICT, DRIFTED). late: not CONVERGED within the deadline.
 */
export type GateNodeVerdict = { verdict: 'converged' | 'waiting' | 'settled' | 'late'; why: string | null };
export type WaveGate = 'passed' | 'failed' | 'waiting';

/** One node of a wave: not started yet, refused at preparation, or started and judged by the gate. */
export interface WaveNode {
  node: string;
  state: 'not_started' | 'refused' | GateNodeVerdict['verdict'];
  workflow_id: string | null;
  digest: string | null;
  started_at: string | null;
  handed_over_from: string[];
  /** Why it fails the gate (or was refused); null otherwise. */
  why: string | null;
  /** Its loop's latest recorded decision at the rollout's generation, as the ledger store has it. */
  entry: GateEntry | null;
}

export const WAVE_STATES = ['pending', 'running', 'passed', 'halted', 'continued', 'stopped'] as const;
export type WaveState = (typeof WAVE_STATES)[number];

export interface WaveProgress {
  name: string;
  /** The generation its nodes are rolled to: the rollout's, or the one a rollback wrote. */
  generation: number;
  state: WaveState;
  started_at: string | null;
  ended_at: string | null;
  nodes: WaveNode[];
}

/** Who paused, continued, aborted or rolled back, and when. */
export interface RolloutAct {
  by: string;
  identity: string | null;
  at: string;
  note: string | null;
}

/** A rollback a halted rollout carried out, per node: the generation written, or why not. */
export interface RollbackRecord extends RolloutAct {
  nodes: Array<
    | { node: string; outcome: 'written'; generation: number; content_of: number; digest: string; file: string }
    | { node: string; outcome: 'refused'; error: string }
  >;
}

/** A halt: the wave, its work item, and how it was resolved. */
export interface RolloutHalt {
  wave: number;
  item: string;
  at: string;
  resolution: ('continue' | 'abort' | 'rollback') | null;
  resolved: RolloutAct | null;
}

export const WAVES_STATES = ['running', 'paused', 'halted', 'completed', 'aborted', 'rolled_back'] as const;
export type WavesState = (typeof WAVES_STATES)[number];

/** A rollout in waves, as its `progress` query, its result and `datum rollout status` show it. */
export interface WavesProgress {
  state: WavesState;
  /** The index of the wave running (or halted, or last), from 0. */
  current: number;
  max_unavailable: string | null;
  gate_deadline: string;
  /** Paused now: by whom, since when; null when not. */
  paused: RolloutAct | null;
  /** Every pause, and the resume that ended it. */
  pauses: Array<{ paused: RolloutAct; resumed: RolloutAct | null }>;
  halts: RolloutHalt[];
  rollback: RollbackRecord | null;
  waves: WaveProgress[];
}

/** What preparing a node for a rollout came to: its loop started (or attached to), or refused. */
export type PreparedNode =
  | { node: string; outcome: 'started'; workflow_id: string; digest: string; handed_over_from: string[] }
  | { node: string; outcome: 'refused'; error: string };

/**
 * reported: the node's loop settled (ROLLOUT_SETTLED); refused: it was never started; pending: not
 * settled yet; not_started: a rollout in waves ended before the node's wave.
 */
export const ROLLOUT_OUTCOMES = {
  reported: 'reported',
  refused: 'refused',
  pending: 'pending',
  not_started: 'not_started',
} as const;

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
  | { node: string; outcome: typeof ROLLOUT_OUTCOMES.refused; error: string }
  | { node: string; outcome: typeof ROLLOUT_OUTCOMES.not_started; wave: string };

/** A node's outcome in words: its status column (REFUSED, NOT STARTED) and what it says. */
export function outcomeWords(n: RolloutNodeProgress): { status: string; detail: string } {
  if (n.outcome === ROLLOUT_OUTCOMES.refused) return { status: 'REFUSED', detail: n.error };
  if (n.outcome === ROLLOUT_OUTCOMES.pending) return { status: '…', detail: 'reconciling' };
  if (n.outcome === ROLLOUT_OUTCOMES.not_started) return { status: 'NOT STARTED', detail: `its wave ${n.wave} never started` };
  return { status: n.status, detail: `${n.reason}: ${n.reason_detail}` };
}

/** A node as the `progress` query shows it: settled, or still reconciling. */
export type RolloutNodeProgress =
  | RolloutNodeOutcome
  | { node: string; outcome: typeof ROLLOUT_OUTCOMES.pending; workflow_id: string; handed_over_from: string[] };

export interface RolloutResult {
  generation: number;
  /** Each node's outcome; pending only for a rollout in waves that ended while the node was still on its way. */
  nodes: RolloutNodeProgress[];
  /** A rollout in waves: its waves, halts and rollback. */
  waves?: WavesProgress;
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
  /** A rollout in waves: its waves, the gate's verdict on each node, pauses, halts and rollback. */
  waves?: WavesProgress;
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
  rolloutGate: RolloutGateWorkflow;
  removal: RemovalWorkflow;
  fleet: FleetWorkflow;
}
