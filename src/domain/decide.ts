import type { Json } from './canonical';
import { classify, type Assessment } from './classify';
import { carriedResourceConditions, draft, mergeConditions, type ConditionDraft } from './conditions';
import type { BoundIntent } from './desired';
import { addMs, durationMs, formatDuration, msBetween } from './duration';
import type { ConflictRecord, History } from './history';
import { dependenciesOf, idempotencyKey, plan } from './plan';
import { signalConditions } from './signals';
import type {
  AuthorizedAction,
  ConditionType,
  ConvergenceStatus,
  Decision,
  ExecutionEvidence,
  Observation,
  PlannedAction,
  Reason,
  RecheckTrigger,
  RecheckTriggerKind,
  WriterEvidence,
} from './schemas';

/** What the authority says right now (re-read before every decision that could act). */
export type AuthorityView = { ok: true; generation: number; digest: string } | { ok: false; error: string };

/** A pass that acted: what was planned and authorized, what the agent reported, from which snapshot. */
export interface ActedPass {
  planned: PlannedAction[];
  actions: AuthorizedAction[];
  evidence: ExecutionEvidence[];
  pre: Observation;
}

export interface DecideInput {
  intent: BoundIntent;
  authority: AuthorityView;
  /** The snapshot this decision is made from (after acting: the fresh post-action probe); null = no snapshot. */
  observation: Observation | null;
  /** Why there is no snapshot, when there is none. */
  unreachable?: string | null;
  history: History;
  now: string;
  acted?: ActedPass | null;
}

export interface DecideResult {
  decision: Decision;
  history: History;
}

/**
 * The one place where a pass's evidence becomes a status. Pure: the same input always gives
 * the same decision, and time is an input. Without `acted` it judges a pre-action snapshot and
 * authorizes the actions the workflow may run; with `acted` it judges the fresh post-action
 * probe. CONVERGED only ever comes from a fresh snapshot that matches every enforced MANAGED
 * resource; command success is recorded as execution evidence and nothing more.
 */
