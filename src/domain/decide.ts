import type { Json } from './canonical';
export type { DecisionRule } from './writers';
import { authorize } from './authorize';
import type { Assessment } from './classify';
import { mergeConditions } from './conditions';
import { episodeRecord, episodeStartOf, withoutEpisode } from './deadline';
import { formatDuration } from './duration';
import {
  carriedResourceConditions,
  laterGateConditions,
  runGates,
  snapshotFresh,
  type ClosedGate,
  type GateInput,
} from './gates';
import { judgeProbe, judgeWithoutProbe, wasExecuted } from './judge';
import { climb } from './ladder';
import type { Judgement } from './evidence';
import { onResyncCadence } from './loop';
import type { DecideInput, DecideResult } from './inputs';
import { idempotencyKey } from './plan';
import { decisionsToRecord, heldDecisions, newIntentSentence, seedDecisions, type SeededHistory } from './decisions';
import { signalConditions } from './signals';
import { classified, type Classified, type Verdict } from './verdict';
import type { StageInput } from './writers';
import type { BoundIntent } from '../contract/desired';
import type { History } from '../contract/history';
import type { Decision } from '../contract/ledger';
import type { Observation } from '../contract/observation';

export type { AuthorityView, DecideInput, DecideResult } from './inputs';

/**
 * The one place where a pass's evidence becomes a status. Pure: the same input always gives
 * the same decision, and time is an input. Without `acted` it judges a pre-action snapshot and
 * authorizes the actions the workflow may run; with `acted` it judges the fresh post-action
 * probe. CONVERGED only ever comes from a fresh snapshot that matches every enforced MANAGED
 * resource; command success is recorded as execution evidence and nothing more.
 */
export function decide(given: DecideInput): DecideResult {
  // 0. The operator's durable decisions (yields, open conflicts) the agent reports for specs that
  //    have not changed are carried into the history: a new generation starts where they left it.
  const seeded = seedDecisions(given.intent, given.acted?.pre ?? given.observation, given.history, given.rules);
  const input: DecideInput = { ...given, history: seeded.history };

  // 1. Frame the pass: classify each snapshot once, count the attempt, fill what every entry shares.
  const pass = framePass(input);

  // 2. Gates, in the seed's order: reach the node, know the intent is current, then trust the snapshot.
  const gates = runGates(gateInput(input, pass.judged));
  if (gates.closed) return withOperatorDecisions(buildDecision(pass, gateOutcome(pass, gates.closed)), input, seeded);

  // 3. Judge: authorize what may run from the pre-action snapshot, or judge the fresh probe after acting.
  const judgement = input.acted ? judgeProbe(gates.open, input.acted, pass.stage) : authorize(gates.open, pass.stage);

  // 4. The ladder: the first rung that holds gives the status, the reason and the recheck trigger.
  return withOperatorDecisions(buildDecision(pass, ladderOutcome(pass, judgement)), input, seeded);
}

/**
 * The newest snapshot of the agent's decisions: the judged one, else the one the pass acted on.
 * Seeding reads the pre-action one instead: the pass was planned from it, and an apply of a new
 * spec ends the decision on the agent before the probe.
 */
function snapshotOf(input: DecideInput): Observation | null {
  return input.observation ?? input.acted?.pre ?? null;
}

/**
 * 5. The decisions the loop holds go into the entry (the ledger store's durable copy), decisions a
 *    changed spec ended are said to be new intent, and what the agent lacks is listed to send.
 */
function withOperatorDecisions(result: DecideResult, input: DecideInput, seeded: SeededHistory): DecideResult {
  const held = heldDecisions(input.intent, result.history);
  const decision: Decision = { ...result.decision };
  if (held.length > 0) decision.operator_decisions = held;
  if (seeded.new_intent.length > 0) {
    decision.new_intent = seeded.new_intent;
    decision.reason_detail = `${decision.reason_detail}${newIntentSentence(seeded.new_intent)}`;
  }
  return {
    ...result,
    decision,
    decisions_to_record: decisionsToRecord(input.intent, snapshotOf(input), result.history, input.rules),
  };
}

