/*
 * Work items (docs/work-items.md): a condition that needs judgement is handed over as work, a
 * workflow of its own per condition episode, which a resolver (a person with `datum work`, or a
 * program behind `datum work serve --exec`) claims and resolves by Update. These are its names,
 * its wire types and its signal, Update and query definitions; the rules are src/domain/work-*.ts.
 *
 * Plain types only: the payloads are checked by the domain's guards (parseClaim, parseResolve),
 * with no schema library, so the work item's workflow code loads none.
 *
 * A planned removal's plan and result are in removal.ts.
 */
import type { QueryDefinition, SignalDefinition, UpdateDefinition } from '@temporalio/common';
import { DatumConditions, DatumNode, DatumStatus, WORKFLOW_TYPES } from './names';
import type { Json } from './json';
import type { Condition, LedgerEntry } from './ledger';
import type { ConditionType, ConvergenceStatus, Mode, Ownership, Reason } from './vocabulary';
import type { FleetConditionType } from './fleet';
import type { OperatorSignature } from './trust';
import type { RemovalCause, RemovalPlan } from './removal';

/**
 * One id per node, condition type and resource, so an operator can guess it; each episode of
 * the condition is a new run of it (the previous one closed when an observation cleared it).
 */
export const workItemId = (node: string, condition: ConditionType | FleetConditionType, resourceKey: string | null) =>
  `datum-work/${node}/${condition}${resourceKey === null ? '' : `/${resourceKey}`}`;

/**
 * The conditions that open a work item: every type whose `needs_judgement` is true, a loop's
 * (src/domain/conditions.ts) or the fleet's (src/domain/fleet.ts).
 */
export type WorkCondition =
  | Extract<
      ConditionType,
      | 'INTENT_DIGEST_MISMATCH'
      | 'UNKNOWN_OWNERSHIP'
      | 'DESTRUCTIVE_REPAIR_REQUIRED'
      | 'RETRY_BUDGET_EXHAUSTED'
      | 'REPAIR_DEADLINE_EXCEEDED'
      | 'ACTION_REFUSED'
      | 'CONFLICTING_WRITER'
      | 'OBSERVED_DRIFT'
    >
  | Extract<FleetConditionType, 'NO_RUNNING_LOOP' | 'NO_DESIRED_STATE'>;

/**
 * The status and reason of a report from the fleet workflow's look: the fleet decides nothing
 * about a node (it is no loop), it only says which of its conditions the node has.
 */
export const FLEET_LOOK = 'FLEET_LOOK';
export type ReportStatus = ConvergenceStatus | typeof FLEET_LOOK;
export type ReportReason = Reason | typeof FLEET_LOOK;

/** A condition as a report carries it: a loop's, or the fleet's about the node. */
export type ReportedCondition = Omit<Condition, 'type'> & { type: ConditionType | FleetConditionType };

/**
 * Work that no loop's condition opens: a rollout halted at a failed gate, and a planned removal
 * (a resource dropped from desired state, a node decommissioned). Decisions about the loops,
 * made by the rollout and by these items, never by a branch inside reconcileNode.
 */
export const ITEM_KINDS = ['ROLLOUT_HALTED', 'PLANNED_REMOVAL'] as const;
export type ItemKind = (typeof ITEM_KINDS)[number];
/** What a work item is about: a loop's condition, or one of ITEM_KINDS. */
export type WorkKind = WorkCondition | ItemKind;

/** Every resolution any work item can take; which ones a given item allows is WORK_RULES's. */
export const RESOLUTION_KINDS = [
  'retake',
  'yield',
  'grant',
  'hold',
  'approve',
  'decline',
  'adopt',
  'leave',
  'retry',
  'rebind',
  'continue',
  'abort',
  'rollback',
] as const;
export type ResolutionKind = (typeof RESOLUTION_KINDS)[number];

/**
 * PLANNING: a planned removal whose plan the node's agent has not made yet. OPEN: waiting for a resolver. ESCALATED: open and unclaimed past the escalation time.
 * CLAIMED: a resolver holds the lease. AWAITING_OBSERVATION: resolved; the next fresh
 * observation closes it (or reopens it). HELD: resolved by a resolution that leaves the condition
 * standing (hold, decline): closes when an observation shows it cleared. CLOSED: the workflow ended.
 */
