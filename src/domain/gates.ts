import type { Json } from './canonical';
import { draft, type ConditionDraft } from './conditions';
import type { AuthorityView } from './inputs';
import { addMs, durationMs, formatDuration, msBetween } from './duration';
import { backoffMs, trigger, type Classified, type Verdict } from './verdict';
import type { BoundIntent } from '../contract/desired';
import type { Condition } from '../contract/ledger';
import { DECISION_RULE, type DecisionRule } from '../contract/patches';
import type { ConditionType, Reason, RecheckTriggerKind } from '../contract/vocabulary';

/*
 * Stage 2: the gates. Before anything is judged the pass must reach the node, know its intent is
 * current, and trust the snapshot. Each gate is a rung that closes on the evidence it names;
 * the first closed gate decides BLOCKED, and nothing is planned or authorized.
 */

export interface GateInput {
  intent: BoundIntent;
  /** Stale snapshots in a row before this one (History.stale_retakes). */
  stale_retakes: number;
  /** Passes in a row before this one the node did not answer (History.unreachable_in_a_row). */
  unreachable_in_a_row: number;
  authority: AuthorityView;
  /** The snapshot this decision judges, classified; null when the node did not answer. */
  judged: Classified | null;
  /** Why there is no snapshot, when there is none. */
  unreachable: string | null;
  now: string;
  /** Whether a rule added after a loop started is in force for it; default: every rule is. */
  rules?: (rule: DecisionRule) => boolean;
}

/**
 * How far ahead of the controller's clock a snapshot's observed_at may be and still count: clocks
 * on NTP agree within milliseconds. Further ahead, the agent's clock is wrong, and the snapshot's
 * age cannot be told: one stamped an hour ahead would look fresh for an hour past its TTL.
 */
export const MAX_CLOCK_SKEW_MS = 5_000;

/**
 * Whether a snapshot taken at `observedAt` is fresh at `now`: no older than observation_ttl, and
 * not from the future beyond MAX_CLOCK_SKEW_MS (under the rule future-snapshot-is-stale, asked only
 * where it decides).
 */
export function snapshotFresh(
  observedAt: string,
  now: string,
  ttl: string,
  rules: (rule: DecisionRule) => boolean = () => true,
): boolean {
  const age = msBetween(observedAt, now);
  if (age > durationMs(ttl)) return false;
  return !(age < -MAX_CLOCK_SKEW_MS && rules(DECISION_RULE.futureSnapshotIsStale));
}

interface Said {
  detail: string;
  recheck: string;
  not_before?: string | null;
  /** The condition's evidence. */
  evidence: Json;
  /** What the loop has tried about it so far. */
  tried?: string[];
}

/** What the table says of a gate, whatever evidence closes it. */
interface GateFacts {
  /** What the gate needs to be judged: the node's snapshot, the authority's content, or nothing beyond the read itself. */
  needs: GateNeeds;
  reason: Reason;
  condition: ConditionType;
  trigger: RecheckTriggerKind;
  /** Whether the entry lists the snapshot's resources (a node or authority that cannot be read has none to show). */
  lists_resources: boolean;
  /** Why this gate is checked before the next one. */
  outranks: string;
}

type GateNeeds = 'snapshot' | 'authority' | 'none';

/** A gate whose `when` finds the evidence `T` that closes it (null: the gate is open). */
interface Gate<T> extends GateFacts {
  when: (g: GateInput) => T | null;
  say: (hit: T, g: GateInput) => Said;
}

/** A gate as the table holds it, its evidence type hidden behind `close`. */
export interface GateRung extends GateFacts {
  /** The verdict when the gate is closed, null when it is open. */
  close: (g: GateInput) => Verdict | null;
}

export interface ClosedGate {
  gate: GateRung;
  lists_resources: boolean;
  verdict: Verdict;
}

function verdictOf<T>(g: Gate<T>, hit: T, input: GateInput): Verdict {
  const said = g.say(hit, input);
  return {
    status: 'BLOCKED',
    reason: g.reason,
    detail: said.detail,
    recheck: trigger(g.trigger, said.recheck, said.not_before ?? null),
    drafts: [draft(g.condition, null, said.detail, said.evidence, said.tried ?? [])],
    next_delay_ms: null,
    ends_episode: false,
  };
}

function gate<T>(g: Gate<T>): GateRung {
  const { when: _when, say: _say, ...facts } = g;
  const close = (input: GateInput): Verdict | null => {
    const hit = g.when(input);
    return hit === null ? null : verdictOf(g, hit, input);
  };
  return { ...facts, close };
}

