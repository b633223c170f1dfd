import { DECISION_RULE } from '../contract/patches';
import { INTENT_REFUSALS, type RefusalType } from '../contract/failures';
import { intentSignature } from './desired';
import { authorizePlan } from './authorize';
import { effectiveMode } from './classify';
import { overdueRetries } from './deadline';
import type { ConditionDraft } from './conditions';
import type { ActedPass } from './inputs';
import { resourceConcerns, type Judgement } from './evidence';
import { conflictDrafts, refusalDrafts } from './standing-conditions';
import { planItems } from './plan';
import { sameMarker } from './markers';
import { trailAfterRepairs } from './repeated-drift';
import { list, type Classified } from './verdict';
import {
  noFindings,
  standingRefusals,
  trackConflicts,
  trackWithoutProbe,
  type ProbeFindings,
  type RefusalRecord,
  type RepairRecord,
  type StageInput,
} from './writers';
import type { History } from '../contract/history';
import type { AuthorizedAction, Decision, ExecutionEvidence } from '../contract/ledger';
import type { WriterEvidence } from '../contract/observation';

/** What the fresh probe says about one action of this pass. */
type ActionVerdict =
  | { kind: 'refused'; refusal: RefusalRecord }
  /** Refused because the plan's snapshot was past observation_ttl at the moment of the write: re-observe, not a standing refusal. */
  | { kind: 'stale' }
  /** Not carried out (failed, or skipped): the resource is as it was, and still drifting. */
  | { kind: 'not_carried_out' }
  /** At desired on the probe; `proof` is what conflict_window compares later flips with. */
  | { kind: 'took'; proof: RepairRecord | null }
  /** The marker moved after our own write, or between plan and write (MARKER_MOVED): another writer. */
  | { kind: 'overwritten'; sequence: WriterEvidence[] }
  /** Still differs, and nothing shows another writer: the marker is our own write's, or unknown (seed probe 4). */
  | { kind: 'ineffective' }
  /** Carried out, and no probe came to say what it did. */
  | { kind: 'unprobed' };

/** An action was carried out: it counts toward attempt_count and can have taken. */
export function wasExecuted(ev: ExecutionEvidence): boolean {
  return ev.outcome !== 'refused' && ev.outcome !== 'skipped';
}

/**
 * Stage 3, after acting: judge the fresh post-action probe. Command success is execution
 * evidence only; what each action did is read off the probe (took, did not take, overwritten).
 */
export function judgeProbe(post: Classified, acted: ActedPass, input: StageInput): Judgement {
  const { intent, history, carried } = input;
  const signature = intentSignature(intent);
  const probe = judgeActions(post, acted, signature);
  const writers = trackConflicts(history, post, input.now, intent.policy.conflict_window, probe, input.rules);
  const refused = standingRefusals({ ...history.refused, ...probe.refused }, post, probe.refused_now, input.rules, signature);
  const next: History = { ...carried, repaired: writers.repaired, conflicts: writers.conflicts, refused };
  // Each repair the probe proved is remembered per target, so repeated drift shows as a writer.
  const trail = trailAfterRepairs(history, probe.repaired, post, acted.pre, intent.policy, input.now);
  if (trail !== undefined) next.repair_trail = trail;
  // Drift the next pass could repair that this pass did not touch (it appeared meanwhile).
  const repairable = authorizePlan(
    planItems(intent, post.assessments, carried.action_seq + 1, post.observation.observed_at),
    post,
    next,
    writers.blocking,
    Number.MAX_SAFE_INTEGER,
  );
  const planned = acted.planned.map((p) => ({ ...p }));
  const meanwhile = repairable
    .filter((x) => x.cause === null && !probe.acted_keys.has(x.action.resource_key))
    .map((x) => x.action.resource_key);
  const spent = withheldForBudget(meanwhile, carried.attempt_count, intent.policy.retry_budget, input.rules);
  const retrying = spent.length > 0 ? [] : meanwhile;
  // A retry that could only come after repair_deadline is not promised (deadline.ts).
  const overdue = overdueRetries(input, [...probe.ineffective, ...probe.failed, ...retrying]);
  return {
    planned,
    authorized: acted.actions,
    history: next,
    conflict_evidence: writers.evidence,
    evidence: {
      phase: 'post',
      intent,
      now: input.now,
      history,
      judged: post,
      acted,
      attempts: carried.attempt_count,
      conflicts: writers.conflicts,
      blocking: writers.blocking,
      refused,
      refused_now: probe.refused_now,
      stale_refused: probe.stale,
      // This pass's refusals, and earlier ones nothing has changed about since.
      refused_standing: [...new Set([...probe.refused_now, ...Object.keys(refused).filter((k) => !probe.acted_keys.has(k))])],
      ineffective: probe.ineffective,
      failed: probe.failed,
      budget_withheld: spent,
      deadline_withheld: overdue,
      authorized: acted.actions.map((a) => a.resource_key),
      drifted_meanwhile: overdue.length > 0 ? [] : retrying,
      executed: acted.evidence.some(wasExecuted),
      // A pass that acted was not held: a hold is placed between passes.
      ...resourceConcerns(post, planned, null),
    },
  };
}

