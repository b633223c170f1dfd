import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import {
  DatumConditions,
  DatumGeneration,
  DatumMode,
  DatumNode,
  DatumStatus,
  MEMO_LAST_VERIFIED,
  MEMO_REASON,
  MEMO_SINCE,
  MEMO_SUMMARY,
  WORKFLOW_TYPES,
  isNodeId,
  type EndedLoop,
  type LoopEnd,
  type MissingLoop,
} from '../contract';
import { mapLimit } from '../activities/map-limit';

/*
 * The fleet as the authority declares it against the loops that run: a node with desired state
 * and no running reconcile loop is a condition (docs/architecture.md "Conditions": `datum status`
 * includes nodes that have desired state but no running loop). Visibility says which loops run
 * and how the last one of each such node ended; the close event of its history says by whom or
 * with what failure. `datum status`, `datum nodes` and the controller's fleet metrics read it.
 */

export { LOOP_ENDS, type MissingLoop } from '../contract';

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
  /** Close events already read, by run id: a closed run's last event never changes. */
  closes?: Map<string, string>,
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
      ? { node, end: endOf(w), last_loop: await endedLoop(client, w, how, closes) }
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

async function endedLoop(
  client: Client,
  w: WorkflowExecutionInfo,
  how: boolean,
  closes?: Map<string, string>,
): Promise<EndedLoop> {
  return {
    workflow_id: w.workflowId,
    run_id: w.runId,
    generation: Number(LOOP_ID.exec(w.workflowId)?.[2] ?? 0),
    started_at: w.startTime.toISOString(),
    closed_at: w.closeTime?.toISOString() ?? null,
    how: how ? await closeOf(client, w, closes) : endOf(w).toLowerCase(),
  };
}

async function closeOf(client: Client, w: WorkflowExecutionInfo, closes?: Map<string, string>): Promise<string> {
  const known = closes?.get(w.runId);
  if (known !== undefined) return known;
  try {
    const how = await closeEvent(client, w);
    closes?.set(w.runId, how);
    return how;
  } catch (error) {
    return `its close event cannot be read (${(error as Error).message})`;
  }
}

/** The run's last history event, read from the end (one event, however long the loop lived), in words. */
async function closeEvent(client: Client, w: WorkflowExecutionInfo): Promise<string> {
  const { history } = await client.workflowService.getWorkflowExecutionHistoryReverse({
    namespace: client.options.namespace,
    execution: { workflowId: w.workflowId, runId: w.runId },
    maximumPageSize: 1,
  });
  return closeWords(history?.events?.[0]);
}

type HistoryEvent = NonNullable<
  NonNullable<Awaited<ReturnType<Client['workflowService']['getWorkflowExecutionHistoryReverse']>>['history']>['events']
>[number];

/** How a run's close event says it ended, in words. */
function closeWords(e: HistoryEvent | undefined): string {
  const terminated = e?.workflowExecutionTerminatedEventAttributes;
  if (terminated)
    return `terminated${terminated.identity ? ` by ${terminated.identity}` : ''}${terminated.reason ? `: "${terminated.reason}"` : ''}`;
  const failed = e?.workflowExecutionFailedEventAttributes;
  if (failed) return `failed: ${failed.failure?.message ?? 'no message'}`;
  if (e?.workflowExecutionTimedOutEventAttributes) return 'timed out (its workflow execution or run timeout passed)';
  if (e?.workflowExecutionCanceledEventAttributes) return 'cancelled';
  if (e?.workflowExecutionContinuedAsNewEventAttributes) return 'continued as new, and the next run is gone';
  const successor = supersededBy(e?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0]);
  return successor
    ? `handed the node over to ${successor}, which does not run`
    : 'completed (a loop completes when it hands the node over to a newer generation)';
}

/** A loop's result names its successor (ReconcileResult.superseded_by); a payload the codec encrypted reads as nothing. */
function supersededBy(
  payload: { metadata?: Record<string, Uint8Array> | null; data?: Uint8Array | null } | undefined,
): string | null {
  const encoding = payload?.metadata?.encoding ? Buffer.from(payload.metadata.encoding).toString() : '';
  if (encoding !== 'json/plain' || !payload?.data) return null;
  try {
    const result = JSON.parse(Buffer.from(payload.data).toString()) as { superseded_by?: unknown };
    return typeof result.superseded_by === 'string' && result.superseded_by !== '' ? result.superseded_by : null;
  } catch {
    return null;
  }
}