function gateInput(input: DecideInput, judged: Classified | null): GateInput {
  return {
    intent: input.intent,
    stale_retakes: input.history.stale_retakes ?? 0,
    unreachable_in_a_row: input.history.unreachable_in_a_row ?? 0,
    authority: input.authority,
    judged,
    unreachable: input.unreachable ?? null,
    now: input.now,
    rules: input.rules,
  };
}

/** The fields of a Decision that the pass fixes before anything is judged. */
type Frame = Omit<
  Decision,
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
  | 'conditions'
>;

interface Pass {
  input: DecideInput;
  stage: StageInput;
  /** The snapshot the actions were planned from (after acting: acted.pre). */
  basis: Classified | null;
  /** The snapshot this decision judges (after acting: the fresh probe). */
  judged: Classified | null;
  frame: Frame;
}

function framePass(input: DecideInput): Pass {
  const { intent, history, now, acted } = input;
  const policy = intent.policy;
  const judged = input.observation ? classified(intent, input.observation, history) : null;
  const basis = acted ? classified(intent, acted.pre, history) : judged;
  const evidence = acted?.evidence ?? [];
  // Refused and skipped actions were not carried out: they are not an attempt.
  const attempt_count = history.attempt_count + (evidence.some(wasExecuted) ? 1 : 0);
  const action_seq = Math.max(history.action_seq, ...(acted?.actions ?? []).map((a) => a.action_seq));
  const carried: History = { ...history, attempt_count, action_seq };
  const frame: Frame = {
    node_id: intent.node,
    desired_generation: intent.generation,
    desired_digest: intent.digest,
    desired_provenance: intent.provenance,
    observed_at: basis?.observation.observed_at ?? null,
    observation_ttl: policy.observation_ttl,
    observation_fresh: basis ? snapshotFresh(basis.observation.observed_at, now, policy.observation_ttl, input.rules) : false,
    mode: basis?.observation.mode ?? null,
    execution_evidence: evidence,
    attempt_count,
    retry_budget: policy.retry_budget,
    post_action_observation: acted ? summarizePost(judged) : null,
    ...fenceResetOf(basis?.observation ?? null),
    // Every entry while the node is held says so, and by whom.
    ...(history.hold ? { hold: history.hold } : {}),
  };
  return { input, stage: { intent, now, history, carried, rules: input.rules ?? (() => true) }, basis, judged, frame };
}

/**
 * The last reset of the node's fence, as the agent reported it with the snapshot: carried into the
 * entry as it came, so the ledger says the fence was moved back, by whom and why. Activity results
 * reach the workflow unparsed: a snapshot from an older agent has no such field.
 */
function fenceResetOf(observation: Observation | null): Pick<Decision, 'fence_reset'> {
  const reset = observation?.fence_reset ?? null;
  return reset === null ? {} : { fence_reset: reset };
}

/** Everything a Decision says beyond its frame, from a closed gate or a rung of the ladder. */
interface Outcome {
  verdict: Verdict;
  /** The snapshot whose resources the entry lists; null lists none. */
  resources: Classified | null;
  record: Pick<Decision, 'planned_actions' | 'authorized_actions' | 'conflicting_writer_evidence'>;
  /** The history to carry, before this decision's conditions and status are added. */
  history: History;
}

