import type { Client, WorkflowHandle } from '@temporalio/client';
import { isNodeId, stateQuery, withFix, type NodeState } from '../contract';
import { listNodes, type NodeRow } from '../worker/fleet-loops';
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

export { listNodes, type NodeFilter, type NodeRow } from '../worker/fleet-loops';

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
