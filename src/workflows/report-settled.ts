import { getExternalWorkflowHandle } from '@temporalio/workflow';
import { nodeSettledSignal, type SettledReport } from '../contract';
import { settlesRollout, type Decision, type History } from '../domain';
import { ROLLOUT_WAITS } from './patches';

/** A rollout's id, as rolloutWorkflowId spells it: a loop tells no other workflow. */
export const isRolloutId = (id: unknown): id is string =>
  typeof id === 'string' && /^datum-rollout\/[\x21-\x7e]{1,400}$/.test(id);

/** Whom a loop tells when it settles: the rollout its input names, kept across continue-as-new. */
export function openReport(reportTo: unknown, carried: SettledReport | null | undefined): SettledReport | null {
  if (carried !== undefined) return carried;
  return isRolloutId(reportTo) ? { to: reportTo } : null;
}

export interface Reporting {
  readonly workflowId: string;
  readonly lastDecision: Decision | null;
  readonly history: Pick<History, 'stale_retakes'>;
  report: SettledReport | null;
}

/**
 * Tells the rollout that started the loop, once, that it settled: the rollout counts a node by
 * its first settled status, read from the loop itself. Told, or gone (a rollout that has ended
 * cannot be told), it is not told again, so the loop's later passes cost nothing for it. The
 * signal goes out with the pass's own commands and is not waited for: the watch and the wait
 * start in the same workflow task, as they do without a rollout to tell.
 */
export function tellRollout(loop: Reporting): void {
  const { report, lastDecision: d } = loop;
  if (!report || !d) return;
  // The loop's own early re-look (a stale snapshot, an unanswered pass) is not an outcome (settlesRollout).
  const state = {
    status: d.convergence_status,
    reason: d.reason,
    not_before: d.recheck_trigger.not_before,
    stale_retakes: loop.history.stale_retakes ?? 0,
  };
  if (!settlesRollout(state, ROLLOUT_WAITS)) return;
  loop.report = null;
  // Ended, or never there: the rollout reads the node's state itself (poll_seconds) if it runs.
  getExternalWorkflowHandle(report.to)
    .signal(nodeSettledSignal, { workflow_id: loop.workflowId })
    .catch(() => undefined);
}
