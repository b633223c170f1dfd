/*
 * Signals and queries of reconcileNode and rollout. Each signal's payload is a plain type here,
 * with the check the workflow and the CLI judge it by (SIGNAL_CHECKS): small, deterministic code
 * that runs in the workflow sandbox on every replay. Its zod schema (src/schemas/signals.ts, for
 * the edges) parses to exactly the same type, and test/unit/guards.test.ts keeps the two in
 * agreement on generated payloads, valid and invalid.
 *
 * The definitions are the plain objects `defineSignal`/`defineQuery` return (`{type, name}`),
 * built here without @temporalio/workflow so that importing the contract never loads the
 * workflow sandbox's code; client `handle.signal/query` and workflow `setHandler` take them.
 */
import type { QueryDefinition, SignalDefinition, UpdateDefinition } from '@temporalio/common';
import type { Problem } from './fix';
import { DESIRED_DIGEST, RESOURCE_KEY_RULE, isResourceKey } from './identifiers';
import type { Condition, Decision, LedgerEntry, RecheckTrigger } from './ledger';
import { RESOLUTIONS, type ConvergenceStatus, type Mode, type Reason, type Resolution } from './vocabulary';
import type { PassCount, RolloutProgress } from './workflows';
import type { NodeHold } from './ledger';
import { OPERATOR_SIGNATURE_FIX, operatorSignatureProblem, type OperatorSignature } from './trust';

// ---------------------------------------------------------------------------------------------
// Signal payloads. A malformed signal is never half-applied: src/domain/signals.ts checks it
// with SIGNAL_CHECKS, records it and raises INVALID_SIGNAL, and the loop goes on.

/**
 * Caps on every signal payload, checked (iteratively, src/domain/bounds.ts) before the check,
 * canonical JSON or the rejection's echo touch it: those recurse, and a payload nested ~4,000
 * levels deep (~8 KB) would overflow the workflow's stack on every replay. The three payloads
 * are flat objects, so the caps leave room and still bound what a signal can put in the ledger.
 * docs/architecture.md §3 "Input caps".
 */
export const MAX_SIGNAL_DEPTH = 4;
/** Characters of the payload's JSON form. */
export const MAX_SIGNAL_CHARS = 16_384;
/** The characters of a rejected payload echoed into the error (and so the ledger and INVALID_SIGNAL). */
export const MAX_SIGNAL_ECHO = 200;

/** refreshDesired: bind the generation and digest the authority holds now (`datum refresh`). */
export type RefreshDesiredPayload = { generation: number; digest: string };
/** resolveConflict: an operator's answer to an open conflict on one resource (`datum resolve`). */
export type ResolveConflictPayload = {
  resource_key: string;
  resolution: Resolution;
  by: string;
  note?: string | null;
  /** A retake's operator signature, which the node's agent verifies where its host requires one. */
  operator?: OperatorSignature | null;
};
/** recheck: `{}` or nothing at all (`temporal workflow signal --name recheck`). */
export type RecheckPayload = Record<string, never> | null | undefined;

/** Each signal's payload, by the signal's name. */
export interface SignalPayloads {
  refreshDesired: RefreshDesiredPayload;
  resolveConflict: ResolveConflictPayload;
  recheck: RecheckPayload;
}
export type SignalName = keyof SignalPayloads;
export type SignalPayload<N extends SignalName> = SignalPayloads[N];

/** The field a problem with the payload as a whole is reported under. */
export const PAYLOAD_FIELD = '(payload)';

const REFRESH_FIX = 'send {"generation": <G>, "digest": "sha256:…"}';
const DIGEST_FIX = 'send the desired_digest the authority shows for that generation (datum refresh does this)';
const RESOURCE_FIX = 'name the resource whose conflict this resolves (`datum describe` lists the open ones)';
const RESOLUTION_FIX = 'retake to let Datum own the resource again, yield to leave it to the other writer';
const BY_FIX = 'say who resolves the conflict, such as "oncall"';

const isFields = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const at = (field: string, problem: string, fix: string): Problem => ({ field, problem, fix });

/** Fields a payload has that its signal does not take (reported after the fields it does take). */
function unknownFields(payload: Record<string, unknown>, known: readonly string[]): Problem[] {
  const extra = Object.keys(payload).filter((key) => !known.includes(key));
  if (extra.length === 0) return [];
  const names = extra.map((key) => `"${key}"`).join(', ');
  return [at(PAYLOAD_FIELD, `has unknown field${extra.length > 1 ? 's' : ''} ${names}`, 'remove it or correct its spelling')];
}

/** A text field's problem (absent, not text, or what `check` finds in the text), or null. */
function textProblem(
  field: string,
  value: unknown,
  fix: string,
  check: (text: string) => Problem | null = () => null,
): Problem[] {
  if (value === undefined) return [at(field, 'is missing', fix)];
  if (typeof value !== 'string') return [at(field, 'must be a string', fix)];
  const found = check(value);
  return found ? [found] : [];
}

function checkRefreshDesired(payload: unknown): Problem[] {
  if (!isFields(payload)) return [at(PAYLOAD_FIELD, payload === undefined ? 'is missing' : 'must be an object', REFRESH_FIX)];
  const { generation, digest } = payload;
  const problems: Problem[] = [];
  if (generation === undefined) problems.push(at('generation', 'is missing', REFRESH_FIX));
  else if (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 1)
    problems.push(at('generation', 'must be a whole number of 1 or more', REFRESH_FIX));
  problems.push(
    ...textProblem('digest', digest, DIGEST_FIX, (d) =>
      DESIRED_DIGEST.test(d)
        ? null
        : at(
            'digest',
            'must look like "sha256:<64 hex digits>"',
            'copy desired_digest from `datum describe` or let `datum refresh` send it',
          ),
    ),
  );
  return [...problems, ...unknownFields(payload, ['generation', 'digest'])];
}

