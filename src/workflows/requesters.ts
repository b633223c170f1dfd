import { currentUpdateInfo, log, proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import { parseSignal } from '../domain';
import { WORKFLOW_PATCH, type ControlActivities, type LedgerEntry, type RequesterNote } from '../contract';
import { inForce } from './patches';

/*
 * Who asked: each note an operator's signal or Update writes carries the name the request declares
 * (`by`) next to the identity Temporal recorded for it. Workflow code is told neither a signal's
 * sender nor its event, so a handler notes how its request came (the n-th signal of its name in
 * this run, or the Update's id) and the loop reads the identity from the run's history by a local
 * activity before it handles the request.
 */

/** How a queued request came: the `ordinal`-th signal of its name in this run, or an Update by its id. */
export type RequestRef = { via: 'signal'; ordinal: number } | { via: 'update'; update_id: string };

/**
 * Counts this run's signals by name as their handlers receive them, which is the order the run's
 * history holds them in (signals that came before a handler was set are delivered in that order too).
 */
export function signalCounter(): (name: string) => RequestRef {
  const seen: Record<string, number> = {};
  return (name) => ({ via: 'signal', ordinal: (seen[name] = (seen[name] ?? 0) + 1) });
}

/** Inside an Update handler: the Update being handled. */
export function thisUpdate(): RequestRef {
  return { via: 'update', update_id: currentUpdateInfo()?.id ?? '' };
}

const READ = { startToCloseTimeout: '10s', retry: { initialInterval: '1s', maximumInterval: '5s', maximumAttempts: 3 } };
/** A signal's event is in the history before the workflow task that delivers it: a local activity can read it. */
const signals = proxyLocalActivities<ControlActivities>(READ);
/**
 * An Update's acceptance reaches the history only when the workflow task that accepted it
 * completes, so it is read by an activity scheduled in that task, which runs after it.
 */
const updates = proxyActivities<ControlActivities>(READ);

/** The requester of a queued operator request, or null for a loop that ran before the patch. */
export async function requesterOf(
  request: RequesterNote['request'],
  ref: RequestRef,
  payload: unknown,
): Promise<RequesterNote | null> {
  if (!inForce(WORKFLOW_PATCH.signalRequester)) return null;
  const info = workflowInfo();
  const at = { workflow_id: info.workflowId, run_id: info.runId };
  let identity: string | null = null;
  try {
    identity =
      ref.via === 'signal'
        ? await signals.signalRequester({ ...at, signal_name: request, ordinal: ref.ordinal })
        : await updates.updateRequester({ ...at, update_id: ref.update_id });
  } catch (error) {
    log.warn('the identity of an operator request could not be read', { request, error: String(error) });
  }
  return { request, via: ref.via, by: declaredBy(request, payload), identity };
}

/** The name a request declares: resolveConflict's, hold's and unhold's `by` when given; the other requests declare none. */
function declaredBy(request: RequesterNote['request'], payload: unknown): string | null {
  if (request === 'hold' || request === 'unhold') {
    const by = payload && typeof payload === 'object' ? (payload as { by?: unknown }).by : null;
    return typeof by === 'string' ? by : null;
  }
  if (request !== 'resolveConflict') return null;
  const parsed = parseSignal(request, payload);
  return parsed.ok ? parsed.value.by : null;
}

/** Every note the request wrote (from seq `fromSeq` on) carries its requester. Before they are stored. */
export function stampRequester(entries: LedgerEntry[], fromSeq: number, requester: RequesterNote | null): void {
  if (!requester) return;
  for (const entry of entries) if (entry.seq >= fromSeq) entry.requester = requester;
}
