// A workflow that calls one node agent's activities on its task queue, as reconcileNode does,
// so the agent worker can be tested on a real server without the whole reconcile loop.

import { proxyActivities } from '@temporalio/workflow';
import { agentTaskQueue, type AgentActivities, type ExecutionEvidence, type Observation } from '../../src/contract';
import type { AuthorizedAction, ResourceSpec } from '../../src/domain';

export async function callAgent(
  node: string,
  resources: Record<string, ResourceSpec>,
  action: AuthorizedAction | null,
): Promise<{ before: Observation; evidence: ExecutionEvidence | null; after: Observation }> {
  const agent = proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(node),
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  });
  const before = await agent.observe({ node, resources });
  const evidence = action ? await agent.apply({ node, action }) : null;
  const after = await agent.observe({ node, resources });
  return { before, evidence, after };
}
