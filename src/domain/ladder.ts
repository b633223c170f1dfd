import { draft, type ConditionDraft } from './conditions';
import { conflictDrafts, heldDrafts, refusalDrafts, repeatedFigures, resourceDrafts } from './standing-conditions';
import { holdWords } from './holds';
import { sayDeadline } from './deadline';
import type { ActedPass } from './inputs';
import type { Evidence } from './evidence';
import { addMs, durationMs, formatDuration } from './duration';
import { backoffMs, list, trigger, type Verdict } from './verdict';
import { restaleMs } from './gates';
import type { ConvergenceStatus, Reason, RecheckTriggerKind } from '../contract/vocabulary';

/*
 * Stage 4: the status ladder. Once the gates are open and a stage has judged the snapshot
 * (authorize before acting, judgeProbe after), the rungs below are tried top to bottom and the
 * first whose `when` holds decides: one status, one reason. Every concern still becomes a
 * condition (standingConditions), whichever rung decides. Models: flux's ComputeReconcileResult,
 * the gitops-engine sync phases.
 */

/** What a rung says when it decides. */
interface Said {
  detail: string;
  recheck: string;
  not_before?: string | null;
  next_delay_ms?: number | null;
  drafts?: ConditionDraft[];
}

export interface Rung {
  status: ConvergenceStatus;
  reason: Reason;
  trigger: RecheckTriggerKind;
  /** Why this rung is tried before the next one. */
  outranks: string;
  when: (e: Evidence) => boolean;
  say: (e: Evidence) => Said;
  /** Deciding here ends the repair episode: the next drift starts with a fresh retry_budget. */
  ends_episode?: true;
}

const stillDrifting = (e: Evidence) => [...e.ineffective, ...e.failed];
const withinBudget = (e: Evidence) => e.attempts < e.intent.policy.retry_budget;
/** The last rung, reached only when nothing above holds. */
const ALREADY_CONVERGED: Rung = {
  status: 'CONVERGED',
  reason: 'ALREADY_CONVERGED',
  trigger: 'TIMER',
  outranks: 'The last rung: nothing outranks it, and it always holds.',
  when: () => true,
  say: sayConverged,
  ends_episode: true,
};

const resolveRecheck = (e: Evidence) => `resolveConflict for ${list(e.blocking)} (retake or yield)`;
const REFUSAL_RECHECK = 'what the refusal was about changes (mode, ownership, artifact or intent)';
const BUDGET_RECHECK = 'an observation showing the resource at desired, or a new generation';

