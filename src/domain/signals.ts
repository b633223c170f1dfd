import { breachProblem, clip, jsonBreach, type JsonBreach } from './bounds';
import { canonicalJson } from './canonical';
import { draft, mergeConditions } from './conditions';
import type { AuthorityView } from './inputs';
import { DECISION_RULE, type DecisionRule } from '../contract/patches';
import {
  MAX_SIGNAL_CHARS,
  MAX_SIGNAL_DEPTH,
  MAX_SIGNAL_ECHO,
  SIGNAL_CHECKS,
  type RefreshDesiredPayload,
  type SignalName,
  type SignalPayload,
} from '../contract/signals';
import type { RecordDecisionRequest } from '../contract/agent';
import type { BoundIntent } from '../contract/desired';
import type { History } from '../contract/history';
import type { Decision, OperatorResolution, RecheckTrigger } from '../contract/ledger';
import type { ConvergenceStatus, NoteReason } from '../contract/vocabulary';

/*
 * The payloads of the three signals, validated before they touch the loop (by the contract's
 * SIGNAL_CHECKS). A malformed signal is never half-applied: it is recorded, raises
 * INVALID_SIGNAL, and the loop goes on.
 */

/** `problems` are the bad fields alone ("<field>: <problem> (fix: <fix>)"), for a caller that names the payload itself. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string; problems: string[] };

const SIGNAL_CAPS = { depth: MAX_SIGNAL_DEPTH, chars: MAX_SIGNAL_CHARS, values: MAX_SIGNAL_CHARS } as const;

/**
 * Validates a signal payload; the error names the signal, the payload, each bad field and how to
 * fix it. The caps come first and are checked without recursion: only a payload within them
 * reaches the check and canonicalJson. The echo of a rejected payload is clipped.
 */
export function parseSignal<N extends SignalName>(name: N, payload: unknown): Parsed<SignalPayload<N>> {
  const breach = jsonBreach(payload, SIGNAL_CAPS);
  if (breach) {
    const problem = `${breach.field}: ${breachProblem(breach)} (fix: ${SIGNAL_CAP_FIX[breach.cap]})`;
    return { ok: false, error: `${name} payload rejected before it was read: ${problem}`, problems: [problem] };
  }
  const found = SIGNAL_CHECKS[name](payload);
  if (found.length === 0) return { ok: true, value: payload as SignalPayload<N> };
  const problems = found.map((p) => `${p.field}: ${clip(p.problem, MAX_SIGNAL_ECHO)} (fix: ${p.fix})`);
  const echo = clip(canonicalJson(payload ?? null), MAX_SIGNAL_ECHO);
  return { ok: false, error: `${name} payload ${echo} rejected: ${problems.join('; ')}`, problems };
}

const SIGNAL_CAP_FIX: Record<JsonBreach['cap'], string> = {
  depth: `send the flat payload the signal takes (at most ${MAX_SIGNAL_DEPTH} levels; see \`datum resolve --help\`)`,
  chars: `send a payload of at most ${MAX_SIGNAL_CHARS} characters of JSON (a shorter note)`,
  values: `send a payload of at most ${MAX_SIGNAL_CHARS} characters of JSON`,
  type: 'send plain JSON: strings, finite numbers, booleans, null, arrays and objects',
};

export type RefreshVerdict = { verdict: 'rebind' | 'supersede' | 'refuse'; detail: string };

/**
 * refreshDesired: the same generation re-binds (only to content the authority really holds),
 * a newer one hands over, an older one is refused. The signal's digest must match the
 * authority's, so a refresh can never bind content nobody can see.
 */
export function judgeRefresh(
  bound: Pick<BoundIntent, 'generation' | 'digest'>,
  signal: RefreshDesiredPayload,
  authority: AuthorityView,
): RefreshVerdict {
  if (signal.generation < bound.generation) {
    return {
      verdict: 'refuse',
      detail: `refreshDesired to generation ${signal.generation} refused: this loop already holds newer generation ${bound.generation}.`,
    };
  }
  if (!authority.ok)
    return { verdict: 'refuse', detail: `refreshDesired refused: the authority cannot be read (${authority.error}).` };
  if (authority.generation !== signal.generation) {
    return {
      verdict: 'refuse',
      detail: `refreshDesired to generation ${signal.generation} refused: the authority is at generation ${authority.generation}.`,
    };
  }
  if (authority.digest !== signal.digest) {
    return {
      verdict: 'refuse',
      detail: `refreshDesired refused: generation ${signal.generation} has digest ${authority.digest} at the authority, not ${signal.digest}.`,
    };
  }
  if (signal.generation > bound.generation) {
    return {
      verdict: 'supersede',
      detail: `Generation ${signal.generation} supersedes ${bound.generation}; this loop hands over to datum/<node>/gen-${signal.generation} and ends.`,
    };
  }
  return {
    verdict: 'rebind',
    detail:
      signal.digest === bound.digest
        ? `Intent re-read at generation ${bound.generation}; digest unchanged.`
        : `Generation ${bound.generation} re-bound to digest ${signal.digest} on operator request.`,
  };
}

/** Signals that were rejected stay visible as INVALID_SIGNAL until a valid one of the same name arrives. */
export function recordSignal(history: History, name: SignalName, rejected: { error: string; at: string } | null): History {
  const rejected_signals = { ...history.rejected_signals };
  if (rejected) rejected_signals[name] = rejected;
  else delete rejected_signals[name];
  return { ...history, rejected_signals };
}