export const WORK_STATES = ['PLANNING', 'OPEN', 'ESCALATED', 'CLAIMED', 'AWAITING_OBSERVATION', 'HELD', 'CLOSED'] as const;
export type WorkState = (typeof WORK_STATES)[number];

/** Default lease of a claim, its cap, and how long an item may stay unclaimed before it escalates. */
export const WORK_LEASE_DEFAULT = '15m';
export const WORK_LEASE_MAX = '24h';
export const WORK_ESCALATE_AFTER_DEFAULT = '1h';

// ---------------------------------------------------------------------------------------------
// What the loop tells an item: one report per recorded pass.

/** A resource as the pass judged it: what a resolution may do to it depends on these. */
export interface ReportedResource {
  resource_key: string;
  ownership: Ownership;
  effective_mode: Mode;
  /** The desired state declares this key. */
  declared: boolean;
  /** agent.yaml entries that protect it (an override, a per-resource observe): a resolution never overrides them. */
  protected_by: string[];
}

/**
 * What one recorded decision of the loop found, sent to every work item of the node it concerns;
 * or what one look of the fleet workflow found about the node (`loop` is then the fleet's id).
 */
export interface PassReport {
  node: string;
  /** The reconcile loop's workflow id, or the fleet workflow's (the item forwards resolutions there). */
  loop: string;
  generation: number;
  digest: string;
  /** The ledger entry that records the decision. */
  ledger_seq: number;
  decided_at: string;
  /** A pass that judged a fresh observation: only such a report may close or reopen an item. */
  fresh: boolean;
  status: ReportStatus;
  reason: ReportReason;
  reason_detail: string;
  mode: Mode | null;
  retry_budget: number;
  /** The open conditions of the decision (of a fleet look: the fleet's conditions of the node). */
  conditions: ReportedCondition[];
  resources: ReportedResource[];
}

/** How the loop starts (or attaches to) an item: the first report, and the controller's escalation time. */
export interface WorkItemInput {
  node: string;
  condition: WorkCondition;
  resource_key: string | null;
  report: PassReport;
  escalate_after: string;
  /** Set only by continue-as-new. */
  carry?: WorkItem;
}

// ---------------------------------------------------------------------------------------------
// The item: what Datum knows, what may be done, and who holds it.

/** A resolution the item allows, what it does, and why it would be refused on this node now (null: it would not). */
export interface AllowedResolution {
  resolution: ResolutionKind;
  does: string;
  refused: string | null;
}

/** A ledger entry that led to the item, as the item shows it. */
export interface LedgerRef {
  /** Whose entry, where an item is about more than one node (a halted rollout). */
  node?: string;
  seq: number;
  decided_at: string;
  status: ReportStatus;
  reason: ReportReason;
  reason_detail: string;
}

/**
 * What a resolver judged (docs/work-items.md, "Episodes"): the item's run chain, when this episode
 * opened or last reopened, and a digest of the facts its condition is decided on (for another
 * writer, the values it writes). A claim records it and a resolution carries it: the item refuses
 * a resolution judged on another episode, or on facts that have changed since.
 */
export interface WorkEpisode {
  /** The first run id of the item's run chain: a new episode of the condition is a new chain. */
  run_id: string;
  opened_at: string;
  reopened: number;
  /** sha256 (16 hex) of the facts the resolution is about; null where the episode alone binds it. */
  facts: string | null;
}

export interface WorkClaim {
  by: string;
  /** The identity Temporal recorded for the claim's Update (the client's, such as 1234@host). */
  identity: string | null;
  at: string;
  until: string;
  /** The episode the claim covers (absent in claims from before episodes were kept). */
  episode?: WorkEpisode;
}

export interface WorkResolution {
  resolution: ResolutionKind;
  /** For grant: how many more attempts. */
  attempts: number | null;
  by: string;
  identity: string | null;
  note: string | null;
  at: string;
  /** The loop's ledger entry recording it (the loop's last seq, if that entry repeated the one before). */
  ledger_seq: number;
  loop: string;
  expects: 'cleared' | 'standing';
  /** Set when a fresh observation judged it: the condition cleared, or it did not (the item reopened). */
  outcome: 'cleared' | 'not cleared' | null;
}