/**
 * Drift that appeared meanwhile, once this pass spent the retry budget: the next pass would
 * withhold its repair (budget_withheld), so this one says so (BLOCKED, RETRY_BUDGET_EXHAUSTED)
 * instead of promising a RETRY. Before the rule (a loop that started earlier) it said RETRY.
 */
function withheldForBudget(meanwhile: string[], attempts: number, budget: number, rules: StageInput['rules']): string[] {
  if (meanwhile.length === 0 || attempts < budget) return [];
  return rules(DECISION_RULE.retryOnlyWithinBudget) ? meanwhile : [];
}

/**
 * After acting, when a gate closed on the probe (decide.ts gateOutcome): what the agent's own
 * answers say without it. The status stays the gate's; the history, conditions and sentence
 * take in what was heard.
 */
export interface Unprobed {
  history: History;
  conflict_evidence: Decision['conflicting_writer_evidence'];
  drafts: ConditionDraft[];
  /** Appended to the gate's reason_detail; empty when the answers changed nothing. */
  said: string;
}

export function judgeWithoutProbe(acted: ActedPass, input: StageInput): Unprobed {
  const { intent, history, carried } = input;
  const answers = judgeActions(null, acted, intentSignature(intent));
  const writers = trackWithoutProbe(history, input.now, intent.policy.conflict_window, answers, input.rules);
  const { standing } = writers;
  const opened = Object.fromEntries(Object.entries(writers.conflicts).filter(([key]) => writers.opened.includes(key)));
  const said = [
    writers.opened.length > 0
      ? ` The agent refused ${list(writers.opened)} as MARKER_MOVED: another writer changed it between plan and write, which needs no probe to tell; repair stops on the node until an operator resolves it (retake or yield).`
      : '',
    standing.length > 0
      ? ` The agent refused ${list(standing)}: ${standing.map((k) => answers.refused[k]?.refusal).join('; ')}; not tried again until what the refusal was about changes.`
      : '',
  ].join('');
  return {
    history: { ...carried, repaired: writers.repaired, conflicts: writers.conflicts, refused: writers.refused },
    conflict_evidence: writers.evidence,
    drafts: [...conflictDrafts(opened, carried.attempt_count), ...refusalDrafts(standing, writers.refused)],
    said,
  };
}

/** What each action of this pass did, read off the fresh probe; without one (null), only the agent's answers. */
function judgeActions(post: Classified | null, acted: ActedPass, signature: string | null): ProbeFindings {
  const probe: ProbeFindings = {
    ...noFindings(),
    acted_keys: new Set(acted.actions.map((a) => a.resource_key)),
    executed: acted.evidence.filter(wasExecuted).map((ev) => ev.resource_key),
  };
  for (const ev of acted.evidence) {
    const key = ev.resource_key;
    const verdict = judgeAction(ev, post, acted, signature);
    if (verdict.kind === 'refused') {
      probe.refused_now.push(key);
      probe.refused[key] = verdict.refusal;
    } else if (verdict.kind === 'stale') probe.stale.push(key);
    else if (verdict.kind === 'not_carried_out') probe.failed.push(key);
    else if (verdict.kind === 'took') {
      if (verdict.proof) probe.repaired[key] = verdict.proof;
    } else if (verdict.kind === 'overwritten') probe.overwritten[key] = verdict.sequence;
    else if (verdict.kind === 'ineffective') probe.ineffective.push(key);
  }
  return probe;
}

