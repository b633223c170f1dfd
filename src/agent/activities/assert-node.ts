import { ApplicationFailure } from '@temporalio/common';
import { withFix } from '../../contract';
import type { AgentConfig } from '../../schemas';

/** Every activity first checks that it was sent to the agent of its node (a misrouted task queue). */
export function assertNode(config: AgentConfig, node: string, configPath: string, subject: string): void {
  if (config.node === node) return;
  throw ApplicationFailure.nonRetryable(
    withFix(
      `${subject} refused: this agent serves node "${config.node}" (${configPath}), not "${node}"`,
      `route work for "${node}" to task queue datum-node-${node}, or correct node: in ${configPath}`,
    ),
    'NodeMismatch',
    { node, agent_node: config.node },
  );
}
