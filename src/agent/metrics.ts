import { asyncLocalStorage } from '@temporalio/activity';
import { ApplicationFailure, noopMetricMeter, type MetricMeter } from '@temporalio/common';
import { Runtime } from '@temporalio/worker';
import { ACTIONS, type ExecutionEvidence } from '../domain';
import { ACTIONS_METRIC, APPLY_DURATION_METRIC, outcomeOfFailure, type ApplyRequest } from '../contract';

/*
 * The agent's side of Datum's metrics: every apply it answers, counted by action kind and the
 * outcome the ledger will carry (applied, replayed from the journal, refused with its refusal
 * type, or failed). Labels mirror ExecutionEvidence's `action`, `outcome` and `refusal`.
 */

type Outcome = ExecutionEvidence['outcome'];

/** Runs `apply` and counts what it answered; the answer (or the failure) passes through untouched. */
export async function countedApply(request: ApplyRequest, apply: () => Promise<ExecutionEvidence>): Promise<ExecutionEvidence> {
  // A closed label set: a malformed request's action kind is whatever its sender wrote.
  const kind = (request?.action as { action?: unknown } | undefined)?.action;
  const action = (ACTIONS as readonly unknown[]).includes(kind) ? (kind as string) : 'unknown';
  let evidence: ExecutionEvidence;
  const started = performance.now();
  try {
    evidence = await apply();
  } catch (err) {
    const outcome = err instanceof ApplicationFailure ? outcomeOfFailure(err.type) : 'failed';
    count(action, outcome, outcome === 'refused' ? (err as ApplicationFailure).type! : null);
    timed(action, started);
    throw err;
  }
  count(action, evidence.outcome, evidence.refusal);
  timed(action, started);
  return evidence;
}

function timed(action: string, startedMs: number): void {
  meter()
    .createHistogram(APPLY_DURATION_METRIC, 'float', 's', 'Seconds the agent took to answer an apply, by action kind')
    .record((performance.now() - startedMs) / 1000, { action });
}

function count(action: string, outcome: Outcome, refusal: string | null): void {
  meter()
    .createCounter(ACTIONS_METRIC, '1', 'Actions the agent answered, by action kind, outcome and refusal type')
    .add(1, { action, outcome, refusal: refusal ?? 'none' });
}

/**
 * The runtime's meter, labelled like core's activity metrics (namespace, task_queue,
 * activity_type, workflow_type) from the activity's info. Not the activity context's meter: the
 * worker under it adds camelCase taskQueue and activityType, which do not join with core's
 * series. None outside an activity, as when a test calls the activities directly: counting must
 * never be why an apply fails.
 */
function meter(): MetricMeter {
  const info = asyncLocalStorage.getStore()?.info;
  if (!info) return noopMetricMeter;
  return Runtime.instance().metricMeter.withTags({
    namespace: info.namespace,
    task_queue: info.taskQueue,
    activity_type: info.activityType,
    ...(info.workflowType ? { workflow_type: info.workflowType } : {}),
  });
}
