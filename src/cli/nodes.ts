import type { Client, WorkflowHandle } from '@temporalio/client';
import { nodeId } from '../domain';
import { WORKFLOW_TYPES, stateQuery, withFix, type NodeState } from '../contract';
import { UsageError } from './args';

export interface NodeLoop {
  workflowId: string;
  generation: number;
  handle: WorkflowHandle;
}

export function checkNode(node: string | undefined): string {
  if (!node) throw new UsageError(withFix('which node?', 'name it, for example `N-24`'));
  if (!nodeId.safeParse(node).success)
    throw new UsageError(withFix(`"${node}" is not a node name`, 'letters, digits, ".", "_" or "-"'));
  return node;
}

/** Every running reconcileNode loop, by node: the newest generation wins if two overlap. */
export async function runningLoops(client: Client, node?: string): Promise<Map<string, NodeLoop>> {
  const query = `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}" AND ExecutionStatus = "Running"${node ? ` AND DatumNode = "${node}"` : ''}`;
  const loops = new Map<string, NodeLoop>();
  for await (const w of client.workflow.list({ query })) {
    const m = /^datum\/(.+)\/gen-(\d+)$/.exec(w.workflowId);
    const name = (w.searchAttributes.DatumNode?.[0] as string | undefined) ?? m?.[1];
    const generation = Number((w.searchAttributes.DatumGeneration?.[0] as number | undefined) ?? m?.[2] ?? 0);
    if (!name) continue;
    const prior = loops.get(name);
    if (!prior || prior.generation < generation)
      loops.set(name, { workflowId: w.workflowId, generation, handle: client.workflow.getHandle(w.workflowId) });
  }
  return loops;
}

export async function loopFor(client: Client, node: string): Promise<NodeLoop> {
  const loop = (await runningLoops(client, node)).get(node);
  if (!loop) {
    throw new Error(
      withFix(
        `no reconcile loop is running for node ${node}`,
        `start one with \`datum rollout start --generation <G> --nodes ${node}\` (see \`datum status\` for the nodes that have one)`,
      ),
    );
  }
  return loop;
}

export async function stateOf(loop: NodeLoop): Promise<NodeState> {
  return loop.handle.query(stateQuery);
}