/** What the authority holds, once it could be read. */
const current = (g: GateInput): { generation: number; digest: string } | null =>
  g.authority.ok ? { generation: g.authority.generation, digest: g.authority.digest } : null;

const whyUnreachable = (g: GateInput) => g.unreachable ?? 'the agent did not answer';

const unreachable: Gate<{ why: string }> = {
  needs: 'snapshot',
  reason: 'NODE_UNREACHABLE',
  condition: 'NODE_UNREACHABLE',
  trigger: 'FRESH_OBSERVATION',
  lists_resources: false,
  outranks: 'Without a snapshot there is nothing to judge, not even the agent config it would carry.',
  when: (g) => (g.judged ? null : { why: whyUnreachable(g) }),
  say: ({ why }, g) => {
    const detail = `Node ${g.intent.node} is unreachable (${why}); nothing can be decided or repaired until it answers.`;
    const atResync = { detail, recheck: 'the node answers with a fresh snapshot', evidence: { error: why } };
    // An agent that was only late (a controller or server under load) answers the next ask: the
    // loop asks again soon, not at the next resync. A node still silent after UNANSWERED_REPROBES
    // is gone for longer, and is asked at the resync cadence its policy sets.
    const unanswered = g.unreachable_in_a_row + 1;
    if (unanswered > UNANSWERED_REPROBES || !(g.rules?.(DECISION_RULE.unreachableReprobesSoon) ?? true)) return atResync;
    const waitMs = reprobeMs(g.intent, unanswered);
    return {
      ...atResync,
      recheck: `the node answers with a fresh snapshot; the loop asks it again in ${formatDuration(waitMs)}, then at resync_interval`,
      not_before: addMs(g.now, waitMs),
      tried: [`${unanswered} pass(es) in a row without an answer; the next asks in ${formatDuration(waitMs)}`],
    };
  },
};
const UNREACHABLE = gate(unreachable);