export function decide(input: DecideInput): DecideResult {
  const { intent, authority, observation, now, acted } = input;
  const history = input.history;
  const policy = intent.policy;
  const ttlMs = durationMs(policy.observation_ttl);
  const basis = acted ? acted.pre : observation;

  const evidence = acted?.evidence ?? [];
  const executed = evidence.filter((e) => e.outcome !== 'refused');
  const attempt_count = history.attempt_count + (executed.length > 0 ? 1 : 0);
  const action_seq = Math.max(history.action_seq, ...(acted?.actions ?? []).map((a) => a.action_seq));
  const carried: History = { ...history, attempt_count, action_seq };

  const frame = {
    node_id: intent.node,
    desired_generation: intent.generation,
    desired_digest: intent.digest,
    desired_provenance: intent.provenance,
    observed_at: basis?.observed_at ?? null,
    observation_ttl: policy.observation_ttl,
    observation_fresh: basis ? isFresh(basis, now, ttlMs) : false,
    mode: basis?.mode ?? null,
    execution_evidence: evidence,
    attempt_count,
    retry_budget: policy.retry_budget,
    post_action_observation: acted ? summarizePost(observation, intent, history) : null,
  };

  const gate = (
    status: ConvergenceStatus,
    reason: Reason,
    detail: string,
    trigger: RecheckTrigger,
    condition: ConditionType,
    conditionEvidence: Json,
    resources: Assessment[] = [],
  ): DecideResult => {
    const conditions = mergeConditions(history.conditions, [...carriedResourceConditions(history.conditions), draft(condition, null, detail, conditionEvidence), ...signalConditions(history)], now);
    const decision: Decision = {
      ...frame,
      resources: resources.map(toEntry(intent)),
      operator_exceptions: exceptions(resources),
      planned_actions: (acted?.planned ?? []).map((p) => ({ ...p })),
      authorized_actions: acted?.actions ?? [],
      backoff: backoffRecord(intent, null),
      conflicting_writer_evidence: null,
      convergence_status: status,
      reason,
      reason_detail: detail,
      recheck_trigger: trigger,
      conditions,
    };
    return { decision, history: { ...carried, conditions, last_status: status, last_reason: reason } };
  };

  // Gates, in the seed's order: reach the node, know the intent is current, then trust the snapshot.
  if (!observation) {
    const why = input.unreachable ?? 'the agent did not answer';
    return gate('BLOCKED', 'NODE_UNREACHABLE', `Node ${intent.node} is unreachable (${why}); nothing can be decided or repaired until it answers.`, trigger('FRESH_OBSERVATION', 'the node answers with a fresh snapshot'), 'NODE_UNREACHABLE', { error: why });
  }
  if (observation.config_error) {
    return gate('BLOCKED', 'AGENT_CONFIG_INVALID', `The agent's local config is invalid, so ownership and mode are unknown: ${observation.config_error}`, trigger('AGENT_CONFIG_CHANGE', "the node's agent.yaml is corrected"), 'AGENT_CONFIG_INVALID', { error: observation.config_error });
  }
  if (!authority.ok) {
    return gate('BLOCKED', 'INVALID_DESIRED_STATE', `The desired state for ${intent.node} can no longer be read or validated: ${authority.error}`, trigger('DESIRED_STATE_CHANGE', 'the desired-state file is fixed'), 'INVALID_DESIRED_STATE', { error: authority.error });
  }
  const resourcesForGate = classify(intent, basis ?? observation, history);
  if (authority.generation > intent.generation) {
    return gate(
      'BLOCKED',
      'STALE_INTENT',
      `This loop holds generation ${intent.generation} but the authority is at generation ${authority.generation}; no action until intent is refreshed.`,
      trigger('REFRESHED_INTENT', `refreshDesired or a rollout to generation ${authority.generation}`),
      'STALE_INTENT',
      { bound_generation: intent.generation, authority_generation: authority.generation, authority_digest: authority.digest },
      resourcesForGate,
    );
  }
  if (authority.generation < intent.generation) {
    return gate(
      'BLOCKED',
      'AUTHORITY_REGRESSED',
      `The authority went back to generation ${authority.generation} while this loop holds ${intent.generation}; no action until the authority is at ${intent.generation} again.`,
      trigger('DESIRED_STATE_CHANGE', `the authority declares generation ${intent.generation} or higher`),
      'STALE_INTENT',
      { bound_generation: intent.generation, authority_generation: authority.generation },
      resourcesForGate,
    );
  }
  if (authority.digest !== intent.digest) {
    return gate(
      'BLOCKED',
      'INTENT_DIGEST_MISMATCH',
      `Generation ${intent.generation} now has different content (digest ${short(authority.digest)}, bound ${short(intent.digest)}); raise the generation for a change of intent.`,
      trigger('DESIRED_STATE_CHANGE', 'a new generation number for the changed content, or the original content restored'),
      'INTENT_DIGEST_MISMATCH',
      { bound_digest: intent.digest, authority_digest: authority.digest },
      resourcesForGate,
    );
  }
  if (!isFresh(observation, now, ttlMs)) {
    const age = msBetween(observation.observed_at, now);
    return gate(
      'BLOCKED',
      'STALE_OBSERVATION',
      `The snapshot is ${formatDuration(Math.max(age, 0))} old, past observation_ttl ${policy.observation_ttl}; a heartbeat does not make it fresh, so nothing is acted on.`,
      // Datum can take that snapshot itself: soon, not at the next resync (which may be many
      // minutes away in watch mode), yet not back to back if every snapshot arrives stale.
      trigger('FRESH_OBSERVATION', `a snapshot younger than ${policy.observation_ttl}, which the loop takes in ${formatDuration(restaleMs(policy))}`, addMs(now, restaleMs(policy))),
      'STALE_OBSERVATION',
      { observed_at: observation.observed_at, heartbeat_at: observation.heartbeat_at, age: formatDuration(Math.max(age, 0)) },
      resourcesForGate,
    );
  }

  return evaluate(input, observation, carried, frame);
}

