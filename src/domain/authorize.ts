import { withheldBecause, type WithheldCause } from './causes';
import { deadlinePassed, type EpisodeClock } from './deadline';
import type { Assessment } from './classify';
import { resourceConcerns, type Judgement } from './evidence';
import { dependenciesOf, planItems, type PlanItem } from './plan';
import { sameMarker } from './markers';
import { withRepeatedDrift } from './repeated-drift';
import { intentSignature } from './desired';
import { standingRefusals, trackConflicts, noFindings, type StageInput } from './writers';
import type { Classified } from './verdict';
import type { History } from '../contract/history';
import type { AuthorizedAction, PlannedAction } from '../contract/ledger';

/** A planned action and why it is withheld (null: authorized). */
export interface Authorization {
  action: PlannedAction;
  assessment: Assessment;
  cause: WithheldCause | null;
}

/**
 * Stage 3, before acting: judge the pre-action snapshot and authorize what may run. The plan is
 * the same in observe and enforce; authorization is the only difference, and every withheld
 * action says why.
 */
export function authorize(pre: Classified, input: StageInput): Judgement {
  const { intent, history, carried } = input;
  // A flip within conflict_window, then repeated drift slower than it: both are another writer.
  const writers = withRepeatedDrift(
    trackConflicts(history, pre, input.now, intent.policy.conflict_window, noFindings()),
    pre,
    input,
  );
  const refused = standingRefusals(history.refused, pre, [], input.rules, intentSignature(intent));
  const next: History = { ...carried, repaired: writers.repaired, conflicts: writers.conflicts, refused };
  const authorizations = authorizePlan(
    planItems(intent, pre.assessments, history.action_seq + 1, pre.observation.observed_at),
    pre,
    next,
    writers.blocking,
    intent.policy.retry_budget,
    deadlinePassed(input),
  );
  const planned = authorizations.map(toPlanned);
  const authorized = planned.filter((p) => p.authorized);
  const withheldFor = (kind: WithheldCause['kind']) =>
    authorizations.filter((x) => x.cause?.kind === kind).map((x) => x.action.resource_key);
  return {
    planned,
    authorized: authorized.map(toAuthorized),
    history: next,
    conflict_evidence: writers.evidence,
    evidence: {
      phase: 'pre',
      intent,
      now: input.now,
      history,
      judged: pre,
      acted: null,
      attempts: carried.attempt_count,
      conflicts: writers.conflicts,
      blocking: writers.blocking,
      refused,
      refused_now: [],
      stale_refused: [],
      refused_standing: withheldFor('refused'),
      ineffective: [],
      failed: [],
      budget_withheld: withheldFor('budget'),
      deadline_withheld: withheldFor('deadline'),
      authorized: authorized.map((p) => p.resource_key),
      drifted_meanwhile: [],
      executed: false,
      ...resourceConcerns(pre, planned, history.hold ?? null),
    },
  };
}

/**
 * Why each planned action is withheld, first cause first: destructive, observe mode, a hold, an
 * open conflict, a standing refusal, a spent budget, a passed repair_deadline; then a service whose
 * inputs cannot be repaired.
 */
export function authorizePlan(
  items: PlanItem[],
  snapshot: Classified,
  history: History,
  blocking: string[],
  budget: number,
  deadline: EpisodeClock | null = null,
): Authorization[] {
  const result: Authorization[] = items.map((item) => ({
    ...item,
    cause: withheldCause(item, history, blocking, budget) ?? deadlineCause(deadline),
  }));
  const planned = new Map(result.map((x) => [x.action.resource_key, x]));
  // A service restart cannot help while what it loads is drifted and not being repaired. In plan
  // order (services last), so the authorization of what a service loads is already settled.
  for (const x of result) {
    const spec = x.assessment.spec;
    if (x.cause !== null || !spec) continue;
    const stuck = dependenciesOf(spec).filter((dep) => {
      const d = snapshot.byKey.get(dep);
      // An operator-owned dependency is taken as it is (classify): only managed drift holds a service back.
      return d?.ownership === 'MANAGED' && d.drift && planned.get(dep)?.cause !== null;
    });
    if (stuck.length > 0) x.cause = { kind: 'dependency', on: stuck };
  }
  return result;
}

function withheldCause(
  { action: p, assessment: a }: PlanItem,
  history: History,
  blocking: string[],
  budget: number,
): WithheldCause | null {
  const obstruction = a.observed?.obstruction ?? null;
  if (obstruction !== null) return { kind: 'destructive', obstruction };
  if (a.effective_mode === 'observe') return { kind: 'observe' };
  // A hold is placed between passes and ends between passes: the pass that holds it acts on nothing.
  if (history.hold) return { kind: 'held', hold: history.hold };
  if (blocking.length > 0) return { kind: 'conflict', writers: blocking };
  const r = history.refused[p.resource_key];
  if (r && r.idempotency_key === p.idempotency_key && sameMarker(r.marker, p.observed_marker) && r.mode === a.effective_mode)
    return { kind: 'refused', refusal: r.refusal };
  if (history.attempt_count >= budget) return { kind: 'budget', attempts: history.attempt_count };
  return null;
}

function deadlineCause(clock: EpisodeClock | null): WithheldCause | null {
  return clock ? { kind: 'deadline', deadline: clock.repair_deadline, started_at: clock.started_at } : null;
}

/** The ledger's planned action: the cause becomes its sentence. */
function toPlanned(x: Authorization): PlannedAction {
  return { ...x.action, authorized: x.cause === null, withheld_because: x.cause === null ? null : withheldBecause(x.cause) };
}

export function toAuthorized(p: PlannedAction): AuthorizedAction {
  return {
    resource_key: p.resource_key,
    action: p.action,
    desired_generation: p.desired_generation,
    desired_digest: p.desired_digest,
    idempotency_key: p.idempotency_key,
    observed_marker: p.observed_marker,
    action_seq: p.action_seq,
    spec: p.spec,
    // What the plan saw, checked by the agent at the moment of the write (freshness, compare-and-swap).
    observed_at: p.observed_at ?? null,
    observation_ttl: p.observation_ttl ?? null,
    spec_digest: p.spec_digest ?? null,
  };
}
