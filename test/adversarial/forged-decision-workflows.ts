// What a namespace credential holder can run: its own workflow, on its own task queue, that calls
// the node's agent (datum-node-<node>) directly, with a decision of its own making: a retake
// (recordDecision) or an approved removal (removeTargets), after the agent's own plan of what
// Datum holds (planRemoval writes nothing but the claims an observe records).

import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import {
  agentTaskQueue,
  type AgentActivities,
  type RecordDecisionRequest,
  type RemovalPlanAnswer,
  type RemovalRequest,
} from '../../src/contract';

export type Forged<R> = { outcome: 'carried out'; answer: R } | { outcome: 'refused'; type: string; message: string };

const agentOf = (node: string) =>
  proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(node),
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: 1 },
  });

async function answered<R>(call: () => Promise<R>): Promise<Forged<R>> {
  try {
    return { outcome: 'carried out', answer: await call() };
  } catch (error) {
    const cause = error instanceof ActivityFailure ? error.cause : null;
    if (!(cause instanceof ApplicationFailure)) throw error;
    return { outcome: 'refused', type: cause.type ?? '', message: cause.message };
  }
}

export async function forgeDecision(request: RecordDecisionRequest): Promise<Forged<unknown>> {
  return await answered(() => agentOf(request.node).recordDecision(request));
}

export async function forgePlan(node: string): Promise<RemovalPlanAnswer> {
  return await agentOf(node).planRemoval({ node, cause: 'decommission', generation: null, resources: {} });
}

export async function forgeRemoval(request: RemovalRequest): Promise<Forged<unknown>> {
  return await answered(() => agentOf(request.node).removeTargets(request));
}