export const GATES: readonly GateRung[] = [
  UNREACHABLE,
  gate({
    needs: 'snapshot',
    reason: 'AGENT_CONFIG_INVALID',
    condition: 'AGENT_CONFIG_INVALID',
    trigger: 'AGENT_CONFIG_CHANGE',
    lists_resources: false,
    outranks: 'A snapshot whose ownership and mode are unknown cannot be judged under any intent, current or not.',
    when: (g) => (g.judged?.observation.config_error ? { error: g.judged.observation.config_error } : null),
    say: ({ error }) => ({
      detail: `The agent's local config is invalid, so ownership and mode are unknown: ${error}`,
      recheck: "the node's agent.yaml is corrected",
      evidence: { error },
    }),
  }),
  gate({
    needs: 'none',
    reason: 'INVALID_DESIRED_STATE',
    condition: 'INVALID_DESIRED_STATE',
    trigger: 'DESIRED_STATE_CHANGE',
    lists_resources: false,
    outranks: 'Whether the bound intent is current cannot be asked of an authority that cannot be read.',
    when: (g) => (g.authority.ok ? null : { error: g.authority.error }),
    say: ({ error }, g) => ({
      detail: `The desired state for ${g.intent.node} can no longer be read or validated: ${error}`,
      recheck: 'the desired-state file is fixed',
      evidence: { error },
    }),
  }),
  gate({
    needs: 'authority',
    reason: 'STALE_INTENT',
    condition: 'STALE_INTENT',
    trigger: 'REFRESHED_INTENT',
    lists_resources: true,
    outranks:
      'A newer generation (a node back from offline) and a regressed one exclude each other; a refresh resolves this one.',
    when: (g) => {
      const c = current(g);
      return c && c.generation > g.intent.generation ? c : null;
    },
    say: (c, g) => ({
      detail: `This loop holds generation ${g.intent.generation} but the authority is at generation ${c.generation}; no action until intent is refreshed.`,
      recheck: `refreshDesired or a rollout to generation ${c.generation}`,
      evidence: { bound_generation: g.intent.generation, authority_generation: c.generation, authority_digest: c.digest },
    }),
  }),
  gate({
    needs: 'authority',
    reason: 'AUTHORITY_REGRESSED',
    condition: 'STALE_INTENT',
    trigger: 'DESIRED_STATE_CHANGE',
    lists_resources: true,
    outranks: 'A different generation says more than a different digest: digests are compared within one generation.',
    when: (g) => {
      const c = current(g);
      return c && c.generation < g.intent.generation ? c : null;
    },
    say: (c, g) => ({
      detail: `The authority went back to generation ${c.generation} while this loop holds ${g.intent.generation}; no action until the authority is at ${g.intent.generation} again.`,
      recheck: `the authority declares generation ${g.intent.generation} or higher`,
      evidence: { bound_generation: g.intent.generation, authority_generation: c.generation },
    }),
  }),
  gate({
    needs: 'authority',
    reason: 'INTENT_DIGEST_MISMATCH',
    condition: 'INTENT_DIGEST_MISMATCH',
    trigger: 'DESIRED_STATE_CHANGE',
    lists_resources: true,
    outranks:
      'Intent comes before the snapshot: a fresher snapshot cannot unblock changed intent, and Datum re-takes a stale one itself.',
    when: (g) => {
      const c = current(g);
      if (!c || c.digest === g.intent.digest) return null;
      // Another generation's content is no change of this one's: STALE_INTENT or AUTHORITY_REGRESSED says what happened.
      if (c.generation !== g.intent.generation && (g.rules?.(DECISION_RULE.digestMismatchWithinGeneration) ?? true)) return null;
      return c;
    },
    say: (c, g) => ({
      detail: `Generation ${g.intent.generation} now has different content (digest ${short(c.digest)}, bound ${short(g.intent.digest)}); raise the generation for a change of intent.`,
      recheck: 'a new generation number for the changed content, or the original content restored',
      evidence: { bound_digest: g.intent.digest, authority_digest: c.digest },
    }),
  }),
  gate({
    // Judged only with the authority, like the generation gate that shares its condition: without
    // it that gate's STALE_INTENT is carried, and this one must not judge it away.
    needs: 'authority',
    reason: 'STALE_INTENT',
    condition: 'STALE_INTENT',
    trigger: 'REFRESHED_INTENT',
    lists_resources: true,
    outranks:
      'Past its expires the bound intent is stale however fresh the snapshot (a freeze: its author vouches for it no longer); the node is still observed and shown.',
    when: (g) =>
      g.intent.expires !== undefined && msBetween(g.intent.expires, g.now) > 0 ? { expires: g.intent.expires } : null,
    say: ({ expires }, g) => ({
      detail: `Generation ${g.intent.generation} expired at ${expires} (its expires:): stale intent, which Datum does not act on; the node is still observed. Its author signs it again with a later expires, or raises a new generation.`,
      recheck: `desired/nodes/${g.intent.node}.yaml signed again with a later expires (datum sign), then datum refresh ${g.intent.node}; or a new generation`,
      evidence: { bound_generation: g.intent.generation, expires },
    }),
  }),
  gate({
    needs: 'snapshot',
    reason: 'STALE_OBSERVATION',
    condition: 'STALE_OBSERVATION',
    trigger: 'FRESH_OBSERVATION',
    lists_resources: true,
    outranks: 'The last gate: past it, a fresh snapshot under current intent goes to the ladder.',
    when: (g) => {
      const o = g.judged?.observation;
      if (!o || snapshotFresh(o.observed_at, g.now, g.intent.policy.observation_ttl, g.rules)) return null;
      const age = msBetween(o.observed_at, g.now);
      const ahead = age < 0;
      // A stale snapshot's age to the millisecond; one from the future in whole seconds.
      return { observation: o, age: formatDuration(ahead ? Math.round(-age / 1000) * 1000 : age), ahead };
    },
    say: ({ observation, age, ahead }, g): Said => {
      const policy = g.intent.policy;
      const retake = g.stale_retakes + 1;
      const waitMs = restaleMs(g.intent, retake);
      if (ahead)
        return {
          detail: `The snapshot's observed_at is ${age} ahead of the controller's clock, more than the ${formatDuration(MAX_CLOCK_SKEW_MS)} clocks may disagree: the agent's clock runs ahead, so the snapshot's age cannot be told, and nothing is acted on.`,
          recheck: `the node's clock is corrected (NTP), then a snapshot younger than ${policy.observation_ttl}; the loop takes one in ${formatDuration(waitMs)}`,
          not_before: addMs(g.now, waitMs),
          evidence: {
            observed_at: observation.observed_at,
            heartbeat_at: observation.heartbeat_at,
            ahead_by: age,
            stale_in_a_row: retake,
          },
          tried: [`${retake} unusable snapshot(s) in a row; the next is taken in ${formatDuration(waitMs)}`],
        };
      return {
        detail: `The snapshot is ${age} old, past observation_ttl ${policy.observation_ttl}; a heartbeat does not make it fresh, so nothing is acted on.`,
        // Datum can take that snapshot itself: soon, not at the next resync (which may be many
        // minutes away in watch mode), yet not back to back if every snapshot arrives stale.
        recheck: `a snapshot younger than ${policy.observation_ttl}, which the loop takes in ${formatDuration(waitMs)}`,
        not_before: addMs(g.now, waitMs),
        evidence: { observed_at: observation.observed_at, heartbeat_at: observation.heartbeat_at, age, stale_in_a_row: retake },
        tried: [`${retake} stale snapshot(s) in a row; the next is taken in ${formatDuration(waitMs)}`],
      };
    },
  }),
];

