import { durationMs } from './duration';
import { decisionFingerprint } from './signals';
import type { BoundIntent } from '../contract/desired';
import type { AuthorizedAction, Decision, ExecutionEvidence, RecheckTrigger } from '../contract/ledger';
import type { ConvergenceStatus } from '../contract/vocabulary';

/*
 * The loop's own rules, apart from the judgement in decide.ts: when the next pass runs, how a
 * failed apply becomes evidence, and what is written to the ledger (the watch's are in watch.ts).
 * The workflow (src/workflows/reconcileNode.ts) only carries them out; the rules are tested by
 * table in test/unit/loop.test.ts.
 */

type Policy = BoundIntent['policy'];

/**
 * How long the loop waits for new evidence before the next pass, from the current decision's
 * recheck trigger (kubebuilder's getNextSchedule: time is an input).
 * - A trigger with `not_before` (a backoff TIMER, a resync, a stale snapshot the loop re-takes
 *   itself, an unanswered pass it re-probes) is honoured, but never later than resync_interval, except a RETRY's backoff, which
 *   is the retry budget's pacing and must not be cut short by the resync.
 * - Any other trigger waits for evidence (a signal, the watch) and re-observes at resync.
 */
export function nextWakeMs(decision: Decision | null, policy: Policy, nowMs: number): number {
  const resync = durationMs(policy.resync_interval);
  const notBefore = decision?.recheck_trigger.not_before;
  if (!notBefore) return resync;
  const cap = decision.convergence_status === 'RETRY' ? Number.MAX_SAFE_INTEGER : resync;
  return Math.max(0, Math.min(Date.parse(notBefore) - nowMs, cap));
}

/**
 * Whether the decision's wait is the resync, not a time it set itself (a backoff, a retake): a
 * decision without a time, or a CONVERGED one, whose time is the resync.
 */
export function waitsForResync(decision: Decision | null): boolean {
  return !decision?.recheck_trigger.not_before || decision.convergence_status === 'CONVERGED';
}

/**
 * Whether the timer for the wake at `wakeAtMs` is the resync: the decision waits for the resync
 * and the wake is not a hold's end (`holdEndsAtMs`, a time an operator set, which comes sooner).
 * Only a resync timer is kept for a later decision that sets no time of its own (keepsTimer).
 */
export function wakeIsResync(decision: Decision | null, wakeAtMs: number, holdEndsAtMs: number | null): boolean {
  return waitsForResync(decision) && wakeAtMs !== holdEndsAtMs;
}

/** The wake timer a loop has running: when it is due, and whether it was started for the resync. */
export interface RunningTimer {
  due_at_ms: number;
  resync: boolean;
}

/**
 * Whether the timer running serves as the next wake, at `wakeAtMs`, instead of a new one (patch
 * keep-wake-timer; a new one costs two history events, the old one's cancel and its own
 * start). It does when it fires at that wake: due at that very time (a CONVERGED decision took
 * the resync timer's time, see onResyncCadence; a note copied the last trigger). A resync timer also serves a decision that set no time (it waits for evidence and
 * re-observes at resync) when it is due no later. A time the decision set itself (a backoff, a
 * retake) gets a timer of its own, so it is never cut short.
 */
export function keepsTimer(running: RunningTimer, decision: Decision | null, wakeAtMs: number): boolean {
  if (running.due_at_ms === wakeAtMs) return true;
  return running.resync && !decision?.recheck_trigger.not_before && running.due_at_ms <= wakeAtMs;
}

/**
 * A CONVERGED decision's recheck is the loop's resync. Where a resync timer already runs (patch
 * keep-wake-timer), due at `resyncAt`, that time is the decision's not_before: the resync is a
 * cadence, resync_interval after the last resync rather than after every pass, and the ledger
 * says when the loop looks next. Any other decision, or a timer due past the interval, keeps its
 * trigger as it is.
 */
export function onResyncCadence(
  trigger: RecheckTrigger,
  status: ConvergenceStatus,
  resyncAt: string | null | undefined,
  now: string,
): RecheckTrigger {
  const notBefore = trigger.not_before;
  if (status !== 'CONVERGED' || !notBefore || !resyncAt) return trigger;
  const at = Date.parse(resyncAt);
  if (!(at > Date.parse(now) && at <= Date.parse(notBefore))) return trigger;
  return { ...trigger, not_before: new Date(at).toISOString() };
}

/**
 * Why an apply did not answer with evidence, as the workflow saw it. A refusal is the agent's
 * typed "no" (a failure type listed in REFUSALS); anything else (a crash, a timeout, the node
 * away) is a failure to act.
 */
export type ApplyFailure = { kind: 'refused'; refusal_type: string; message: string } | { kind: 'failed'; detail: string };

/** The evidence a pass records for an apply that failed or was refused. */
export function evidenceOfFailure(action: AuthorizedAction, failure: ApplyFailure, at: string): ExecutionEvidence {
  const refusal = failure.kind === 'refused' ? `${failure.refusal_type}: ${failure.message}` : null;
  return {
    ...evidenceBase(action, at),
    outcome: failure.kind,
    detail: failure.kind === 'refused' ? `${failure.refusal_type}: ${failure.message}` : failure.detail,
    refusal,
    refusal_type: failure.kind === 'refused' ? failure.refusal_type : null,
  };
}

/**
 * The evidence for an action the pass did not attempt, because an earlier one in the same batch
 * failed or was refused: later actions may depend on it (a service on its release), and the fresh
 * probe that follows judges what is left.
 */
export function evidenceOfSkip(action: AuthorizedAction, stoppedBy: ExecutionEvidence, at: string): ExecutionEvidence {
  return {
    ...evidenceBase(action, at),
    outcome: 'skipped',
    detail: `skipped: ${stoppedBy.resource_key} ${stoppedBy.outcome} before it`,
    refusal: null,
  };
}

function evidenceBase(action: AuthorizedAction, at: string) {
  return {
    resource_key: action.resource_key,
    action: action.action,
    idempotency_key: action.idempotency_key,
    executed_at: at,
    marker_after: null,
  };
}

/** A pass judged a snapshot; a note (signal handled, hand-over) did not and is always written. */
export type RecordKind = 'pass' | 'note';

/**
 * What is written to the ledger: every note, every pass that acted, and a pass whose decision
 * differs from the last written one (decisionFingerprint). A steady pass writes nothing and
 * upserts nothing: status churn is a defect, and history stays bounded.
 */
export function shouldWrite(
  decision: Decision,
  kind: RecordKind,
  lastFingerprint: string | null,
): { write: boolean; fingerprint: string } {
  const fingerprint = decisionFingerprint(decision);
  const acted = decision.execution_evidence.length > 0;
  return { write: kind === 'note' || acted || fingerprint !== lastFingerprint, fingerprint };
}

/**
 * When a decision last verified the node: the snapshot's time for a fresh pre-action snapshot,
 * the moment of deciding for a fresh post-action probe (taken after acting, so newer than
 * observed_at of the plan), unchanged when the decision verified nothing.
 */
export function verifiedAt(decision: Decision, decidedAt: string, previous: string | null): string | null {
  if (!decision.observation_fresh || !decision.observed_at) return previous;
  return decision.post_action_observation ? decidedAt : decision.observed_at;
}