export const LADDER: readonly Rung[] = [
  {
    status: 'CONFLICT',
    reason: 'CONFLICTING_WRITER',
    trigger: 'OPERATOR_RESOLUTION',
    outranks:
      'CONFLICT outranks a refusal: retrying against another writer only makes the two oscillate, whatever the agent says.',
    when: (e) => e.blocking.some((key) => !e.conflicts[key]?.repeated_drift),
    say: (e) => ({
      detail: `Another writer changed ${list(e.blocking)} after Datum's repair; repair stops instead of oscillating until an operator resolves it.`,
      recheck: resolveRecheck(e),
    }),
  },
  {
    status: 'CONFLICT',
    reason: 'REPEATED_DRIFT',
    trigger: 'OPERATOR_RESOLUTION',
    outranks:
      'A writer slower than conflict_window is still a writer, so it outranks a refusal as the rung above does; that rung names the direct evidence (a flip or a moved marker) when there is any.',
    when: (e) => e.blocking.length > 0,
    say: (e) => ({
      detail: `${list(e.blocking)} drifted again after ${repeatedFigures(e.conflicts, e.blocking)}: another writer keeps changing it, more slowly than conflict_window ${e.intent.policy.conflict_window}; repair stops instead of oscillating until an operator resolves it.`,
      recheck: resolveRecheck(e),
    }),
  },
  {
    status: 'BLOCKED',
    reason: 'ACTION_REFUSED',
    trigger: 'FRESH_OBSERVATION',
    outranks:
      'A refusal in this pass outranks a retry: the agent said why it will not act, and the same action would be refused again.',
    when: (e) => e.refused_now.length > 0,
    say: (e) => ({
      detail: `The agent refused ${list(e.refused_now)}: ${refusals(e, e.refused_now)}.`,
      recheck: REFUSAL_RECHECK,
    }),
  },
  {
    status: 'BLOCKED',
    reason: 'STALE_OBSERVATION',
    trigger: 'FRESH_OBSERVATION',
    outranks:
      "A write refused for a stale snapshot outranks a retry: the plan's evidence expired, so the loop re-observes and plans again rather than retrying an old plan (and it is no standing refusal: nothing is wrong that a fresh snapshot does not fix).",
    when: (e) => e.stale_refused.length > 0,
    say: sayStaleAtWrite,
  },
  {
    status: 'BLOCKED',
    reason: 'REPAIR_DEADLINE_EXCEEDED',
    trigger: 'FRESH_OBSERVATION',
    outranks:
      'A retry the deadline would withhold is never promised (RETRY only within budget, of attempts and of time); a spent retry_budget never reaches here (judge and authorize leave this list empty then).',
    when: (e) => e.deadline_withheld.length > 0,
    say: (e) => sayDeadline(e, (key) => deadlineTried(key, e)),
  },
  {
    status: 'RETRY',
    reason: 'ACTION_INEFFECTIVE',
    trigger: 'TIMER',
    outranks:
      'A repair that ran and did not take names the retry even when another failed: the node answered, and still differs.',
    when: (e) => stillDrifting(e).length > 0 && withinBudget(e) && e.ineffective.length > 0,
    say: sayRetry,
  },
  {
    status: 'RETRY',
    reason: 'ACTION_FAILED',
    trigger: 'TIMER',
    outranks: 'Within retry_budget a repair that did not take is retried; only a spent budget stops it (the next rung).',
    when: (e) => stillDrifting(e).length > 0 && withinBudget(e),
    say: sayRetry,
  },
  {
    status: 'BLOCKED',
    reason: 'RETRY_BUDGET_EXHAUSTED',
    trigger: 'FRESH_OBSERVATION',
    outranks:
      "The probe of this pass's own repair is the newest evidence; what a pre-action plan withheld (next) cannot apply after acting.",
    when: (e) => stillDrifting(e).length > 0,
    say: (e) => {
      const keys = stillDrifting(e);
      const budget = e.intent.policy.retry_budget;
      return {
        detail: `The repair of ${list(keys)} ${whatHappened(e)} ${e.attempts} time(s), the whole retry_budget of ${budget}; Datum stops and says so instead of looping.`,
        recheck: BUDGET_RECHECK,
        drafts: keys.map((key) =>
          draft(
            'RETRY_BUDGET_EXHAUSTED',
            key,
            `Repair of "${key}" ${whatHappened(e)} after ${e.attempts} attempt(s); retry_budget ${budget} is spent.`,
            { attempt_count: e.attempts },
            triedFor(key, e.acted),
          ),
        ),
      };
    },
  },
  {
    status: 'BLOCKED',
    reason: 'RETRY_BUDGET_EXHAUSTED',
    trigger: 'FRESH_OBSERVATION',
    outranks: 'A spent budget outranks a standing refusal: nothing more is tried, whatever the agent would say.',
    when: (e) => e.budget_withheld.length > 0,
    say: (e) => {
      const budget = e.intent.policy.retry_budget;
      const previous = new Map(
        e.history.conditions.filter((c) => c.type === 'RETRY_BUDGET_EXHAUSTED').map((c) => [c.resource_key, c]),
      );
      return {
        detail: `${list(e.budget_withheld)} still differ after ${e.attempts} repair(s), the whole retry_budget of ${budget}; nothing more is tried.`,
        recheck: BUDGET_RECHECK,
        drafts: e.budget_withheld.map((key) =>
          draft(
            'RETRY_BUDGET_EXHAUSTED',
            key,
            `Repair of "${key}" did not take after ${e.attempts} attempt(s); retry_budget ${budget} is spent.`,
            { attempt_count: e.attempts },
            previous.get(key)?.tried ?? [],
          ),
        ),
      };
    },
  },
  {
    status: 'BLOCKED',
    reason: 'ACTION_REFUSED',
    trigger: 'FRESH_OBSERVATION',
    outranks:
      'When nothing else may run, a standing refusal is what holds the node; when actions may run, they go ahead and the refusal stays a condition.',
    when: (e) => e.refused_standing.length > 0 && (e.phase === 'post' || e.authorized.length === 0),
    say: (e) => ({
      detail: `The agent refused ${list(e.refused_standing)} and nothing about it has changed since: ${refusals(e, e.refused_standing)}.`,
      recheck: REFUSAL_RECHECK,
    }),
  },
  {
    status: 'DRIFTED',
    reason: 'DRIFT_DETECTED',
    trigger: 'NONE',
    outranks: 'Authorized actions run before anything only an operator can fix is reported: they may be all the node needs.',
    when: (e) => e.phase === 'pre' && e.authorized.length > 0,
    say: (e) => ({
      detail: `${list(e.authorized)} drifted from generation ${e.intent.generation}; ${e.authorized.length} authorized action(s) follow.`,
      recheck: 'the authorized actions run now and a fresh probe judges them',
    }),
  },
  {
    status: 'RETRY',
    reason: 'DRIFT_DETECTED',
    trigger: 'TIMER',
    outranks: 'Drift Datum can still repair outranks what an operator must decide: the next pass may be all it takes.',
    when: (e) => e.drifted_meanwhile.length > 0,
    say: (e) => {
      const delay = backoffMs(e.intent, Math.max(e.attempts, 1));
      return {
        detail: `The repair took, but ${list(e.drifted_meanwhile)} drifted meanwhile; another pass follows after ${formatDuration(delay)}.`,
        recheck: `backoff ${formatDuration(delay)}`,
        not_before: addMs(e.now, delay),
        next_delay_ms: delay,
      };
    },
  },
  {
    status: 'BLOCKED',
    reason: 'DESTRUCTIVE_REPAIR_REQUIRED',
    trigger: 'OPERATOR_RESOLUTION',
    outranks: 'A managed resource known to be wrong and unrepairable outranks one whose owner is unknown.',
    when: (e) => e.destructive.length > 0,
    say: (e) => ({
      detail: `Repairing ${list(e.destructive.map((p) => p.resource_key))} would require destroying something; a repair never destroys, so an operator must decide.`,
      recheck: 'an operator clears the obstruction or changes desired state',
    }),
  },
  {
    status: 'BLOCKED',
    reason: 'UNKNOWN_OWNERSHIP',
    trigger: 'OPERATOR_RESOLUTION',
    outranks: 'Unproven ownership forbids any claim about the node, so it outranks drift that is only reported.',
    when: (e) => e.unknown.length > 0,
    say: (e) => ({
      detail: `Ownership of ${list(e.unknown.map((a) => a.resource_key))} is not proven; convergence cannot be claimed for what nobody is known to own.`,
      recheck: 'declare the resource in desired state, or as an override with provenance in agent.yaml',
    }),
  },
  {
    status: 'DRIFTED',
    reason: 'OBSERVE_MODE_DRIFT',
    trigger: 'AGENT_CONFIG_CHANGE',
    outranks: 'Drift that observe mode holds back is explained; the next rung is drift that nothing above explains.',
    when: (e) => e.observe_only.length > 0,
    say: (e) => ({
      detail: `${list(e.observe_only.map((a) => a.resource_key))} differ from desired; ${e.judged.observation.mode === 'observe' ? 'the host is in observe mode' : 'these resources are set to observe'}, so the plan is reported and not applied.`,
      recheck: 'the drift is corrected, desired state changes, or the host/resource moves to enforce',
    }),
    ends_episode: true,
  },
  {
    status: 'DRIFTED',
    reason: 'HELD',
    trigger: 'OPERATOR_RESOLUTION',
    outranks:
      "Drift an operator's hold holds back is explained, as observe mode's is (which, being the host's own word, comes first); the next rung is drift nothing above explains.",
    when: (e) => e.held.length > 0,
    say: (e) => ({
      detail: `${list(e.held.map((a) => a.resource_key))} differ from desired; ${e.intent.node} is ${holdWords(e.history.hold!)}, so the plan is reported and not applied: the hold's end repairs it.`,
      recheck: `\`datum unhold ${e.intent.node}\`${e.history.hold?.until ? ` or the hold's end at ${e.history.hold.until}` : ''}`,
    }),
    ends_episode: true,
  },
  {
    status: 'BLOCKED',
    reason: 'DEPENDENCY_BLOCKED',
    trigger: 'FRESH_OBSERVATION',
    // A guard: an enforced managed resource still differs and nothing above explains it (its
    // repair is held back by a dependency). That is never CONVERGED.
    outranks: 'An enforced managed resource that still differs is never CONVERGED.',
    when: (e) => e.enforced_drift.length > 0,
    say: (e) => ({
      detail: `${list(e.enforced_drift)} differ from desired, but their repair waits on a resource that cannot be repaired now.`,
      recheck: 'the dependency is repaired or its ownership changes',
    }),
  },
  {
    status: 'CONVERGED',
    reason: 'CONVERGED_AFTER_REPAIR',
    trigger: 'TIMER',
    outranks: 'A repair ran in this pass, so the fresh probe proves it; the last rung is a node that needed nothing.',
    when: (e) => e.phase === 'post' && e.executed,
    say: sayConverged,
    ends_episode: true,
  },
  ALREADY_CONVERGED,
];