export interface WorkItem {
  id: string;
  node: string;
  condition: WorkKind;
  resource_key: string | null;
  state: WorkState;
  /** When this episode opened (or last reopened): the escalation clock starts here. */
  opened_at: string;
  /** How many times a resolution did not clear the condition. */
  reopened: number;
  /** The condition as the last report showed it. */
  since: string;
  message: string;
  evidence: Json;
  tried: string[];
  /** Who may resolve it, as the condition says (operator, desired-state author). */
  resolver: Condition['resolver'];
  loop: string;
  target: { generation: number; digest: string };
  mode: Mode | null;
  retry_budget: number;
  resource: ReportedResource | null;
  allowed: AllowedResolution[];
  /** The ledger entries that led here, oldest first (the last few). */
  ledger: LedgerRef[];
  claim: WorkClaim | null;
  /** The current resolution, while it waits for an observation or holds. */
  resolution: WorkResolution | null;
  /** Every resolution given in this episode, the current one last. */
  resolutions: WorkResolution[];
  escalated_at: string | null;
  closed: { at: string; ledger_seq: number; detail: string } | null;
  /** The episode a resolution must be judged on now (absent in items from before episodes were kept). */
  episode?: WorkEpisode;
  /** Reports the item dropped because their loop did not confirm them (absent: none). */
  dropped_reports?: number;
  /** A planned removal: exactly what would be removed, and what was once approved. */
  removal?: RemovalPlan;
  /** A halted rollout: the wave, its failing nodes with their entries, what a rollback would write. */
  gate?: GateHalt;
}

// ---------------------------------------------------------------------------------------------
// What a work item hands over besides a loop's condition: a halted wave (a planned removal's
// plan and result are in removal.ts).

/** A rollout halted at a failed gate, as its work item shows it. */
export interface GateHalt {
  rollout: string;
  generation: number;
  /** The halted wave, from 0, and its name. */
  wave: number;
  wave_name: string;
  /** The wave's nodes that failed the gate, with why and their loop's latest entry. */
  failing: Array<{ node: string; state: string; why: string | null; workflow_id: string | null }>;
  /** The waves that have not started and will not unless the rollout continues. */
  later_waves: Array<{ name: string; nodes: string[] }>;
  /** Per node the rollout started: what a rollback would write, or why it cannot. */
  rollback: RollbackTarget[];
}

export type RollbackTarget =
  { node: string; content_of: number; digest: string; to_generation: number } | { node: string; error: string };

/** How a rollout starts its halted wave's work item. */
export interface GateItemInput {
  halt: GateHalt;
  /** The failing nodes' entries, as LedgerRefs of the item. */
  ledger: LedgerRef[];
  escalate_after: string;
  carry?: WorkItem;
}

/** How a planned removal's item starts: the node, and why. */
export interface RemovalItemInput {
  node: string;
  cause: RemovalCause;
  escalate_after: string;
  carry?: WorkItem;
}

/** A halted wave's item: the rollout's id in one segment (its slashes as dots), then the wave. */
export const gateItemId = (rollout: string, wave: number) =>
  `datum-work/${rollout.replace(/^datum-rollout\//, 'rollout.').replace(/\//g, '.')}/ROLLOUT_HALTED/wave-${wave + 1}`;

// ---------------------------------------------------------------------------------------------
// Payloads of the item's Updates: what a resolver sends.

export interface ClaimPayload {
  by: string;
  /** How long the claim holds unless renewed or resolved, such as "10m" (default WORK_LEASE_DEFAULT). */
  lease?: string;
}

export interface ReleasePayload {
  by: string;
}

export interface ResolvePayload {
  resolution: ResolutionKind;
  by: string;
  note?: string | null;
  /** grant only: how many more repair attempts (1 to the retry_budget). */
  attempts?: number;
  /**
   * The episode the resolver judged (the item's `episode`, as its claim or `datum work show` gave
   * it): refused when the item reopened, or its facts changed, since.
   */
  episode?: WorkEpisode;
  /**
   * An operator's signature over the statement of this decision (a retake, an approve): what a
   * host that requires signatures honours such a decision on (docs/security.md, "Operator signatures").
   */
  operator?: OperatorSignature | null;
}

