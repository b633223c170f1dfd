import type { Client, WorkflowExecutionInfo, WorkflowHandle } from '@temporalio/client';
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
  stateQuery,
  withFix,
  type NodeState,
} from '../contract';
import { UsageError } from './args';
export { mapLimit } from '../activities/map-limit';

export interface NodeLoop {
  workflowId: string;
  generation: number;
  handle: WorkflowHandle;
}

export function checkNode(node: string | undefined): string {
  if (!node) throw new UsageError(withFix('which node?', 'name it, for example `N-24`'));
  if (!isNodeId(node)) throw new UsageError(withFix(`"${node}" is not a node name`, 'letters, digits, ".", "_" or "-"'));
  return node;
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

export const handleOf = (client: Client, row: NodeRow): NodeLoop => ({
  workflowId: row.workflow_id,
  generation: row.generation,
  handle: client.workflow.getHandle(row.workflow_id),
});

export async function loopFor(client: Client, node: string): Promise<NodeLoop> {
  const [row] = await listNodes(client, { node });
  if (!row) {
    throw new Error(
      withFix(
        `no reconcile loop is running for node ${node}`,
        `start one with \`datum rollout start --generation <G> --nodes ${node}\` (\`datum nodes\` lists the nodes that have one)`,
      ),
    );
  }
  return handleOf(client, row);
}

export async function stateOf(loop: NodeLoop): Promise<NodeState> {
  return loop.handle.query(stateQuery);
}