function checkResolveConflict(payload: unknown): Problem[] {
  const shape = 'send {"resource_key": "<key>", "resolution": "retake" | "yield", "by": "<who>"}';
  if (!isFields(payload)) return [at(PAYLOAD_FIELD, payload === undefined ? 'is missing' : 'must be an object', shape)];
  const { resource_key, resolution, by, note, operator } = payload;
  const problems = [
    ...textProblem('resource_key', resource_key, RESOURCE_FIX, (key) =>
      isResourceKey(key) ? null : at('resource_key', RESOURCE_KEY_RULE.problem, RESOURCE_KEY_RULE.fix),
    ),
    ...((RESOLUTIONS as readonly unknown[]).includes(resolution)
      ? []
      : [at('resolution', 'must be "retake" or "yield"', RESOLUTION_FIX)]),
    ...textProblem('by', by, BY_FIX, (who) => (who === '' ? at('by', 'is empty', 'say who resolves the conflict') : null)),
  ];
  if (note !== undefined && note !== null && typeof note !== 'string')
    problems.push(at('note', 'must be a string or null', 'write the note as text, or leave it out'));
  const signed = operatorSignatureProblem(operator);
  if (signed) problems.push(at('operator', signed, OPERATOR_SIGNATURE_FIX));
  return [...problems, ...unknownFields(payload, ['resource_key', 'resolution', 'by', 'note', 'operator'])];
}

function checkRecheck(payload: unknown): Problem[] {
  if (payload === undefined || payload === null) return [];
  if (!isFields(payload)) return [at(PAYLOAD_FIELD, 'must be {} or nothing', 'send {} or no payload at all')];
  return unknownFields(payload, []);
}

/**
 * Each signal's check: the problems of a payload, none when it is valid. Deterministic and
 * without recursion (a payload is flat), so it runs inside the workflow on every replay; the caps
 * above are checked before it.
 */
export const SIGNAL_CHECKS: { readonly [N in SignalName]: (payload: unknown) => Problem[] } = {
  refreshDesired: checkRefreshDesired,
  resolveConflict: checkResolveConflict,
  recheck: checkRecheck,
};
export const SIGNAL_NAMES = Object.keys(SIGNAL_CHECKS) as SignalName[];

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

/**
 * `datum hold`: stop repairs on the node, keep observing and reporting, until `until` (ISO 8601)
 * or `datum unhold`. Checked by src/domain/holds.ts; answers with the HOLD_PLACED note.
 */
export interface HoldPayload {
  by: string;
  reason: string;
  until?: string | null;
}
/** `datum unhold`: end the hold; the pass that follows repairs. Answers with the HOLD_LIFTED note. */
export interface UnholdPayload {
  by: string;
  note?: string | null;
}
export const holdUpdate = { type: 'update', name: 'hold' } as UpdateDefinition<OperatorUpdateResult, [HoldPayload], 'hold'>;
export const unholdUpdate = { type: 'update', name: 'unhold' } as UpdateDefinition<
  OperatorUpdateResult,
  [UnholdPayload],
  'unhold'
>;

/**
 * `datum reconcile`: a pass now (as the `recheck` signal asks). Answers at once with the loop's
 * pass count: the first pass to start after it (`started + 1`) is the one that answers the
 * request, and `datum reconcile --wait` waits for `done` to reach it.
 */
export interface ReconcileAccepted {
  workflow_id: string;
  passes: PassCount;
  /** The last ledger seq at the request: the pass's entry, if it writes one, comes after it. */
  last_seq: number;
}
export const reconcileUpdate = { type: 'update', name: 'reconcile' } as UpdateDefinition<ReconcileAccepted, [], 'reconcile'>;

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
  /** The hold on the node, if any (absent from loops that began before holds). */
  hold?: NodeHold | null;
  /** The loop's passes (absent from loops of older releases). */
  passes?: PassCount;
  /**
   * Stale snapshots in a row up to the latest decision (0 once one was fresh): a rollout waits out
   * the loop's own early retakes (settlesRollout). Absent from loops of older releases.
   */
  stale_retakes?: number;
}

/** All ledger entries of this run chain (the tail kept across continue-as-new included). */
export const ledgerQuery = query<LedgerEntry[], 'ledger'>('ledger');
export const stateQuery = query<NodeState, 'state'>('state');
/** The rollout's per-node view so far (settled nodes carry their status). */
export const rolloutProgressQuery = query<RolloutProgress, 'progress'>('progress');

/**
 * A loop's word to the rollout that started it: it settled (or settled in another status). Only
 * a hint: the rollout reads the loop's state itself before it counts the node.
 */
export interface NodeSettledPayload {
  workflow_id: string;
}
export const nodeSettledSignal = { type: 'signal', name: 'nodeSettled' } as SignalDefinition<[NodeSettledPayload], 'nodeSettled'>;

/** `datum rollout pause|resume`: who asks, and why. */
export interface RolloutPausePayload {
  by: string;
  note?: string | null;
}

/**
 * A rollout in waves paused: it starts no node and no wave until resumed; the loops it started go
 * on. Each answers the rollout's progress after it. A rollout without waves takes neither.
 */
export const pauseRolloutUpdate = { type: 'update', name: 'pause' } as UpdateDefinition<
  RolloutProgress,
  [RolloutPausePayload],
  'pause'
>;
export const resumeRolloutUpdate = { type: 'update', name: 'resume' } as UpdateDefinition<
  RolloutProgress,
  [RolloutPausePayload],
  'resume'
>;
