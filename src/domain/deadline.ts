import { DECISION_RULE } from '../contract/patches';
import { draft } from './conditions';
import { addMs, durationMs, msBetween } from './duration';
import { backoffMs, list } from './verdict';
import type { StageInput } from './writers';
import type { BoundIntent } from '../contract/desired';
import type { History } from '../contract/history';
import type { Decision } from '../contract/ledger';

/*
 * The repair episode's time budget (policy.repair_deadline, seed 004: "a budget of attempts and
 * time"). An episode begins with the first decision that authorized a repair and ends where the
 * ladder says so (ends_episode: converged, or drift observe mode holds back). Once the deadline
 * has passed, or the next retry could only come after it, the loop authorizes nothing more and
 * says BLOCKED/REPAIR_DEADLINE_EXCEEDED: a work item hands the node to a resolver.
 * The clock is the workflow's (`now` of each decision), so replay decides the same.
 */

/** The episode a decision belongs to and the moment its repair_deadline passes. */
export interface EpisodeClock {
  started_at: string;
  repair_deadline: string;
  ends_at: string;
}

/**
 * The clock of the episode this decision belongs to, or null when the policy sets no deadline
 * or no episode is open. An episode not yet started begins now when this decision authorizes a
 * repair (pass `authorizes`), so its first retry is already held to the deadline.
 */
export function episodeClock(intent: BoundIntent, history: History, now: string, authorizes = true): EpisodeClock | null {
  const deadline = intent.policy.repair_deadline;
  if (deadline === undefined) return null;
  const started = history.episode_started ?? (authorizes ? now : null);
  if (started === null) return null;
  return { started_at: started, repair_deadline: deadline, ends_at: addMs(started, durationMs(deadline)) };
}

/** Whether `at` is at or past the deadline: asks the rule only then, where it changes the outcome. */
function reached(clock: EpisodeClock | null, at: string, rules: StageInput['rules']): clock is EpisodeClock {
  if (clock === null || msBetween(at, clock.ends_at) > 0) return false;
  return rules(DECISION_RULE.repairDeadline);
}

/**
 * Before acting: the deadline has passed, or a decision of this episode already said its next
 * retry would come after it (REPAIR_DEADLINE_EXCEEDED is open), so nothing more is authorized in
 * this episode. A pass that comes early (a resync, a watch) must not retry what that decision stopped.
 */
export function deadlinePassed(input: StageInput): EpisodeClock | null {
  const clock = episodeClock(input.intent, input.history, input.now, false);
  if (clock === null) return null;
  const raised = input.history.conditions.some(
    (c) =>
      c.type === 'REPAIR_DEADLINE_EXCEEDED' &&
      (c.evidence as { episode_started?: unknown })?.episode_started === clock.started_at,
  );
  return reached(clock, raised ? clock.ends_at : input.now, input.rules) ? clock : null;
}

/**
 * After acting: the keys a RETRY would come back for, when that retry could only run at or after
 * the deadline (the next pass would withhold it). Empty while retry_budget is spent: that rung
 * says so, and it is the older word.
 */
export function overdueRetries(input: StageInput, keys: string[]): string[] {
  const { intent, carried, now } = input;
  if (keys.length === 0 || carried.attempt_count >= intent.policy.retry_budget) return [];
  const nextAttempt = addMs(now, backoffMs(intent, Math.max(carried.attempt_count, 1)));
  return reached(episodeClock(intent, input.history, now), nextAttempt, input.rules) ? keys : [];
}

/** The start of the episode a decision belongs to: the one carried, else this decision's if it authorized a repair. */
export function episodeStartOf(history: History, authorized: number, now: string): string | undefined {
  return history.episode_started ?? (authorized > 0 ? now : undefined);
}

/** A fresh episode clock (a retake, a grant): the next authorized repair starts it again. */
export function withoutEpisode(history: History): History {
  const { episode_started: _ended, ...rest } = history;
  return rest;
}

/** The ledger's record of the episode a decision belongs to, when the policy sets a deadline. */
export function episodeRecord(intent: BoundIntent, startedAt: string | undefined): Pick<Decision, 'repair_episode'> {
  const deadline = intent.policy.repair_deadline;
  if (deadline === undefined || startedAt === undefined) return {};
  return { repair_episode: { started_at: startedAt, repair_deadline: deadline } };
}

/** What the REPAIR_DEADLINE_EXCEEDED rung says: the sentence and one condition per key. */
export function sayDeadline(
  e: { intent: BoundIntent; history: History; now: string; phase: 'pre' | 'post'; attempts: number; deadline_withheld: string[] },
  triedFor: (key: string) => string[],
) {
  const clock = episodeClock(e.intent, e.history, e.now);
  const keys = e.deadline_withheld;
  const deadline = e.intent.policy.repair_deadline ?? '';
  const started = clock?.started_at ?? e.now;
  const when =
    e.phase === 'pre' || (clock !== null && msBetween(e.now, clock.ends_at) <= 0)
      ? `passed at ${clock?.ends_at ?? e.now}`
      : `passes at ${clock?.ends_at ?? e.now}, before the next retry could run`;
  return {
    detail: `The repair episode of ${list(keys)} began at ${started} and its repair_deadline of ${deadline} ${when}; after ${e.attempts} attempt(s) they still differ, so Datum stops repairing and an operator decides.`,
    recheck: 'an observation showing the resource at desired, a grant, or a new generation',
    drafts: keys.map((key) =>
      draft(
        'REPAIR_DEADLINE_EXCEEDED',
        key,
        `Repair of "${key}" did not converge within repair_deadline ${deadline} (episode began ${started}, ${e.attempts} attempt(s)).`,
        { attempt_count: e.attempts, episode_started: started, repair_deadline: deadline },
        triedFor(key),
      ),
    ),
  };
}