function gateOutcome(pass: Pass, closed: ClosedGate): Outcome {
  const { history, acted } = pass.input;
  // After acting, a gate closed on the probe: the agent's own answers need no probe, and are judged.
  const heard = acted ? judgeWithoutProbe(acted, pass.stage) : null;
  return {
    // A gate cannot re-judge resources, nor the gates after it: their conditions are carried as they were.
    verdict: {
      ...closed.verdict,
      detail: `${closed.verdict.detail}${heard?.said ?? ''}`,
      drafts: [
        // First, so that a conflict reopened by this pass's answers replaces the carried one.
        ...(heard?.drafts ?? []),
        ...carriedResourceConditions(history.conditions),
        ...laterGateConditions(gateInput(pass.input, pass.judged), history.conditions, closed.gate),
        ...closed.verdict.drafts,
      ],
    },
    resources: closed.lists_resources ? pass.basis : null,
    record: {
      planned_actions: (acted?.planned ?? []).map((p) => ({ ...p })),
      authorized_actions: acted?.actions ?? [],
      conflicting_writer_evidence: heard?.conflict_evidence ?? null,
    },
    history: heard?.history ?? pass.stage.carried,
  };
}

function ladderOutcome(pass: Pass, judgement: Judgement): Outcome {
  return {
    verdict: climb(judgement.evidence),
    resources: pass.basis,
    record: {
      planned_actions: judgement.planned,
      authorized_actions: judgement.authorized,
      conflicting_writer_evidence: judgement.conflict_evidence,
    },
    history: judgement.history,
  };
}

/** A count of passes in a row: one more on a hit; otherwise a snapshot ends the run, and no snapshot keeps it. */
const inARow = (hit: boolean, answered: boolean, before = 0): number => (hit ? before + 1 : answered ? 0 : before);

/** The one function that builds a Decision, and the history the next decision starts from. */
function buildDecision(pass: Pass, outcome: Outcome): DecideResult {
  const { intent, history, now } = pass.input;
  const { verdict } = outcome;
  const conditions = mergeConditions(history.conditions, [...verdict.drafts, ...signalConditions(history)], now);
  const assessments = outcome.resources?.assessments ?? [];
  const episode = episodeStartOf(outcome.history, outcome.record.authorized_actions.length, now);
  const decision: Decision = {
    ...pass.frame,
    resources: assessments.map(toEntry(intent)),
    operator_exceptions: exceptions(assessments),
    planned_actions: outcome.record.planned_actions,
    authorized_actions: outcome.record.authorized_actions,
    backoff: {
      ...intent.policy.backoff,
      next_delay: verdict.next_delay_ms === null ? null : formatDuration(verdict.next_delay_ms),
    },
    conflicting_writer_evidence: outcome.record.conflicting_writer_evidence,
    convergence_status: verdict.status,
    reason: verdict.reason,
    reason_detail: verdict.detail,
    recheck_trigger: onResyncCadence(verdict.recheck, verdict.status, pass.input.resync_at, now),
    conditions,
    ...episodeRecord(intent, episode),
  };
  const next: History = {
    ...withoutEpisode(outcome.history),
    ...(verdict.ends_episode || episode === undefined ? {} : { episode_started: episode }),
    attempt_count: verdict.ends_episode ? 0 : outcome.history.attempt_count,
    // Only a pass judges a snapshot's age: a fresh one ends the run of stale ones.
    stale_retakes: inARow(verdict.reason === 'STALE_OBSERVATION', pass.judged !== null, history.stale_retakes),
    // An answer ends the run of passes without one (each of which the gate times its re-probe by).
    unreachable_in_a_row: inARow(verdict.reason === 'NODE_UNREACHABLE', pass.judged !== null, history.unreachable_in_a_row),
    conditions,
    last_status: verdict.status,
    last_reason: verdict.reason,
  };
  return { decision, history: next };
}

const toEntry =
  (intent: BoundIntent) =>
  (a: Assessment): Decision['resources'][number] => {
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
    .map((a) => ({
      resource_key: a.resource_key,
      provenance: a.ownership_provenance,
      desired: a.desired,
      observed: a.observed?.value ?? null,
    }));
}

function summarizePost(post: Classified | null): Json {
  if (!post) return null;
  const resources: Record<string, Json> = {};
  for (const a of post.assessments) {
    resources[a.resource_key] = {
      value: a.observed?.value ?? null,
      marker: a.observed?.marker ?? null,
      drift: a.drift,
      ownership: a.ownership,
    };
  }
  return { observed_at: post.observation.observed_at, resources };
}
