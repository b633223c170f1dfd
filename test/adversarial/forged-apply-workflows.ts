// What a namespace credential holder can run: its own workflow, on its own task queue, that
// observes a node (observation needs no signature) and schedules `apply` on the node's queue
// (datum-node-<node>) with a request of its own making, its marker and snapshot time taken from
// that observation, so the agent's other checks (compare-and-swap, snapshot age) pass.

import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import { agentTaskQueue, type AgentActivities, type ApplyRequest, type ExecutionEvidence } from '../../src/contract';
import type { ResourceSpec } from '../../src/domain';

export type ForgedAnswer =
  | { outcome: 'carried out'; evidence: ExecutionEvidence }
  | { outcome: 'refused'; type: string; message: string; details: unknown[] };

export async function forgeApply(request: ApplyRequest, resources: Record<string, ResourceSpec>): Promise<ForgedAnswer> {
  const agent = proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(request.node),
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  });
  const seen = await agent.observe({ node: request.node, resources });
  const action = {
    ...request.action,
    observed_marker: seen.resources[request.action.resource_key]?.marker ?? null,
    observed_at: seen.observed_at,
  };
  try {
    return { outcome: 'carried out', evidence: await agent.apply({ ...request, action }) };
  } catch (error) {
    const cause = error instanceof ActivityFailure ? error.cause : null;
    if (!(cause instanceof ApplicationFailure)) throw error;
    return { outcome: 'refused', type: cause.type ?? '', message: cause.message, details: cause.details ?? [] };
  }
}
