import { getExternalWorkflowHandle, isCancellation } from '@temporalio/workflow';
import { ROLLOUT_SETTLED, nodeSettledSignal, type SettledReport } from '../contract';
import type { Decision } from '../domain';

/** A rollout's id, as rolloutWorkflowId spells it: a loop tells no other workflow. */
export const isRolloutId = (id: unknown): id is string =>
  typeof id === 'string' && /^datum-rollout\/[\x21-\x7e]{1,400}$/.test(id);

/** Whom a loop tells when it settles: the rollout its input names, kept across continue-as-new. */
export function openReport(reportTo: unknown, carried: SettledReport | null | undefined): SettledReport | null {
  if (carried !== undefined) return carried;
  return isRolloutId(reportTo) ? { to: reportTo, told: null } : null;
}

export interface Reporting {
  readonly workflowId: string;
  readonly lastDecision: Decision | null;
  report: SettledReport | null;
}

/**
 * Tells the rollout that started the loop that it settled, each time in a status and reason it
 * has not told yet (a rollout counts the node only once it has read the loop's state itself). A
 * rollout that has ended cannot be told, and the loop stops telling it.
 */
export async function tellRollout(loop: Reporting): Promise<void> {
  const { report, lastDecision: d } = loop;
  if (!report || !d || !ROLLOUT_SETTLED.includes(d.convergence_status)) return;
  const said = `${d.convergence_status}/${d.reason}`;
  if (said === report.told) return;
  try {
    await getExternalWorkflowHandle(report.to).signal(nodeSettledSignal, { workflow_id: loop.workflowId });
    loop.report = { ...report, told: said };
  } catch (error) {
    if (isCancellation(error)) throw error;
    loop.report = null;
  }
}
