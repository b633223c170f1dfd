import { ApplicationFailure } from '@temporalio/common';
import { asyncLocalStorage, log as activityLog } from '@temporalio/activity';
import type { ApplyRequest, ObserveRequest, RecordDecisionRequest, RecordDecisionResult } from '../contract';
import type { ExecutionEvidence, Observation } from '../domain';

/*
 * What the agent logs, one structured line per event, through the activity's `log` (which adds
 * the workflow, run and activity ids of the call, src/worker/logging.ts): every apply with its
 * outcome, every refusal with its type, every answer replayed from the journal, every fence
 * decision (a stale generation refused), and every operator decision recorded or refused. Each
 * line names the node, the resource, the generation and the idempotency key.
 */

const FENCE_REFUSALS = new Set(['StaleGenerationRefusal']);

type Log = Pick<typeof activityLog, 'debug' | 'info' | 'warn' | 'error'>;
const silent: Log = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
/**
 * The activity's logger; silent outside an activity (the benchmark's floor and the tests call the
 * agent's functions directly), since logging must never be why an apply fails.
 */
const log = (): Log => (asyncLocalStorage.getStore() ? activityLog : silent);

function actionFields(request: ApplyRequest) {
  const a = (request?.action ?? {}) as Partial<ApplyRequest['action']>;
  return {
    node: request?.node,
    resource_key: a.resource_key,
    action: a.action,
    generation: a.desired_generation,
    idempotency_key: a.idempotency_key,
  };
}

export async function loggedApply(request: ApplyRequest, apply: () => Promise<ExecutionEvidence>): Promise<ExecutionEvidence> {
  const fields = actionFields(request);
  try {
    const evidence = await apply();
    const message =
      evidence.outcome === 'replayed' ? 'apply answered from the journal (replayed, not run again)' : `apply ${evidence.outcome}`;
    log().info(message, { ...fields, outcome: evidence.outcome, detail: evidence.detail, marker_after: evidence.marker_after });
    return evidence;
  } catch (err) {
    logFailure('apply', fields, err);
    throw err;
  }
}

export async function loggedObserve(request: ObserveRequest, observe: () => Promise<Observation>): Promise<Observation> {
  try {
    const observation = await observe();
    log().debug('observed', {
      node: request?.node,
      generation: request?.generation,
      observed_at: observation.observed_at,
      mode: observation.mode,
    });
    return observation;
  } catch (err) {
    logFailure('observe', { node: request?.node, generation: request?.generation }, err);
    throw err;
  }
}

export async function loggedDecision(
  request: RecordDecisionRequest,
  record: () => Promise<RecordDecisionResult>,
): Promise<RecordDecisionResult> {
  const fields = {
    node: request?.node,
    resource_key: request?.resource_key,
    generation: request?.generation,
    kind: request?.kind,
    target: request?.target,
  };
  try {
    const result = await record();
    log().info(`operator decision recorded: ${String(request?.kind)}`, { ...fields, holds: result.holds });
    return result;
  } catch (err) {
    logFailure('recordDecision', fields, err);
    throw err;
  }
}

function logFailure(what: string, fields: Record<string, unknown>, err: unknown): void {
  if (err instanceof ApplicationFailure && err.type && FENCE_REFUSALS.has(err.type)) {
    log().warn(`${what} fenced: a newer generation holds the node`, { ...fields, refusal: err.type, error: err.message });
  } else if (err instanceof ApplicationFailure && err.nonRetryable) {
    log().warn(`${what} refused`, { ...fields, refusal: err.type, error: err.message });
  } else {
    log().error(`${what} failed`, { ...fields, error: err instanceof Error ? err.message : String(err) });
  }
}