/** One INVALID_SIGNAL condition listing every signal name whose last payload was rejected. */
export function signalConditions(history: History) {
  const rejected = Object.entries(history.rejected_signals).sort(([a], [b]) => a.localeCompare(b));
  if (rejected.length === 0) return [];
  const message = rejected.map(([name, r]) => `A ${name} signal was rejected: ${r.error}`).join(' | ');
  return [
    draft('INVALID_SIGNAL', null, message, {
      signals: Object.fromEntries(rejected.map(([name, r]) => [name, { at: r.at, error: r.error }])),
    }),
  ];
}

/**
 * A ledger entry for something that happened to the loop rather than to the node (a signal
 * handled, a hand-over). It keeps the last decision's view of the node and says what changed.
 */
export function noteDecision(
  intent: BoundIntent,
  last: Decision | null,
  history: History,
  note: {
    status?: ConvergenceStatus;
    reason: NoteReason;
    detail: string;
    trigger?: RecheckTrigger;
    /** A resolveConflict's request to the agent, recorded so the ledger store's copy follows it at once. */
    resolution?: ResolutionRequest | null;
    /** A work item's resolution: who gave it (declared and recorded identity), what, and why. */
    work?: Decision['work_resolution'];
    /** An operator decision's author: proven by a key the node checked, or declared. */
    author?: Decision['author'];
  },
  now: string,
  /** Decision rules added after loops were running, answered by the workflow with patched(). */
  rules: (rule: DecisionRule) => boolean = () => true,
): { decision: Decision; history: History } {
  const status = note.status ?? carriedStatus(intent, last, rules);
  const keep = history.conditions.filter((c) => c.type !== 'INVALID_SIGNAL').map(({ since: _s, ...rest }) => rest);
  const conditions = mergeConditions(history.conditions, [...keep, ...signalConditions(history)], now);
  const decision: Decision = {
    node_id: intent.node,
    desired_generation: intent.generation,
    desired_digest: intent.digest,
    desired_provenance: intent.provenance,
    observed_at: last?.observed_at ?? null,
    observation_ttl: intent.policy.observation_ttl,
    observation_fresh: false,
    mode: last?.mode ?? null,
    resources: last?.resources ?? [],
    operator_exceptions: last?.operator_exceptions ?? [],
    planned_actions: [],
    authorized_actions: [],
    execution_evidence: [],
    attempt_count: history.attempt_count,
    retry_budget: intent.policy.retry_budget,
    backoff: { ...intent.policy.backoff, next_delay: null },
    post_action_observation: null,
    conflicting_writer_evidence: null,
    convergence_status: status,
    reason: note.reason,
    reason_detail: note.detail,
    recheck_trigger: note.trigger ??
      last?.recheck_trigger ?? { trigger: 'FRESH_OBSERVATION', not_before: null, detail: 'the next pass' },
    conditions,
    ...(history.hold ? { hold: history.hold } : {}),
  };
  if (note.resolution) decision.operator_resolution = resolutionRecord(note.resolution);
  if (note.work) decision.work_resolution = note.work;
  if (note.author) decision.author = note.author;
  return { decision, history: { ...history, conditions, last_status: status, last_reason: note.reason } };
}

/**
 * No note manufactures a status: a note carries the last decision's status only when that decision
 * judged the generation and digest the note is recorded for. After a re-bind to new content (or
 * with no decision yet) nothing has observed the node against this intent, so the note says what
 * a loop that cannot vouch for anything says, BLOCKED, and the pass that follows decides. Without
 * the rule (a loop recorded before it) the note copied the last status, CONVERGED included.
 */
function carriedStatus(intent: BoundIntent, last: Decision | null, rules: (rule: DecisionRule) => boolean): ConvergenceStatus {
  if (!last) return 'BLOCKED';
  const judgedThis = last.desired_generation === intent.generation && last.desired_digest === intent.digest;
  if (judgedThis || !rules(DECISION_RULE.noteCarriesOnlyObservedStatus)) return last.convergence_status;
  return 'BLOCKED';
}

type ResolutionRequest = RecordDecisionRequest & { kind: OperatorResolution['kind'] };

/** The request as the ledger keeps it: the entry already names the node. */
function resolutionRecord({ node: _node, ...request }: ResolutionRequest): OperatorResolution {
  return request;
}

/**
 * What makes two decisions "the same" for the ledger: status, reason, ownership, observed
 * values, actions and open conditions; not times, ages or markers. A pass that repaired is
 * compared by what its post-action probe saw, so the steady pass after a repair that held is
 * "the same" and appends nothing. A steady-state pass whose fingerprint equals the last
 * recorded one appends nothing and upserts nothing.
 */
export function decisionFingerprint(d: Decision): string {
  const post = d.post_action_observation as {
    resources?: Record<string, { value: unknown; drift: boolean; ownership: string }>;
  } | null;
  const resources = post?.resources
    ? Object.entries(post.resources).map(([k, r]) => [k, r.ownership, r.value, r.drift])
    : d.resources.map((r) => [r.resource_key, r.ownership, r.observed, r.drift]);
  return canonicalJson({
    g: d.desired_generation,
    digest: d.desired_digest,
    status: d.convergence_status,
    reason: d.reason === 'CONVERGED_AFTER_REPAIR' ? 'ALREADY_CONVERGED' : d.reason,
    mode: d.mode,
    resources,
    conditions: d.conditions.map((c) => [c.type, c.resource_key, c.resolver]),
  });
}
