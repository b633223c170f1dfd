import { log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import {
  DatumDigest,
  DatumGeneration,
  DatumNode,
  DatumStatus,
  ROLLOUT_SETTLED,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  refreshDesiredSignal,
  stateQuery,
  withFix,
  type AuthorityRead,
  type NodeStateReport,
  type PreparedNode,
  type ReconcileNodeWorkflow,
} from '../contract';
import type { DesiredStateAuthority } from './authority';
import { reconcileDetails, reconcileSummary } from './summaries';
import { mapLimit } from './map-limit';
import { openRemovalItem } from './removals';

/**
 * What a rollout needs from outside its sandbox: the authority's word per node, starting (or
 * attaching to) one reconcileNode per node, handing over from older generations by
 * refreshDesired, and reading each node's state.
 */
export function createRolloutActivities(
  authority: DesiredStateAuthority,
  client: () => Client,
  removals: { keep: (read: AuthorityRead) => Promise<void>; escalateAfter: string; loopQueue: (node: string) => string },
) {
  return {
    async prepareRolloutNodes(input: { generation: number; nodes: string[]; report_to?: string }): Promise<PreparedNode[]> {
      const c = client();
      const started = await mapLimit(input.nodes, 16, (node) =>
        startNode(c, authority, removals, { generation: input.generation, node, report_to: input.report_to }),
      );
      // The loops of older generations, for the whole batch in one visibility list, not one per node.
      const older = await olderLoops(
        c,
        started.flatMap((p) => (p.outcome === 'started' ? [p.node] : [])),
        input.generation,
      );
      return mapLimit(started, 16, async (p) =>
        p.outcome === 'started' ? await handOver(c, removals, input.generation, p, older.get(p.node) ?? []) : p,
      );
    },

    async nodeStates(workflowIds: string[], asked?: 'told'): Promise<NodeStateReport[]> {
      const c = client();
      // A query is a round trip through the controller's worker: for 1000 nodes, 1000 queries
      // competing with the loops themselves. One visibility call says which nodes' status
      // attribute has settled; only those are queried (for the reason and to confirm the
      // generation). Loops that told the rollout they settled are queried at once: visibility
      // may not show their status yet.
      const candidates = asked === 'told' ? null : await settledByVisibility(c, workflowIds);
      return mapLimit(workflowIds, 32, async (id) => {
        if (candidates && !candidates.has(id)) return { workflow_id: id, state: null, error: null };
        try {
          const state = await c.workflow.getHandle(id).query(stateQuery);
          return { workflow_id: id, state, error: null };
        } catch (error) {
          return { workflow_id: id, state: null, error: (error as Error).message };
        }
      });
    },
  };
}

/**
 * One node of a rollout: refused when its authority is not at the generation; else its loop at
 * that generation started (or attached to).
 */
async function startNode(
  c: Client,
  authority: DesiredStateAuthority,
  removals: { keep: (read: AuthorityRead) => Promise<void>; loopQueue: (node: string) => string },
  { generation, node, report_to }: { generation: number; node: string; report_to?: string },
): Promise<PreparedNode> {
  // One node's file, however bad, refuses that node only: the batch goes on.
  const read = await readForRollout(authority, node);
  if (!read.ok) return { node, outcome: 'refused', error: read.error };
  await removals.keep(read);
  if (read.intent.generation !== generation) {
    return {
      node,
      outcome: 'refused',
      error: withFix(
        `the authority for ${node} is at generation ${read.intent.generation}, not ${generation}`,
        `commit generation ${generation} to ${authority.fileFor(node)}, or roll out generation ${read.intent.generation}`,
      ),
    };
  }
  const workflowId = reconcileWorkflowId(node, generation);
  await c.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
    // Its shard's queue (this controller's own when the fleet has one shard). An attach keeps the
    // queue the loop was started on: the rule gives the same one while the shard count stays.
    taskQueue: removals.loopQueue(node),
    workflowId,
    args: [{ node, generation, ...(report_to ? { report_to } : {}) }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    staticSummary: reconcileSummary(node, read.intent),
    staticDetails: reconcileDetails(node, read.intent),
    typedSearchAttributes: new TypedSearchAttributes([
      { key: DatumNode, value: node },
      { key: DatumGeneration, value: generation },
      { key: DatumDigest, value: read.intent.digest },
    ]),
  });
  return { node, outcome: 'started', workflow_id: workflowId, digest: read.intent.digest, handed_over_from: [] };
}

/** The running loops of older generations of `nodes`, by node: one visibility list for them all. */
async function olderLoops(c: Client, nodes: string[], generation: number): Promise<Map<string, string[]>> {
  const older = new Map<string, string[]>();
  if (nodes.length === 0) return older;
  const named = nodes.map((n) => `"${n}"`).join(', ');
  const query = `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}" AND ExecutionStatus = "Running" AND ${DatumNode.name} IN (${named}) AND ${DatumGeneration.name} < ${generation}`;
  for await (const execution of c.workflow.list({ query })) {
    const node = execution.typedSearchAttributes.get(DatumNode);
    if (node !== undefined) older.set(node, [...(older.get(node) ?? []), execution.workflowId]);
  }
  return older;
}

/**
 * Older generations' loops of a started node handed over to it, and what they declared and it
 * does not planned for removal.
 */
async function handOver(
  c: Client,
  removals: { escalateAfter: string },
  generation: number,
  p: Extract<PreparedNode, { outcome: 'started' }>,
  older: string[],
): Promise<PreparedNode> {
  await Promise.all(older.map((id) => c.workflow.getHandle(id).signal(refreshDesiredSignal, { generation, digest: p.digest })));
  // The agent makes the removal once it has observed this generation (and closes it if empty).
  if (older.length > 0) await openRemovalItem(c, p.node, { kind: 'dropped', generation }, removals.escalateAfter);
  return { ...p, handed_over_from: older };
}

/** The authority's word on one node; a read that throws is that node's refusal, not the batch's failure. */
async function readForRollout(authority: DesiredStateAuthority, node: string): Promise<AuthorityRead> {
  try {
    return await authority.read(node);
  } catch (error) {
    return {
      ok: false,
      kind: 'unreadable',
      error: withFix(
        `the desired state of ${node} cannot be read (${String(error).slice(0, 200)})`,
        `check ${authority.fileFor(node)}`,
      ),
    };
  }
}

/**
 * The ids among `workflowIds` whose DatumStatus search attribute is a settled status, or null
 * when visibility cannot answer (the caller then queries every node, which is only slower).
 */
async function settledByVisibility(c: Client, workflowIds: string[]): Promise<Set<string> | null> {
  if (workflowIds.length === 0) return new Set();
  const ids = workflowIds.map((id) => `"${id}"`).join(', ');
  const statuses = ROLLOUT_SETTLED.map((s) => `"${s}"`).join(', ');
  try {
    const found = new Set<string>();
    for await (const execution of c.workflow.list({ query: `WorkflowId IN (${ids}) AND ${DatumStatus.name} IN (${statuses})` }))
      found.add(execution.workflowId);
    return found;
  } catch (error) {
    log.warn('visibility could not list settled nodes; querying each node instead', { error: String(error) });
    return null;
  }
}
