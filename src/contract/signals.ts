/*
 * Signals and queries of reconcileNode and rollout. Each signal's payload is written once, as a
 * zod schema; its TypeScript type and the signal definition are derived from it, so the CLI,
 * the workflow and src/domain's validation cannot disagree on the shape.
 *
 * The definitions are the plain objects `defineSignal`/`defineQuery` return (`{type, name}`),
 * built here without @temporalio/workflow so that importing the contract never loads the
 * workflow sandbox's code; client `handle.signal/query` and workflow `setHandler` take them.
 */
import type { QueryDefinition, SignalDefinition, UpdateDefinition } from '@temporalio/common';
import { z } from 'zod';
import type { Condition, Decision, LedgerEntry, RecheckTrigger } from './ledger';
import type { ConvergenceStatus, Mode, Reason } from './vocabulary';
import { withFix } from './fix';
import { DESIRED_DIGEST, resourceKey } from './identifiers';
import type { RolloutProgress } from './workflows';

// ---------------------------------------------------------------------------------------------
// Signal payloads. A malformed signal is never half-applied: src/domain/signals.ts validates
// it with these schemas, records it and raises INVALID_SIGNAL, and the loop goes on.

/**
 * Caps on every signal payload, checked (iteratively, src/domain/bounds.ts) before zod, canonical
 * JSON or the rejection's echo touch it: each of those recurses, and a payload nested ~4,000
 * levels deep (~8 KB) would overflow the workflow's stack on every replay. The three payloads are
 * flat objects, so the caps leave room and still bound what a signal can put in the ledger.
 * docs/architecture.md §3 "Input caps".
 */
export const MAX_SIGNAL_DEPTH = 4;
/** Characters of the payload's JSON form. */
export const MAX_SIGNAL_CHARS = 16_384;
/** The characters of a rejected payload echoed into the error (and so the ledger and INVALID_SIGNAL). */
export const MAX_SIGNAL_ECHO = 200;

export const refreshDesiredPayload = z.strictObject({
  generation: z
    .number({ error: withFix('must be a whole number', 'send {"generation": <G>, "digest": "sha256:…"}') })
    .int()
    .min(1),
  digest: z
    .string({
      error: withFix('is missing', 'send the desired_digest the authority shows for that generation (datum refresh does this)'),
    })
    .regex(
      DESIRED_DIGEST,
      withFix(
        'must look like "sha256:<64 hex digits>"',
        'copy desired_digest from `datum describe` or let `datum refresh` send it',
      ),
    ),
});
export const resolveConflictPayload = z.strictObject({
  resource_key: resourceKey,
  resolution: z.enum(['retake', 'yield'], {
    error: withFix(
      'must be "retake" or "yield"',
      'retake to let Datum own the resource again, yield to leave it to the other writer',
    ),
  }),
  by: z
    .string({ error: withFix('is missing', 'say who resolves the conflict, such as "oncall"') })
    .min(1, withFix('is empty', 'say who resolves the conflict')),
  note: z.string().nullable().optional(),
});
export const recheckPayload = z.union([z.strictObject({}), z.null(), z.undefined()]);

export type RefreshDesiredPayload = z.infer<typeof refreshDesiredPayload>;
export type ResolveConflictPayload = z.infer<typeof resolveConflictPayload>;
export type RecheckPayload = z.infer<typeof recheckPayload>;

/** Each signal's name and payload schema: the one table the definitions below are built from. */
export const SIGNAL_SCHEMAS = {
  refreshDesired: refreshDesiredPayload,
  resolveConflict: resolveConflictPayload,
  recheck: recheckPayload,
} as const;
export type SignalName = keyof typeof SIGNAL_SCHEMAS;
export type SignalPayload<N extends SignalName> = z.infer<(typeof SIGNAL_SCHEMAS)[N]>;

// The brand fields of SignalDefinition/QueryDefinition exist only at the type level (the SDK's
// own defineSignal casts the same way).
const signal = <N extends SignalName>(name: N) => ({ type: 'signal', name }) as SignalDefinition<[SignalPayload<N>], N>;
const query = <Ret, Name extends string>(name: Name) => ({ type: 'query', name }) as QueryDefinition<Ret, [], Name>;

export const refreshDesiredSignal = signal('refreshDesired');
export const resolveConflictSignal = signal('resolveConflict');
/** `recheck` takes `{}` or nothing at all (`temporal workflow signal --name recheck`). */
export const recheckSignal = { type: 'signal', name: 'recheck' } as SignalDefinition<[RecheckPayload?], 'recheck'>;

// ---------------------------------------------------------------------------------------------
// Updates: resolveConflict and refreshDesired also as Temporal Updates, with the signals' names
// and payloads. An Update's validator rejects a bad payload before anything is recorded (the
// caller gets the reason); an accepted one returns once the loop has recorded its decision in
// the ledger (and handed it to the store), so `datum resolve`/`datum refresh` can print it.

/** What the loop made of an operator's Update. */
export interface OperatorUpdateResult {
  /** The ledger entry recorded for it; null when the decision repeated the last recorded one. */
  entry: LedgerEntry | null;
  /** The decision itself (what `entry` records, or the repeat that was not written). */
  decision: Decision;
  /** The loop that owns the node now, when this refreshDesired handed over to a newer generation. */
  handed_over_to: string | null;
}

type UpdateName = Extract<SignalName, 'resolveConflict' | 'refreshDesired'>;
const update = <N extends UpdateName>(name: N) =>
  ({ type: 'update', name }) as UpdateDefinition<OperatorUpdateResult, [SignalPayload<N>], N>;

export const resolveConflictUpdate = update('resolveConflict');
export const refreshDesiredUpdate = update('refreshDesired');

// ---------------------------------------------------------------------------------------------
// Queries

/** reconcileNode's `state` query (docs/architecture.md §3 "Signals and queries"). */
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

/** All ledger entries of this run chain (the tail kept across continue-as-new included). */
export const ledgerQuery = query<LedgerEntry[], 'ledger'>('ledger');
export const stateQuery = query<NodeState, 'state'>('state');
/** The rollout's per-node view so far (settled nodes carry their status). */
export const rolloutProgressQuery = query<RolloutProgress, 'progress'>('progress');