function evaluate(input: DecideInput, observation: Observation, carried: History, frame: Omit<Decision, FrameOmitted>): DecideResult {
  const { intent, now, acted } = input;
  const history = input.history;
  const policy = intent.policy;
  const windowMs = durationMs(policy.conflict_window);
  const assessments = classify(intent, observation, history);
  const byKey = new Map(assessments.map((a) => [a.resource_key, a]));
  const basisAssessments = acted ? classify(intent, acted.pre, history) : assessments;

  // Repairs older than conflict_window no longer make a flip a conflict: that is ordinary drift.
  const repaired: History['repaired'] = {};
  for (const [key, rec] of Object.entries(history.repaired)) if (msBetween(rec.at, now) <= windowMs) repaired[key] = rec;
  const conflicts: Record<string, ConflictRecord> = { ...history.conflicts };
  const refused: History['refused'] = { ...history.refused };
  const newConflicts: Record<string, WriterEvidence[]> = {};
  const ineffective: string[] = [];
  const failed: string[] = [];
  const refusedNow: string[] = [];
  const actedKeys = new Set((acted?.actions ?? []).map((a) => a.resource_key));

  // Judge each action against the fresh probe: took, did not take (probe 4), or overwritten.
  for (const ev of acted?.evidence ?? []) {
    const a = byKey.get(ev.resource_key);
    const action = acted!.actions.find((x) => x.resource_key === ev.resource_key);
    if (ev.outcome === 'refused') {
      refusedNow.push(ev.resource_key);
      const pre = acted!.pre;
      refused[ev.resource_key] = {
        idempotency_key: ev.idempotency_key,
        marker: action?.observed_marker ?? null,
        mode: effectiveMode(pre, ev.resource_key),
        refusal: ev.refusal ?? ev.detail,
        at: ev.executed_at,
      };
      continue;
    }
    if (ev.outcome === 'failed') {
      failed.push(ev.resource_key);
      continue;
    }
    if (!a || !a.drift) {
      if (a?.observed) repaired[ev.resource_key] = { at: observation.observed_at, value: a.observed.value, marker: a.observed.marker };
      continue;
    }
    const marker = a.observed?.marker ?? null;
    if (marker !== null && marker !== ev.marker_after) {
      newConflicts[ev.resource_key] = [
        { at: ev.executed_at, value: a.desired, marker: ev.marker_after, source: `datum ${ev.action}` },
        { at: observation.observed_at, value: a.observed?.value ?? null, marker, source: 'fresh observation after repair' },
      ];
    } else {
      ineffective.push(ev.resource_key);
    }
  }

  // A value our repair proved at desired that flips away within conflict_window: another writer.
  for (const [key, rec] of Object.entries(repaired)) {
    const a = byKey.get(key);
    if (actedKeys.has(key) || !a || a.ownership !== 'MANAGED' || !a.drift) continue;
    const marker = a.observed?.marker ?? null;
    if (marker !== null && marker !== rec.marker) {
      newConflicts[key] = [
        { at: rec.at, value: rec.value, marker: rec.marker, source: 'observation after repair' },
        { at: observation.observed_at, value: a.observed?.value ?? null, marker, source: 'fresh observation' },
      ];
    }
  }
  for (const [key, sequence] of Object.entries(newConflicts)) {
    const prior = conflicts[key];
    conflicts[key] = { since: prior?.since ?? now, sequence: [...(prior && prior.resolution === null ? prior.sequence : []), ...sequence].slice(-10), resolution: null };
    delete repaired[key];
  }
  // A resolved conflict closes only on observation: a yield on the first fresh snapshot after
  // it, a retake once the resource is seen at desired.
  for (const [key, c] of Object.entries(conflicts)) {
    if (!c.resolution || newConflicts[key]) continue;
    if (c.resolution.resolution === 'yield' || !byKey.get(key)?.drift) delete conflicts[key];
  }
  const blocking = Object.keys(conflicts).filter((k) => conflicts[k].resolution === null);

  // Refusals are not retried until something they were about has changed.
  for (const [key, r] of Object.entries(refused)) {
    const a = byKey.get(key);
    if (refusedNow.includes(key)) continue;
    if (!a || !a.drift || a.observed?.marker !== r.marker || a.effective_mode !== r.mode) delete refused[key];
  }

  const nextHistory: History = { ...carried, repaired, conflicts, refused };
  const planned = acted ? acted.planned.map((p) => ({ ...p })) : authorize(plan(intent, assessments, history.action_seq + 1), assessments, nextHistory, blocking, policy.retry_budget);
  const authorized = acted ? acted.actions : planned.filter((p) => p.authorized).map(toAuthorized);

  // Status, highest concern first. One reason; every concern still becomes a condition.
  const drafts: ConditionDraft[] = [];
  const unknown = assessments.filter((a) => a.ownership === 'UNKNOWN');
  const destructive = planned.filter((p) => p.destructive);
  const observeOnly = assessments.filter((a) => a.ownership === 'MANAGED' && a.drift && a.effective_mode === 'observe');
  const budgetWithheld = !acted && planned.some((p) => p.withheld_because?.startsWith(BUDGET));
  // Refusals still standing: this pass's, and earlier ones nothing has changed about since.
  const refusedWithheld = acted
    ? [...new Set([...refusedNow, ...Object.keys(refused).filter((k) => !actedKeys.has(k))])]
    : planned.filter((p) => p.withheld_because?.startsWith(REFUSED)).map((p) => p.resource_key);
  const stillDrifting = [...ineffective, ...failed];
  // After acting: drift the next pass could repair that this pass did not touch (it appeared meanwhile).
  const remaining = acted
    ? authorize(plan(intent, assessments, carried.action_seq + 1), assessments, nextHistory, blocking, Number.MAX_SAFE_INTEGER)
        .filter((p) => p.authorized && !actedKeys.has(p.resource_key))
        .map((p) => p.resource_key)
    : [];

  for (const key of Object.keys(conflicts)) {
    const c = conflicts[key];
    const state = c.resolution ? `resolved by ${c.resolution.by} (${c.resolution.resolution}); waiting for an observation that confirms it` : 'repair is stopped until an operator resolves it';
    drafts.push(draft('CONFLICTING_WRITER', key, `Another writer keeps changing "${key}"; ${state}.`, { sequence: c.sequence, resolution: c.resolution }, [`${carried.attempt_count} repair(s) this episode`]));
  }
  for (const a of unknown) drafts.push(draft('UNKNOWN_OWNERSHIP', a.resource_key, `Ownership of "${a.resource_key}" is not proven: ${a.ownership_reason}; Datum will not touch it.`, { observed: a.observed?.value ?? null }));
  for (const p of destructive) drafts.push(draft('DESTRUCTIVE_REPAIR_REQUIRED', p.resource_key, `The only repair of "${p.resource_key}" would destroy something (${p.withheld_because}); an operator must decide.`, { observed: byKey.get(p.resource_key)?.observed?.detail ?? null }));
  for (const a of observeOnly) {
    const why = observation.mode === 'observe' ? 'the host is in observe mode' : 'the resource is set to observe on this host';
    drafts.push(draft('OBSERVED_DRIFT', a.resource_key, `"${a.resource_key}" differs from desired and ${why}; Datum reports it and changes nothing.`, { desired: a.desired, observed: a.observed?.value ?? null }));
  }
  for (const key of refusedWithheld) {
    const r = refused[key];
    drafts.push(draft('ACTION_REFUSED', key, `The agent refused to repair "${key}": ${r?.refusal ?? 'refused'}.`, { refusal: r?.refusal ?? null }, [`${r ? 'apply at ' + r.at : 'apply'}`]));
  }

  let status: ConvergenceStatus;
  let reason: Reason;
  let detail: string;
  let recheck: RecheckTrigger;
  let nextDelayMs: number | null = null;
  const budget = policy.retry_budget;

  if (blocking.length > 0) {
    status = 'CONFLICT';
    reason = 'CONFLICTING_WRITER';
    detail = `Another writer changed ${list(blocking)} after Datum's repair; repair stops instead of oscillating until an operator resolves it.`;
    recheck = trigger('OPERATOR_RESOLUTION', `resolveConflict for ${list(blocking)} (retake or yield)`);
  } else if (acted && refusedNow.length > 0) {
    status = 'BLOCKED';
    reason = 'ACTION_REFUSED';
    detail = `The agent refused ${list(refusedNow)}: ${refusedNow.map((k) => refused[k]?.refusal).join('; ')}.`;
    recheck = trigger('FRESH_OBSERVATION', 'what the refusal was about changes (mode, ownership, artifact or intent)');
  } else if (acted && stillDrifting.length > 0) {
    const what = failed.length > 0 ? 'failed' : 'did not take';
    if (carried.attempt_count < budget) {
      status = 'RETRY';
      reason = failed.length > 0 && ineffective.length === 0 ? 'ACTION_FAILED' : 'ACTION_INEFFECTIVE';
      nextDelayMs = backoffMs(intent, carried.attempt_count);
      detail = `The repair of ${list(stillDrifting)} ${what}: the fresh probe still differs from desired (attempt ${carried.attempt_count} of ${budget}); retrying after ${formatDuration(nextDelayMs)}.`;
      recheck = trigger('TIMER', `backoff ${formatDuration(nextDelayMs)}`, addMs(now, nextDelayMs));
      for (const key of stillDrifting) drafts.push(draft('REPAIR_RETRYING', key, `Repair of "${key}" ${what}; attempt ${carried.attempt_count} of ${budget}.`, { attempt_count: carried.attempt_count }, triedFor(key, acted)));
    } else {
      status = 'BLOCKED';
      reason = 'RETRY_BUDGET_EXHAUSTED';
      detail = `The repair of ${list(stillDrifting)} ${what} ${carried.attempt_count} time(s), the whole retry_budget of ${budget}; Datum stops and says so instead of looping.`;
      recheck = trigger('FRESH_OBSERVATION', 'an observation showing the resource at desired, or a new generation');
      for (const key of stillDrifting) drafts.push(draft('RETRY_BUDGET_EXHAUSTED', key, `Repair of "${key}" ${what} after ${carried.attempt_count} attempt(s); retry_budget ${budget} is spent.`, { attempt_count: carried.attempt_count }, triedFor(key, acted)));
    }
  } else if (budgetWithheld) {
    status = 'BLOCKED';
    reason = 'RETRY_BUDGET_EXHAUSTED';
    const keys = planned.filter((p) => p.withheld_because?.startsWith(BUDGET)).map((p) => p.resource_key);
    detail = `${list(keys)} still differ after ${carried.attempt_count} repair(s), the whole retry_budget of ${budget}; nothing more is tried.`;
    recheck = trigger('FRESH_OBSERVATION', 'an observation showing the resource at desired, or a new generation');
    const previous = new Map(history.conditions.filter((c) => c.type === 'RETRY_BUDGET_EXHAUSTED').map((c) => [c.resource_key, c]));
    for (const key of keys) drafts.push(draft('RETRY_BUDGET_EXHAUSTED', key, `Repair of "${key}" did not take after ${carried.attempt_count} attempt(s); retry_budget ${budget} is spent.`, { attempt_count: carried.attempt_count }, previous.get(key)?.tried ?? []));
  } else if (refusedWithheld.length > 0 && (acted || authorized.length === 0)) {
    status = 'BLOCKED';
    reason = 'ACTION_REFUSED';
    detail = `The agent refused ${list(refusedWithheld)} and nothing about it has changed since: ${refusedWithheld.map((k) => refused[k]?.refusal).join('; ')}.`;
    recheck = trigger('FRESH_OBSERVATION', 'what the refusal was about changes (mode, ownership, artifact or intent)');
  } else if (!acted && authorized.length > 0) {
    status = 'DRIFTED';
    reason = 'DRIFT_DETECTED';
    detail = `${list(authorized.map((a) => a.resource_key))} drifted from generation ${intent.generation}; ${authorized.length} authorized action(s) follow.`;
    recheck = trigger('NONE', 'the authorized actions run now and a fresh probe judges them');
  } else if (remaining.length > 0) {
    const keys = remaining;
    status = 'RETRY';
    reason = 'DRIFT_DETECTED';
    nextDelayMs = backoffMs(intent, Math.max(carried.attempt_count, 1));
    detail = `The repair took, but ${list(keys)} drifted meanwhile; another pass follows after ${formatDuration(nextDelayMs)}.`;
    recheck = trigger('TIMER', `backoff ${formatDuration(nextDelayMs)}`, addMs(now, nextDelayMs));
  } else if (destructive.length > 0) {
    status = 'BLOCKED';
    reason = 'DESTRUCTIVE_REPAIR_REQUIRED';
    detail = `Repairing ${list(destructive.map((p) => p.resource_key))} would require destroying something; a repair never destroys, so an operator must decide.`;
    recheck = trigger('OPERATOR_RESOLUTION', 'an operator clears the obstruction or changes desired state');
  } else if (unknown.length > 0) {
    status = 'BLOCKED';
    reason = 'UNKNOWN_OWNERSHIP';
    detail = `Ownership of ${list(unknown.map((a) => a.resource_key))} is not proven; convergence cannot be claimed for what nobody is known to own.`;
    recheck = trigger('OPERATOR_RESOLUTION', 'declare the resource in desired state, or as an override with provenance in agent.yaml');
  } else if (observeOnly.length > 0) {
    status = 'DRIFTED';
    reason = 'OBSERVE_MODE_DRIFT';
    detail = `${list(observeOnly.map((a) => a.resource_key))} differ from desired; ${observation.mode === 'observe' ? 'the host is in observe mode' : 'these resources are set to observe'}, so the plan is reported and not applied.`;
    recheck = trigger('AGENT_CONFIG_CHANGE', 'the drift is corrected, desired state changes, or the host/resource moves to enforce');
  } else if (assessments.some((a) => a.ownership === 'MANAGED' && a.effective_mode === 'enforce' && a.drift)) {
    // Guard: an enforced managed resource still differs and nothing above explains it (its
    // repair is held back by a dependency). That is never CONVERGED.
    const keys = assessments.filter((a) => a.ownership === 'MANAGED' && a.effective_mode === 'enforce' && a.drift).map((a) => a.resource_key);
    status = 'BLOCKED';
    reason = 'DEPENDENCY_BLOCKED';
    detail = `${list(keys)} differ from desired, but their repair waits on a resource that cannot be repaired now.`;
    recheck = trigger('FRESH_OBSERVATION', 'the dependency is repaired or its ownership changes');
  } else {
    status = 'CONVERGED';
    reason = acted && acted.evidence.some((e) => e.outcome !== 'refused') ? 'CONVERGED_AFTER_REPAIR' : 'ALREADY_CONVERGED';
    detail = acted
      ? `A fresh probe shows every enforced managed resource at generation ${intent.generation} after the repair.`
      : `A fresh snapshot shows every enforced managed resource at generation ${intent.generation}; nothing to do.`;
    recheck = trigger('TIMER', `resync every ${policy.resync_interval}`, addMs(now, durationMs(policy.resync_interval)));
  }

  drafts.push(...signalConditions(history));
  const conditions = mergeConditions(history.conditions, drafts, now);
  const finalHistory: History = {
    ...nextHistory,
    attempt_count: status === 'CONVERGED' || (status === 'DRIFTED' && reason === 'OBSERVE_MODE_DRIFT') ? 0 : carried.attempt_count,
    conditions,
    last_status: status,
    last_reason: reason,
  };
  const conflictEvidence = Object.keys(newConflicts).length > 0 || blocking.length > 0 ? Object.entries(conflicts).map(([resource_key, c]) => ({ resource_key, sequence: c.sequence })) : null;

  const decision: Decision = {
    ...frame,
    resources: basisAssessments.map(toEntry(intent)),
    operator_exceptions: exceptions(basisAssessments),
    planned_actions: planned,
    authorized_actions: authorized,
    backoff: backoffRecord(intent, nextDelayMs),
    conflicting_writer_evidence: conflictEvidence,
    convergence_status: status,
    reason,
    reason_detail: detail,
    recheck_trigger: recheck,
    conditions,
  };
  return { decision, history: finalHistory };
}

