import { log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import {
  CONTROL_TASK_QUEUE,
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
  removals: { keep: (read: AuthorityRead) => Promise<void>; escalateAfter: string },
) {
  return {
    async prepareRolloutNodes(input: { generation: number; nodes: string[] }): Promise<PreparedNode[]> {
      const c = client();
      return mapLimit(input.nodes, 16, (node) => prepareNode(c, authority, removals, input.generation, node));
    },

    async nodeStates(workflowIds: string[]): Promise<NodeStateReport[]> {
      const c = client();
      // A query is a round trip through the controller's worker, and a rollout asks every second:
      // for 1000 nodes that is 1000 queries a second competing with the loops themselves. One
      // visibility call says which nodes' status attribute has settled; only those are queried
      // (for the reason and to confirm the generation). The rest report no state yet.
      const candidates = await settledByVisibility(c, workflowIds);
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
 * that generation started (or attached to), older generations' loops handed over to it, and what
 * they declared and it does not planned for removal.
 */
async function prepareNode(
  c: Client,
  authority: DesiredStateAuthority,
  removals: { keep: (read: AuthorityRead) => Promise<void>; escalateAfter: string },
  generation: number,
  node: string,
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
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId,
    args: [{ node, generation: generation }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    staticSummary: reconcileSummary(node, read.intent),
    staticDetails: reconcileDetails(node, read.intent),
    typedSearchAttributes: new TypedSearchAttributes([
      { key: DatumNode, value: node },
      { key: DatumGeneration, value: generation },
      { key: DatumDigest, value: read.intent.digest },
    ]),
  });
  const older: string[] = [];
  const query = `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}" AND ExecutionStatus = "Running" AND DatumNode = "${node}" AND DatumGeneration < ${generation}`;
  for await (const execution of c.workflow.list({ query })) older.push(execution.workflowId);
  await Promise.all(
    older.map((id) =>
      c.workflow.getHandle(id).signal(refreshDesiredSignal, { generation: generation, digest: read.intent.digest }),
    ),
  );
  // What the older generations declared and this one does not becomes a planned removal,
  // which the node's agent makes once it has observed this generation (and closes if empty).
  if (older.length > 0) await openRemovalItem(c, node, { kind: 'dropped', generation: generation }, removals.escalateAfter);
  return { node, outcome: 'started', workflow_id: workflowId, digest: read.intent.digest, handed_over_from: older };
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
