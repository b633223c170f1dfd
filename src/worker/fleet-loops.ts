import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { WORKFLOW_TYPES, isNodeId } from '../contract';
import { mapLimit } from '../activities/map-limit';

/*
 * The fleet as the authority declares it against the loops that run: a node with desired state
 * and no running reconcile loop is a condition (docs/architecture.md "Conditions": `datum status`
 * includes nodes that have desired state but no running loop). Visibility says which loops run
 * and how the last one of each such node ended; the close event of its history says by whom or
 * with what failure. `datum status`, `datum nodes` and the controller's fleet metrics read it.
 */

/** How a node's last reconcile loop ended, or that it never had one. */
export const LOOP_ENDS = ['NEVER_STARTED', 'TERMINATED', 'FAILED', 'TIMED_OUT', 'CANCELED', 'COMPLETED'] as const;
export type LoopEnd = (typeof LOOP_ENDS)[number];

/** The condition type `datum status` reports for such a node (not one a loop raises: no loop runs). */
export const NO_RUNNING_LOOP = 'NO_RUNNING_LOOP';

export interface EndedLoop {
  workflow_id: string;
  run_id: string;
  generation: number;
  started_at: string;
  closed_at: string | null;
  /** What ended it, from its close event: who terminated it and why, the failure, the timeout. */
  how: string;
}

export interface MissingLoop {
  node: string;
  end: LoopEnd;
  /** The node's newest reconcile loop, null when none ever ran. */
  last_loop: EndedLoop | null;
}

/** Node names per visibility query: each adds one STARTS_WITH clause. */
const NODES_PER_QUERY = 50;

/**
 * The nodes of `declared` that have no loop in `running`, each with how its last loop ended:
 * one visibility list per 50 such nodes, and one reverse-history read (a single event) per node
 * whose loop ended. A fleet where every declared node runs costs nothing here.
 */
export async function missingLoops(
  client: Client,
  declared: string[],
  running: ReadonlySet<string>,
  /** Read each ended loop's close event (who terminated it, the failure); the metrics need only how many. */
  how = true,
): Promise<MissingLoop[]> {
  // A file name that is no node name is the authority's problem (the loop or validate names it), not a loop's.
  const missing = [...new Set(declared)].filter((n) => !running.has(n) && isNodeId(n)).sort();
  if (missing.length === 0) return [];
  const newest = new Map<string, WorkflowExecutionInfo>();
  for (let i = 0; i < missing.length; i += NODES_PER_QUERY) {
    for await (const w of client.workflow.list({
      query: lastLoopsQuery(missing.slice(i, i + NODES_PER_QUERY)),
      pageSize: 1000,
    })) {
      const node = nodeOf(w.workflowId);
      if (node === null || !missing.includes(node)) continue;
      const prior = newest.get(node);
      if (!prior || prior.startTime < w.startTime) newest.set(node, w);
    }
  }
  // A loop that started since `running` was read runs: that node is not missing after all.
  const still = missing.filter((n) => newest.get(n)?.status.name !== 'RUNNING');
  return mapLimit(still, 16, async (node): Promise<MissingLoop> => {
    const w = newest.get(node);
    return w
      ? { node, end: endOf(w), last_loop: await endedLoop(client, w, how) }
      : { node, end: 'NEVER_STARTED', last_loop: null };
  });
}

function lastLoopsQuery(nodes: string[]): string {
  // Node names are checked (letters, digits, ".", "_", "-"), so they quote safely.
  // Every loop's id is reconcileWorkflowId(node, G): datum/<node>/gen-<G>.
  const ids = nodes.map((n) => `WorkflowId STARTS_WITH ${JSON.stringify(`datum/${n}/gen-`)}`);
  return `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}" AND (${ids.join(' OR ')})`;
}

const LOOP_ID = /^datum\/(.+)\/gen-(\d+)$/;

function nodeOf(workflowId: string): string | null {
  return LOOP_ID.exec(workflowId)?.[1] ?? null;
}

function endOf(w: WorkflowExecutionInfo): LoopEnd {
  switch (w.status.name) {
    case 'TERMINATED':
      return 'TERMINATED';
    case 'FAILED':
      return 'FAILED';
    case 'TIMED_OUT':
      return 'TIMED_OUT';
    case 'CANCELLED':
      return 'CANCELED';
    default:
      // COMPLETED (a hand-over whose successor does not run), or a continue-as-new whose next run is gone.
      return 'COMPLETED';
  }
}

async function endedLoop(client: Client, w: WorkflowExecutionInfo, how: boolean): Promise<EndedLoop> {
  return {
    workflow_id: w.workflowId,
    run_id: w.runId,
    generation: Number(LOOP_ID.exec(w.workflowId)?.[2] ?? 0),
    started_at: w.startTime.toISOString(),
    closed_at: w.closeTime?.toISOString() ?? null,
    how: how
      ? await closeEvent(client, w).catch((error: unknown) => `its close event cannot be read (${(error as Error).message})`)
      : endOf(w).toLowerCase(),
  };
}

/** The run's last history event, read from the end (one event, however long the loop lived), in words. */
async function closeEvent(client: Client, w: WorkflowExecutionInfo): Promise<string> {
  const { history } = await client.workflowService.getWorkflowExecutionHistoryReverse({
    namespace: client.options.namespace,
    execution: { workflowId: w.workflowId, runId: w.runId },
    maximumPageSize: 1,
  });
  const e = history?.events?.[0];
  const terminated = e?.workflowExecutionTerminatedEventAttributes;
  if (terminated)
    return `terminated${terminated.identity ? ` by ${terminated.identity}` : ''}${terminated.reason ? `: "${terminated.reason}"` : ''}`;
  const failed = e?.workflowExecutionFailedEventAttributes;
  if (failed) return `failed: ${failed.failure?.message ?? 'no message'}`;
  if (e?.workflowExecutionTimedOutEventAttributes) return 'timed out (its workflow execution or run timeout passed)';
  if (e?.workflowExecutionCanceledEventAttributes) return 'cancelled';
  if (e?.workflowExecutionContinuedAsNewEventAttributes) return 'continued as new, and the next run is gone';
  return 'completed (a loop completes when it hands the node over to a newer generation)';
}

/** One sentence an operator can act on: what is missing, how the last loop ended, and the fix. */
export function missingLoopMessage(m: MissingLoop, desiredGeneration: number | null): string {
  const gen = desiredGeneration === null ? 'G' : String(desiredGeneration);
  const fix = `roll it out with \`datum rollout start --generation ${gen} --nodes ${m.node}\``;
  const desired = desiredGeneration === null ? 'desired state' : `desired state at generation ${desiredGeneration}`;
  if (!m.last_loop) return `${m.node} has ${desired} but no reconcile loop has ever run for it — fix: ${fix}`;
  const l = m.last_loop;
  return `${m.node} has ${desired} but no running reconcile loop: ${l.workflow_id} ${l.how}${l.closed_at ? ` at ${l.closed_at}` : ''} — fix: ${fix}`;
}
