import { z } from 'zod';
import type { DesiredProvenance } from '../contract/desired';
import type {
  AuthorizedAction,
  BackoffRecord,
  Condition,
  Decision,
  ExecutionEvidence,
  LedgerEntry,
  OperatorResolution,
  PlannedAction,
  RecheckTrigger,
  ResourceEntry,
} from '../contract/ledger';
import { LEDGER_VERSION } from '../contract/ledger';
import {
  CONDITION_TYPES,
  EXECUTION_OUTCOMES,
  MODES,
  OWNERSHIPS,
  REASONS,
  RECHECK_TRIGGERS,
  RESOLVERS,
  RESOURCE_TYPES,
  STATUSES,
} from '../contract/vocabulary';
import { exactly, jsonValue } from './base';
import { fenceReset, operatorDecision, writerEvidence } from './observation';

/*
 * A decision and its ledger entry as zod schemas (src/contract/ledger.ts has the types, and what
 * each field means). The ledger store validates every entry with \`ledgerEntry\` before it keeps
 * it and when it reads one back; the agent validates the actions it is sent and the evidence it
 * answers. A field added to a stored format is optional here, so older entries still read.
 */

export const recheckTrigger = exactly<RecheckTrigger>()(
  z.object({
    trigger: z.enum(RECHECK_TRIGGERS),
    not_before: z.string().nullable().default(null),
    detail: z.string(),
  }),
);

export const condition = exactly<Condition>()(
  z.object({
    type: z.enum(CONDITION_TYPES),
    resource_key: z.string().nullable(),
    since: z.string(),
    message: z.string(),
    evidence: jsonValue,
    tried: z.array(z.string()),
    resolver: z.enum(RESOLVERS),
    needs_judgement: z.boolean(),
  }),
);

export const authorizedAction = exactly<AuthorizedAction>()(
  z.object({
    resource_key: z.string(),
    action: z.string(),
    desired_generation: z.number().int(),
    desired_digest: z.string(),
    idempotency_key: z.string(),
    /** The marker the plan was made against; with action_seq it tells a replay from a new attempt. */
    observed_marker: z.string().nullable(),
    action_seq: z.number().int(),
    spec: jsonValue,
    /**
     * When the snapshot the plan was made from was taken, and the TTL it was judged against: the
     * agent refuses the write once that snapshot is older than the TTL (StaleSnapshotRefusal).
     * Optional so ledger entries written before they existed stay valid; the agent refuses an
     * action without them, since a snapshot of unknown age never drives a write.
     */
    observed_at: z.string().nullable().optional(),
    observation_ttl: z.string().nullable().optional(),
    /**
     * The digest of the resource spec the action carries out (specDigest): the agent refuses it while
     * a yield or an open conflict stands for the same spec on its target. Optional: older entries lack it.
     */
    spec_digest: z.string().nullable().optional(),
  }),
);

export const executionEvidence = exactly<ExecutionEvidence>()(
  z.object({
    resource_key: z.string(),
    action: z.string(),
    idempotency_key: z.string(),
    /** skipped: not attempted, because an earlier action of the same batch failed or was refused. */
    outcome: z.enum(EXECUTION_OUTCOMES),
    executed_at: z.string(),
    /** The change marker our own write left; null when nothing was written. */
    marker_after: z.string().nullable(),
    detail: z.string(),
    refusal: z.string().nullable().default(null),
    /** The refusal's failure type (REFUSALS), so the judgement reads a type, not the sentence. Optional: older entries lack it. */
    refusal_type: z.string().nullable().optional(),
  }),
);

export const desiredProvenance = exactly<DesiredProvenance>()(
  z.object({
    source: z.string(),
    revision: z.string(),
    author: z.string().nullable().default(null),
    loaded_at: z.string(),
  }),
);

export const resourceEntry = exactly<ResourceEntry>()(
  z.object({
    resource_key: z.string(),
    type: z.enum(RESOURCE_TYPES).nullable(),
    ownership: z.enum(OWNERSHIPS),
    ownership_provenance: jsonValue,
    desired: jsonValue,
    observed: jsonValue,
    drift: z.boolean(),
    effective_mode: z.enum(MODES),
    idempotency_key: z.string().nullable(),
  }),
);

export const plannedAction = exactly<PlannedAction>()(
  authorizedAction.extend({
    destructive: z.boolean(),
    authorized: z.boolean(),
    /** Why a planned action is not authorized (observe mode, destructive, budget, …); null when it is. */
    withheld_because: z.string().nullable(),
  }),
);