/** The first rung whose `when` holds, and what it says. The last rung always holds. */
export function climb(e: Evidence, ladder: readonly Rung[] = LADDER): Verdict {
  const rung = ladder.find((r) => r.when(e)) ?? ALREADY_CONVERGED;
  const said = rung.say(e);
  return {
    status: rung.status,
    reason: rung.reason,
    detail: said.detail,
    recheck: trigger(rung.trigger, said.recheck, said.not_before ?? null),
    drafts: [...standingConditions(e), ...(said.drafts ?? [])],
    next_delay_ms: said.next_delay_ms ?? null,
    ends_episode: rung.ends_episode === true,
  };
}

/** Every concern becomes a condition, whichever rung decides the status, in this order. */
function standingConditions(e: Evidence): ConditionDraft[] {
  return [
    ...conflictDrafts(e.conflicts, e.attempts),
    ...resourceDrafts(e.judged, e.unknown, e.destructive, e.observe_only),
    ...heldDrafts(e.intent.node, e.held, e.history.hold ?? null),
    ...refusalDrafts(e.refused_standing, e.refused),
  ];
}

/** The agent's StaleSnapshotRefusal: what gate 7 says before acting, found at the moment of the write. */
function sayStaleAtWrite(e: Evidence): Said {
  const ttl = e.intent.policy.observation_ttl;
  const waitMs = restaleMs(e.intent, 1);
  const observedAt = e.acted?.pre.observed_at ?? null;
  return {
    detail: `The agent refused ${list(e.stale_refused)}: the snapshot the plan was made from (${observedAt}) was older than observation_ttl ${ttl} at the moment of the write, so nothing stale was written; the loop takes a fresh snapshot in ${formatDuration(waitMs)}.`,
    recheck: `a snapshot younger than ${ttl}, which the loop takes in ${formatDuration(waitMs)}`,
    not_before: addMs(e.now, waitMs),
    drafts: [
      draft(
        'STALE_OBSERVATION',
        null,
        `The batch outlived its snapshot: the agent refused ${list(e.stale_refused)} because the snapshot from ${observedAt} was past observation_ttl ${ttl} when the write came.`,
        { observed_at: observedAt, observation_ttl: ttl, refused: e.stale_refused },
        e.stale_refused.flatMap((key) => triedFor(key, e.acted)),
      ),
    ],
  };
}