/**
 * Conditions about the pass itself (can the node be reached, is the intent current, is the
 * snapshot fresh): the gates' own, and INVALID_SIGNAL, which signalConditions raises again from
 * the loop's history on every pass. They are re-judged on every pass; the rest are about resources
 * and can only be re-judged from a fresh observation under current intent.
 */
export const GATE_CONDITIONS: readonly ConditionType[] = [...new Set(GATES.map((g) => g.condition)), 'INVALID_SIGNAL'];

/** Resource conditions carried unchanged through a pass that could not re-judge them. */
export function carriedResourceConditions(previous: Condition[]): ConditionDraft[] {
  return previous.filter((c) => !GATE_CONDITIONS.includes(c.type)).map(({ since: _since, ...rest }) => rest);
}

/**
 * The conditions of the gates after a closed one, which the pass never reached: judged now where
 * they need only the authority (an unreachable node's intent is still known to be stale), and
 * carried unchanged where they need the snapshot this pass does not have.
 */
export function laterGateConditions(g: GateInput, previous: Condition[], closed: GateRung): ConditionDraft[] {
  const later = GATES.slice(GATES.indexOf(closed) + 1);
  const judged = later.filter((rung) => rung.needs === 'none' || (rung.needs === 'authority' && g.authority.ok));
  const drafts = judged.flatMap((rung) => rung.close(g)?.drafts ?? []);
  const unjudged = later
    .filter((rung) => !judged.includes(rung) && !judged.some((j) => j.condition === rung.condition))
    .map((rung) => rung.condition);
  const carried = previous
    .filter((c) => unjudged.includes(c.type) && c.type !== closed.condition)
    .map(({ since: _since, ...rest }) => rest);
  return [...drafts, ...carried];
}

/** The first closed gate, or the snapshot to judge when every gate is open. */
export function runGates(g: GateInput): { closed: ClosedGate; open?: undefined } | { closed: null; open: Classified } {
  for (const rung of GATES) {
    const verdict = rung.close(g);
    if (verdict) return { closed: { gate: rung, lists_resources: rung.lists_resources, verdict } };
  }
  // Every gate is open, so the node answered: the first gate closes when there is no snapshot.
  if (g.judged) return { closed: null, open: g.judged };
  return {
    closed: { gate: UNREACHABLE, lists_resources: false, verdict: verdictOf(unreachable, { why: whyUnreachable(g) }, g) },
  };
}

/** When the loop re-observes after a stale snapshot: half the TTL, within backoff.initial and resync_interval. */
export function restaleMs(intent: BoundIntent, retake: number): number {
  const policy = intent.policy;
  const first = Math.min(
    durationMs(policy.resync_interval),
    Math.max(durationMs(policy.backoff.initial), durationMs(policy.observation_ttl) / 2),
  );
  // Each further stale snapshot in a row backs off by policy.backoff (the loop still re-observes
  // at resync_interval at the latest: nextWakeMs caps it).
  return retake <= 1 ? first : Math.max(first, backoffMs(intent, retake));
}

/**
 * Passes in a row without an answer after which the loop asks the node again by itself, soon
 * (rule unreachable-reprobes-soon); after more, it waits for its resync.
 */
export const UNANSWERED_REPROBES = 2;

/**
 * When the loop asks a node again after the `unanswered`-th pass in a row it did not answer:
 * policy.backoff for that many (the loop still asks at resync_interval at the latest: nextWakeMs
 * caps it). The pass that found it unreachable has already waited for it (node_timeout).
 */
export function reprobeMs(intent: BoundIntent, unanswered: number): number {
  return Math.min(durationMs(intent.policy.resync_interval), backoffMs(intent, unanswered));
}

function short(digest: string): string {
  return digest.slice(0, 19);
}