type FrameOmitted =
  | 'resources'
  | 'operator_exceptions'
  | 'planned_actions'
  | 'authorized_actions'
  | 'backoff'
  | 'conflicting_writer_evidence'
  | 'convergence_status'
  | 'reason'
  | 'reason_detail'
  | 'recheck_trigger'
  | 'conditions';

const BUDGET = 'retry budget';
const REFUSED = 'refused by the agent';

/**
 * Authorization is the only difference between observe and enforce: the plan is the same, and
 * every withheld action says why.
 */
function authorize(planned: PlannedAction[], assessments: Assessment[], history: History, blocking: string[], budget: number): PlannedAction[] {
  const byKey = new Map(assessments.map((a) => [a.resource_key, a]));
  const withheld = (p: PlannedAction): string | null => {
    const a = byKey.get(p.resource_key)!;
    if (p.destructive) return p.withheld_because;
    if (a.effective_mode === 'observe') return 'observe mode: reported, not applied';
    if (blocking.length > 0) return `repair is stopped while a conflicting writer on ${list(blocking)} is unresolved`;
    const r = history.refused[p.resource_key];
    if (r && r.idempotency_key === p.idempotency_key && r.marker === p.observed_marker && r.mode === a.effective_mode) return `${REFUSED}: ${r.refusal}`;
    if (history.attempt_count >= budget) return `${BUDGET} exhausted after ${history.attempt_count} attempt(s)`;
    return null;
  };
  const result = planned.map((p) => {
    const why = withheld(p);
    return { ...p, authorized: why === null, withheld_because: why };
  });
  // A service restart cannot help while what it loads is drifted and not being repaired.
  for (const p of result) {
    if (!p.authorized) continue;
    const spec = byKey.get(p.resource_key)?.spec;
    if (!spec) continue;
    const stuck = dependenciesOf(spec).filter((dep) => {
      const d = byKey.get(dep);
      // An operator-owned dependency is taken as it is (classify): only managed drift holds a service back.
      return d?.ownership === 'MANAGED' && d.drift && !result.some((q) => q.resource_key === dep && q.authorized);
    });
    if (stuck.length > 0) {
      p.authorized = false;
      p.withheld_because = `depends on ${list(stuck)}, which cannot be repaired now`;
    }
  }
  return result;
}

