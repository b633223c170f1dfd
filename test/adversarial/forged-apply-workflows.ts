// What a namespace credential holder can run: its own workflow, on its own task queue, that
// schedules `apply` on a node's queue (datum-node-<node>) with a request of its own making.

import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import { agentTaskQueue, type AgentActivities, type ApplyRequest, type ExecutionEvidence } from '../../src/contract';

export type ForgedAnswer =
  | { outcome: 'carried out'; evidence: ExecutionEvidence }
  | { outcome: 'refused'; type: string; message: string; details: unknown[] };

export async function forgeApply(request: ApplyRequest): Promise<ForgedAnswer> {
  const agent = proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(request.node),
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  });
  try {
    return { outcome: 'carried out', evidence: await agent.apply(request) };
  } catch (error) {
    const cause = error instanceof ActivityFailure ? error.cause : null;
    if (!(cause instanceof ApplicationFailure)) throw error;
    return { outcome: 'refused', type: cause.type ?? '', message: cause.message, details: cause.details ?? [] };
  }
}
