/*
 * The one-line summaries the Temporal Web UI shows on each activity and timer of a reconcile
 * loop ("observe N-24", "apply write app-config", "backoff 2/3", "resync"), so its timeline
 * reads as the loop. Metadata only: a summary is not part of a command's identity, so adding or
 * changing one never breaks the replay of a recorded history (test/workflow/replay.test.ts).
 *
 * Resource keys and node names come from outside; a summary is cut to one short line so a hostile
 * name can neither break the UI's layout nor grow every scheduled command.
 */
import { waitsForResync, type Decision, type History, type Policy } from '../domain';

/** Longest summary, in characters: the UI's timeline shows about this much. */
const MAX_SUMMARY = 120;

/** One line, control characters replaced, at most MAX_SUMMARY characters (cut with an ellipsis). */
export function summaryLine(text: string): string {
  // eslint-disable-next-line no-control-regex
  const line = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').trim();
  return line.length <= MAX_SUMMARY ? line : `${line.slice(0, MAX_SUMMARY - 1)}…`;
}

/**
 * The wait between passes, named as the last decision timed it (nextWakeMs): a repair's backoff
 * ("backoff 2/3"), a recheck the decision asked for ("recheck STALE_OBSERVATION"), or the resync
 * interval ("resync", which is what every CONVERGED decision and a decision without a time asks).
 */
export function waitSummary(decision: Decision | null, history: History, policy: Policy): string {
  if (!decision || waitsForResync(decision)) return 'resync';
  if (decision.convergence_status === 'RETRY') return `backoff ${history.attempt_count}/${policy.retry_budget}`;
  return summaryLine(`recheck ${decision.reason}`);
}