function judgeAction(ev: ExecutionEvidence, post: Classified | null, acted: ActedPass, signature: string | null): ActionVerdict {
  if (ev.outcome === 'refused') {
    const action = acted.actions.find((x) => x.resource_key === ev.resource_key);
    // Two refusals are evidence about the world, not a standing "no": another writer came
    // between plan and write (compare-and-swap), or the plan's snapshot expired.
    if (ev.refusal_type === 'MarkerMoved') return { kind: 'overwritten', sequence: markerMoved(ev, action, post, acted) };
    if (ev.refusal_type === 'StaleSnapshotRefusal') return { kind: 'stale' };
    return { kind: 'refused', refusal: refusalRecord(ev, action, acted, signature) };
  }
  // A skipped action was never attempted: for the status it is a failed one (not an attempt).
  if (ev.outcome === 'failed' || ev.outcome === 'skipped') return { kind: 'not_carried_out' };
  if (!post) return { kind: 'unprobed' };
  const a = post.byKey.get(ev.resource_key);
  if (!a || !a.drift)
    return {
      kind: 'took',
      proof: a?.observed ? { at: post.observation.observed_at, value: a.observed.value, marker: a.observed.marker } : null,
    };
  const marker = a.observed?.marker ?? null;
  if (marker === null || sameMarker(marker, ev.marker_after)) return { kind: 'ineffective' };
  return {
    kind: 'overwritten',
    sequence: [
      { at: ev.executed_at, value: a.desired, marker: ev.marker_after, source: `datum ${ev.action}` },
      { at: post.observation.observed_at, value: a.observed?.value ?? null, marker, source: 'fresh observation after repair' },
    ],
  };
}

/** A standing refusal: what it was about, so it is tried again once that changes. */
function refusalRecord(
  ev: ExecutionEvidence,
  action: AuthorizedAction | undefined,
  acted: ActedPass,
  signature: string | null,
): RefusalRecord {
  return {
    idempotency_key: ev.idempotency_key,
    marker: action?.observed_marker ?? null,
    mode: effectiveMode(acted.pre, ev.resource_key),
    refusal: ev.refusal ?? ev.detail,
    at: ev.executed_at,
    ...(INTENT_REFUSALS.includes(ev.refusal_type as RefusalType) ? { signature } : {}),
  };
}

/**
 * The agent's MARKER_MOVED as conflict evidence: the (time, value, marker) the plan saw, and the
 * moved one the fresh probe shows. Nothing of ours was written, so every point is another writer's.
 * Without a probe the second point is the refusal itself: the agent saw the marker move, and
 * what it moved to is unknown until the node is observed again.
 */
function markerMoved(
  ev: ExecutionEvidence,
  action: AuthorizedAction | undefined,
  post: Classified | null,
  acted: ActedPass,
): WriterEvidence[] {
  const planned = acted.pre.resources[ev.resource_key];
  const now = post?.byKey.get(ev.resource_key)?.observed;
  const refused = `the agent refused ${ev.action} as MARKER_MOVED at ${ev.executed_at}`;
  return [
    {
      at: action?.observed_at ?? acted.pre.observed_at,
      value: planned?.value ?? null,
      marker: action?.observed_marker ?? planned?.marker ?? null,
      source: 'snapshot the plan was made from',
    },
    post
      ? {
          at: post.observation.observed_at,
          value: now?.value ?? null,
          marker: now?.marker ?? null,
          source: `fresh observation after ${refused}`,
        }
      : {
          at: ev.executed_at,
          value: null,
          marker: null,
          source: `${refused}; no probe this pass could judge, so the new value and marker are unknown`,
        },
  ];
}