export const backoffRecord = exactly<BackoffRecord>()(
  z.object({
    initial: z.string(),
    factor: z.number(),
    max: z.string(),
    next_delay: z.string().nullable(),
  }),
);

/**
 * An operator's resolveConflict as the ledger records it on the note that acknowledges it: the
 * yield the agent is told to keep, or the retake that ends the target's decision, for the key's
 * spec at the time. The ledger store's copy of the decisions follows it (src/activities/ledger-store/decisions.ts).
 */
export const operatorResolution = exactly<OperatorResolution>()(operatorDecision.extend({ kind: z.enum(['yield', 'retake']) }));

export const decision = exactly<Decision>()(
  z.object({
    node_id: z.string(),
    desired_generation: z.number().int(),
    desired_digest: z.string(),
    desired_provenance: desiredProvenance.nullable(),
    observed_at: z.string().nullable(),
    observation_ttl: z.string(),
    observation_fresh: z.boolean(),
    mode: z.enum(MODES).nullable(),
    resources: z.array(resourceEntry),
    operator_exceptions: z.array(
      z.object({ resource_key: z.string(), provenance: jsonValue, desired: jsonValue, observed: jsonValue }),
    ),
    planned_actions: z.array(plannedAction),
    authorized_actions: z.array(authorizedAction),
    execution_evidence: z.array(executionEvidence),
    attempt_count: z.number().int(),
    retry_budget: z.number().int(),
    backoff: backoffRecord,
    post_action_observation: jsonValue,
    conflicting_writer_evidence: z.array(z.object({ resource_key: z.string(), sequence: z.array(writerEvidence) })).nullable(),
    convergence_status: z.enum(STATUSES),
    reason: z.enum(REASONS),
    reason_detail: z.string(),
    recheck_trigger: recheckTrigger,
    conditions: z.array(condition),
    /**
     * The operator decisions (yields, open conflicts) this loop holds for the node's current keys:
     * the ledger store's durable copy of them. Optional: older entries lack it.
     */
    operator_decisions: z.array(operatorDecision).optional(),
    /** Decisions not carried because the key's spec changed since: new intent, a new episode. */
    new_intent: z
      .array(operatorDecision.extend({ spec_digest_now: z.string(), value_digest_now: z.string().nullable().optional() }))
      .optional(),
    /** On the note of a resolveConflict: what it told the agent to keep or end. Optional: older notes lack it. */
    operator_resolution: operatorResolution.optional(),
    /** On the note of an operator decision: proven by the key the host checked, or declared only. */
    author: z
      .discriminatedUnion('proof', [
        z.strictObject({ proof: z.literal('proven'), by: z.string(), key: z.string(), key_comment: z.string() }),
        z.strictObject({ proof: z.literal('declared'), by: z.string(), identity: z.string().nullable() }),
      ])
      .optional(),
    /** On the note of a work item's resolution (docs/work-items.md). Optional: other entries have none. */
    work_resolution: z
      .object({
        item_id: z.string(),
        condition: z.enum(CONDITION_TYPES),
        resource_key: z.string().nullable(),
        resolution: z.string(),
        attempts: z.number().int().nullable(),
        by: z.string(),
        identity: z.string().nullable(),
        note: z.string().nullable(),
      })
      .optional(),
    /** On the notes an operator's signal or Update wrote: who asked, declared and as Temporal recorded it. */
    requester: z
      .object({
        request: z.enum(['resolveConflict', 'refreshDesired', 'recheck', 'hold', 'unhold']),
        via: z.enum(['signal', 'update']),
        by: z.string().nullable(),
        identity: z.string().nullable(),
      })
      .optional(),
    /** The repair episode this decision belongs to, where policy.repair_deadline is set. */
    repair_episode: z.object({ started_at: z.string(), repair_deadline: z.string() }).optional(),
    /** The last reset of the node's fence the agent reported with the snapshot. Optional: others have none. */
    fence_reset: fenceReset.optional(),
    /** On every entry while the node is held (`datum hold`). Optional: others have none. */
    hold: z
      .object({
        by: z.string(),
        reason: z.string(),
        since: z.string(),
        until: z.string().nullable(),
        identity: z.string().nullable(),
      })
      .optional(),
  }),
);

export const ledgerEntry = exactly<LedgerEntry>()(
  decision.extend({
    ledger_version: z.literal(LEDGER_VERSION),
    seq: z.number().int().min(1),
    decided_at: z.string(),
    workflow_id: z.string(),
  }),
);