function sayRetry(e: Evidence): Said {
  const keys = stillDrifting(e);
  const budget = e.intent.policy.retry_budget;
  const delay = backoffMs(e.intent, e.attempts);
  return {
    detail: `The repair of ${list(keys)} ${whatHappened(e)}: the fresh probe still differs from desired (attempt ${e.attempts} of ${budget}); retrying after ${formatDuration(delay)}.`,
    recheck: `backoff ${formatDuration(delay)}`,
    not_before: addMs(e.now, delay),
    next_delay_ms: delay,
    drafts: keys.map((key) =>
      draft(
        'REPAIR_RETRYING',
        key,
        `Repair of "${key}" ${whatHappened(e)}; attempt ${e.attempts} of ${budget}.`,
        { attempt_count: e.attempts },
        triedFor(key, e.acted),
      ),
    ),
  };
}

function sayConverged(e: Evidence): Said {
  const policy = e.intent.policy;
  return {
    detail:
      e.phase === 'post'
        ? `A fresh probe shows every enforced managed resource at generation ${e.intent.generation} after the repair.`
        : `A fresh snapshot shows every enforced managed resource at generation ${e.intent.generation}; nothing to do.`,
    recheck: `resync every ${policy.resync_interval}`,
    not_before: addMs(e.now, durationMs(policy.resync_interval)),
  };
}

const whatHappened = (e: Evidence) => (e.failed.length > 0 ? 'failed' : 'did not take');

function refusals(e: Evidence, keys: string[]): string {
  return keys.map((k) => e.refused[k]?.refusal).join('; ');
}

/** What was tried for a key the deadline stopped: this pass's action, else what its earlier condition kept. */
function deadlineTried(key: string, e: Evidence): string[] {
  const now = triedFor(key, e.acted);
  if (now.length > 0) return now;
  const earlier = e.history.conditions.find(
    (c) => c.resource_key === key && (c.type === 'REPAIR_DEADLINE_EXCEEDED' || c.type === 'REPAIR_RETRYING'),
  );
  return earlier?.tried ?? [];
}

function triedFor(key: string, acted: ActedPass | null): string[] {
  const ev = acted?.evidence.find((x) => x.resource_key === key);
  return ev ? [`${ev.action} at ${ev.executed_at}: ${ev.outcome} (${ev.detail})`] : [];
}
