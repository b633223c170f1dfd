import { type NativeConnection, Worker } from '@temporalio/worker';
import { createAgentActivities } from '../../src/agent/activities';
import { agentTaskQueue } from '../../src/contract';

type AgentActivities = ReturnType<typeof createAgentActivities>;

/**
 * The real agent's activities for one node, served in the test's process with some of them
 * altered by `alter` (which gets the real ones): a node that misreports, or answers late, as an
 * adversary or an overloaded machine would. Stop it before the test ends.
 */
export async function alteredAgent(
  connection: NativeConnection,
  agentFile: string,
  node: string,
  alter: (real: AgentActivities) => Partial<AgentActivities>,
): Promise<{ stop(): Promise<void> }> {
  const real = createAgentActivities(agentFile);
  const worker = await Worker.create({ connection, taskQueue: agentTaskQueue(node), activities: { ...real, ...alter(real) } });
  const running = worker.run();
  return {
    stop: async () => {
      worker.shutdown();
      await running;
    },
  };
}
