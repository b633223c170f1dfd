// What an agent costs the server while its nodes are idle: one long poll per node's task queue,
// counted by the Temporal server itself (its frontend's service_pending_requests gauge for
// PollActivityTaskQueue, which is what its per-namespace concurrent-poll limit counts).

import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runAgents, type RunningAgents } from '../../src/agent/worker';
import { agentTaskQueue } from '../../src/contract';
import { freePort, startDevEnv } from '../helpers/temporal';
import { until } from '../helpers/until';
import { cleanupNodes, makeNode } from './helpers';

const NODES = 6;

let env: TestWorkflowEnvironment | undefined;
let metricsPort = 0;
let agents: RunningAgents | undefined;

beforeAll(async () => {
  metricsPort = await freePort();
  env = await startDevEnv({ extraArgs: ['--metrics-port', String(metricsPort)] });
});

afterEach(async () => {
  await agents?.shutdown();
  agents = undefined;
  await cleanupNodes();
});

afterAll(async () => {
  await env?.teardown();
});

/** The server's count of activity-task polls open in the namespace, as its last poll recorded it. */
async function openActivityPolls(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('service_pending_requests{') && l.includes('operation="PollActivityTaskQueue"'));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('an agent serving several nodes, on a dev server', () => {
  it('holds one activity poll per node queue, as the server counts them', async () => {
    // The server's own per-namespace workers poll the namespace too (two activity polls in the
    // pinned dev server): counted once they have started, before any agent.
    await until(async () => (await openActivityPolls()) > 0, { what: 'the server’s own activity polls', timeoutMs: 30_000 });
    const own = await openActivityPolls();
    const nodes = await Promise.all(Array.from({ length: NODES }, (_, i) => makeNode({ node: `P-${i + 1}` })));
    agents = await runAgents({
      configPaths: nodes.map((n) => n.configPath),
      connection: env!.nativeConnection,
      namespace: 'default',
    });

    // Every node's queue has its poller...
    for (const n of nodes) {
      await until(
        async () => {
          const queue = await env!.client.workflowService.describeTaskQueue({
            namespace: 'default',
            taskQueue: { name: agentTaskQueue(n.node) },
            taskQueueType: 2, // activity
          });
          return queue.pollers.length > 0;
        },
        { what: `a poller on ${agentTaskQueue(n.node)}`, timeoutMs: 30_000 },
      );
    }
    // ...and the server holds as many polls open as there are nodes, not eight per node. The
    // gauge is recorded as each poll starts, so once every worker has started polling it reads
    // the total; give a few more starts the chance to overshoot before judging.
    await until(async () => (await openActivityPolls()) >= own + NODES, {
      what: `${NODES} more activity polls`,
      timeoutMs: 30_000,
    });
    await new Promise((r) => setTimeout(r, 2000));
    expect(await openActivityPolls()).toBe(own + NODES);
  });
});