function isFresh(o: Observation, now: string, ttlMs: number): boolean {
  return msBetween(o.observed_at, now) <= ttlMs;
}

function effectiveMode(o: Observation, key: string): string {
  return o.mode === 'observe' || o.resource_modes[key] === 'observe' ? 'observe' : 'enforce';
}

export function backoffMs(intent: BoundIntent, attempt: number): number {
  const { initial, factor, max } = intent.policy.backoff;
  return Math.min(durationMs(max), Math.round(durationMs(initial) * Math.pow(factor, Math.max(attempt - 1, 0))));
}

function backoffRecord(intent: BoundIntent, nextDelayMs: number | null): Decision['backoff'] {
  return { ...intent.policy.backoff, next_delay: nextDelayMs === null ? null : formatDuration(nextDelayMs) };
}

/** When the loop re-observes after a stale snapshot: half the TTL, within backoff.initial and resync_interval. */
function restaleMs(policy: BoundIntent['policy']): number {
  return Math.min(durationMs(policy.resync_interval), Math.max(durationMs(policy.backoff.initial), durationMs(policy.observation_ttl) / 2));
}

function trigger(kind: RecheckTriggerKind, detail: string, notBefore: string | null = null): RecheckTrigger {
  return { trigger: kind, not_before: notBefore, detail };
}