/** What the loop is told to do for a resolution (its `resolveWork` Update). */
export interface LoopResolution {
  item_id: string;
  condition: WorkCondition;
  resource_key: string | null;
  resolution: ResolutionKind;
  attempts: number | null;
  by: string;
  identity: string | null;
  note: string | null;
  /** The resolver's operator signature, carried unopened to the node's agent. */
  operator?: OperatorSignature | null;
}

/** What the loop answers a `resolveWork`: the entry it recorded, and its last seq. */
export interface LoopResolutionResult {
  entry: LedgerEntry | null;
  seq: number;
}

/** What the item's resolve Update answers: the item after it, and the loop's ledger entry. */
export interface ResolveResult {
  item: WorkItem;
  entry: LedgerEntry | null;
}

// ---------------------------------------------------------------------------------------------
// Definitions: the plain objects defineSignal/defineUpdate/defineQuery return.

export const workReportSignal = { type: 'signal', name: 'report' } as SignalDefinition<[PassReport], 'report'>;
export const claimWorkUpdate = { type: 'update', name: 'claim' } as UpdateDefinition<WorkItem, [ClaimPayload], 'claim'>;
export const releaseWorkUpdate = { type: 'update', name: 'release' } as UpdateDefinition<WorkItem, [ReleasePayload], 'release'>;
export const resolveWorkUpdate = { type: 'update', name: 'resolve' } as UpdateDefinition<
  ResolveResult,
  [ResolvePayload],
  'resolve'
>;
export const workItemQuery = { type: 'query', name: 'item' } as QueryDefinition<WorkItem, [], 'item'>;
/** reconcileNode's Update that carries out a work item's resolution. */
export const loopResolveWorkUpdate = { type: 'update', name: 'resolveWork' } as UpdateDefinition<
  LoopResolutionResult,
  [LoopResolution],
  'resolveWork'
>;

/** What a reconcile loop remembers of the node's work items, carried across continue-as-new. */
export interface WorkMemory {
  /** Items the loop told and must tell again until a settled report has reached them. */
  known: string[];
  /**
   * The node's open items were looked up (visibility) by this run chain: a new chain, a new
   * generation's among them, finds the items an earlier loop opened before it tells any.
   */
  discovered: boolean;
}

/** Whether a report was confirmed by its source (the loop, or the ledger store), and why not. */
export type ReportCheck = { confirmed: true; source: 'loop' | 'ledger store' | 'fleet' } | { confirmed: false; why: string };

/** The loop's report to its node's work items, and what it asks of the controller. */
export interface WorkReportInput {
  report: PassReport;
  open: WorkTargetInput[];
  tell: string[];
  /** Also tell the node's open items (by visibility) that are neither opened nor told here. */
  discover: boolean;
}

export interface WorkFilter {
  nodes?: string[];
  conditions?: string[];
  states?: string[];
  /** Only the items loops open (workItem): the ones a loop reports to. */
  loopItems?: boolean;
}

/** The workflow types that hold work items. */
const ITEM_WORKFLOW_TYPES = [WORKFLOW_TYPES.workItem, WORKFLOW_TYPES.rolloutGate, WORKFLOW_TYPES.removal];

const quoted = (values: string[]) => values.map((v) => JSON.stringify(v)).join(', ');

/** The visibility query of open work items (`datum work list`, a loop finding its node's items); every value in it is a checked node name, condition type or state. */
export function workQuery(f: WorkFilter = {}): string {
  const types = f.loopItems ? [WORKFLOW_TYPES.workItem] : ITEM_WORKFLOW_TYPES;
  const where = [`WorkflowType IN (${quoted(types)})`, 'ExecutionStatus = "Running"'];
  if (f.nodes?.length) where.push(`${DatumNode.name} IN (${quoted(f.nodes)})`);
  if (f.conditions?.length) where.push(`${DatumConditions.name} IN (${quoted(f.conditions)})`);
  if (f.states?.length) where.push(`${DatumStatus.name} IN (${quoted(f.states)})`);
  return where.join(' AND ');
}

/** An item the loop's report opens: its id, condition and resource. */
export interface WorkTargetInput {
  id: string;
  condition: WorkCondition;
  resource_key: string | null;
}

export type WorkItemWorkflow = (input: WorkItemInput) => Promise<WorkItem>;
export type RolloutGateWorkflow = (input: GateItemInput) => Promise<WorkItem>;
export type RemovalWorkflow = (input: RemovalItemInput) => Promise<WorkItem>;
