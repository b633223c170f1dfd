import { currentUpdateInfo, log, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { ControlActivities, UpdateRef } from '../contract';

/*
 * Who sent an Update, as Temporal recorded it: workflow code is not told, so an activity reads it
 * from the workflow's history once the Update was accepted (src/activities/work.ts requesterOf).
 * Shared by every work item's workflow.
 */

const identities = proxyActivities<ControlActivities>({
  startToCloseTimeout: 15 * 60_000,
  retry: { initialInterval: '1s', maximumInterval: '30s', maximumAttempts: 5, nonRetryableErrorTypes: ['ResolutionRefused'] },
});

/** The Update being handled now, by the ids an activity finds it with in the history. */
export function thisUpdate(): UpdateRef {
  const info = workflowInfo();
  return { workflow_id: info.workflowId, run_id: info.runId, update_id: currentUpdateInfo()?.id ?? '' };
}

/** Who sent the Update, as Temporal recorded it; unknown (null) if the history cannot be read. */
export async function requester(ref: UpdateRef): Promise<string | null> {
  try {
    return await identities.updateRequester.executeWithOptions({ summary: 'who sent it' }, [ref]);
  } catch (error) {
    log.warn('the identity of an Update could not be read', { error: String(error) });
    return null;
  }
}
