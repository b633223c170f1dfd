import { proxyActivities } from '@temporalio/workflow';
import { agentTaskQueue, type AgentActivities, type ImportNodeInput, type ImportNodeResult } from '../contract';
import { durationMs } from '../domain';
import { nowIso } from './ledger';

/*
 * `datum import NODE`: one read of the node through its own agent (the `inventory` activity on
 * datum-node-<node>), which writes nothing. A workflow only because a client cannot call an
 * activity itself: it holds no state, signals nothing and ends with the answer.
 */

/** Reading specs is observe's work: seconds. */
const READ_TIMEOUT = '1m';

export async function importNode(input: ImportNodeInput): Promise<ImportNodeResult> {
  const { inventory } = proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(input.node),
    // An agent that does not take the read by then is not running: the import ends and says so.
    scheduleToStartTimeout: durationMs(input.node_timeout),
    startToCloseTimeout: READ_TIMEOUT,
    retry: { maximumAttempts: 2, nonRetryableErrorTypes: ['NodeMismatch', 'InvalidAgentConfig', 'InvalidAction'] },
  });
  const answer = await inventory({ node: input.node, resources: input.resources, include_flags: input.include_flags });
  return { node: input.node, read_at: nowIso(), answer };
}