const toEntry = (intent: BoundIntent) => (a: Assessment): Decision['resources'][number] => {
  return {
    resource_key: a.resource_key,
    type: a.type,
    ownership: a.ownership,
    ownership_provenance: a.ownership_provenance,
    desired: a.desired,
    observed: a.observed ? a.observed.value : null,
    drift: a.drift,
    effective_mode: a.effective_mode,
    idempotency_key: a.spec ? idempotencyKey(intent.node, a.resource_key, intent.generation, intent.digest) : null,
  };
};

function exceptions(assessments: Assessment[]): Decision['operator_exceptions'] {
  return assessments
    .filter((a) => a.ownership === 'OPERATOR_OWNED')
    .map((a) => ({ resource_key: a.resource_key, provenance: a.ownership_provenance, desired: a.desired, observed: a.observed?.value ?? null }));
}

function toAuthorized(p: PlannedAction): AuthorizedAction {
  return {
    resource_key: p.resource_key,
    action: p.action,
    desired_generation: p.desired_generation,
    desired_digest: p.desired_digest,
    idempotency_key: p.idempotency_key,
    observed_marker: p.observed_marker,
    action_seq: p.action_seq,
    spec: p.spec,
  };
}

function summarizePost(observation: Observation | null, intent: BoundIntent, history: History): Json {
  if (!observation) return null;
  const resources: Record<string, Json> = {};
  for (const a of classify(intent, observation, history)) {
    resources[a.resource_key] = { value: a.observed?.value ?? null, marker: a.observed?.marker ?? null, drift: a.drift, ownership: a.ownership };
  }
  return { observed_at: observation.observed_at, resources };
}

function triedFor(key: string, acted: ActedPass | null | undefined): string[] {
  const ev = acted?.evidence.find((e) => e.resource_key === key);
  return ev ? [`${ev.action} at ${ev.executed_at}: ${ev.outcome} (${ev.detail})`] : [];
}

function list(keys: string[]): string {
  const unique = [...new Set(keys)];
  return unique.map((k) => `"${k}"`).join(', ');
}

function short(digest: string): string {
  return digest.slice(0, 19);
}