/** A node as visibility shows its running loop: search attributes and memo, no query. */
export interface NodeRow {
  node: string;
  workflow_id: string;
  generation: number;
  status: string | null;
  reason: string | null;
  mode: string | null;
  conditions: string[];
  last_verified_at: string | null;
  /** When the loop at this generation started (its memo), else when its current run did. */
  since: string;
  summary: string | null;
  /** The task queue its workflow tasks go to: its loop shard's, or the controller's own. */
  task_queue: string;
}

/** What `datum nodes` and `datum status` may filter on, all in the visibility query. */
export interface NodeFilter {
  node?: string;
  statuses?: string[];
  conditions?: string[];
  generation?: number;
  /** Only loops with at least one open condition (status's pre-filter). */
  withConditions?: boolean;
}

const quoted = (values: string[]) => values.map((v) => JSON.stringify(v)).join(', ');

/** The visibility query; every value in it is a checked node name, status, condition type or number. */
export function nodeQuery(f: NodeFilter = {}): string {
  const where = [`WorkflowType = "${WORKFLOW_TYPES.reconcileNode}"`, 'ExecutionStatus = "Running"'];
  if (f.node) where.push(`${DatumNode.name} = ${JSON.stringify(f.node)}`);
  if (f.statuses?.length) where.push(`${DatumStatus.name} IN (${quoted(f.statuses)})`);
  if (f.conditions?.length) where.push(`${DatumConditions.name} IN (${quoted(f.conditions)})`);
  else if (f.withConditions) where.push(`${DatumConditions.name} IS NOT NULL`);
  if (f.generation !== undefined) where.push(`${DatumGeneration.name} = ${f.generation}`);
  return where.join(' AND ');
}

const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function rowOf(w: WorkflowExecutionInfo): NodeRow | null {
  const sa = w.typedSearchAttributes;
  const m = /^datum\/(.+)\/gen-(\d+)$/.exec(w.workflowId);
  const node = sa.get(DatumNode) ?? m?.[1];
  if (!node) return null;
  const memo = w.memo ?? {};
  const summary = text(memo[MEMO_SUMMARY]);
  return {
    node,
    workflow_id: w.workflowId,
    generation: sa.get(DatumGeneration) ?? Number(m?.[2] ?? 0),
    status: sa.get(DatumStatus) ?? null,
    // Loops from before the memo carried the reason: its summary starts "STATUS REASON (gen G)".
    reason: text(memo[MEMO_REASON]) ?? (summary ? (/^\S+ ([A-Z_]+) \(gen \d+\)/.exec(summary)?.[1] ?? null) : null),
    mode: sa.get(DatumMode) ?? null,
    conditions: [...(sa.get(DatumConditions) ?? [])],
    last_verified_at: text(memo[MEMO_LAST_VERIFIED]),
    since: text(memo[MEMO_SINCE]) ?? w.startTime.toISOString(),
    summary,
    task_queue: w.taskQueue,
  };
}

/**
 * Every running reconcile loop the filter matches, one per node (the newest generation wins if
 * two overlap during a hand-over), sorted by node: one paginated ListWorkflowExecutions call,
 * no query, no worker needed.
 */
export async function listNodes(client: Client, filter: NodeFilter = {}): Promise<NodeRow[]> {
  const rows = new Map<string, NodeRow>();
  for await (const w of client.workflow.list({ query: nodeQuery(filter), pageSize: 1000 })) {
    const row = rowOf(w);
    if (!row) continue;
    const prior = rows.get(row.node);
    if (!prior || prior.generation < row.generation) rows.set(row.node, row);
  }
  return [...rows.values()].sort((a, b) => a.node.localeCompare(b.node));
}

/** A poller the server saw this recently is alive: a long poll returns at least once a minute. */
const POLLER_FRESH_MS = 90_000;

/**
 * The workers polling `queue` for workflow tasks that the server saw within POLLER_FRESH_MS, and
 * when it saw the last one. The queue's root partition, as DescribeTaskQueue reads it.
 */
export async function workflowPollersOn(client: Client, queue: string): Promise<{ count: number; last: string | null }> {
  const { pollers } = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: queue },
    taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
  });
  const seen = (pollers ?? [])
    .map((p) => (p.lastAccessTime?.seconds ? Number(p.lastAccessTime.seconds) * 1000 : 0))
    .filter((ms) => ms > 0);
  const last = seen.length > 0 ? Math.max(...seen) : null;
  return {
    count: seen.filter((ms) => Date.now() - ms <= POLLER_FRESH_MS).length,
    last: last === null ? null : new Date(last).toISOString(),
  };
}
