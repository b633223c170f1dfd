// What an agent costs the server while its nodes are idle: one long poll per node's task queue,
// counted by the Temporal server itself (its frontend's service_pending_requests gauge for
// PollActivityTaskQueue, which is what its per-namespace concurrent-poll limit counts, and its
// service_requests counter of the polls it received). The server ends an idle long poll after
// EXPIRY_S here (a minute by default), so the polls cycle: each poller sends at most one poll per
// cycle, and the polls the server received over a number of cycles count the pollers.

import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runAgents, type RunningAgents } from '../../src/agent/worker';
import { agentTaskQueue } from '../../src/contract';
import { freePort, startDevEnv } from '../helpers/temporal';
import { until } from '../helpers/until';
import { cleanupNodes, makeNode } from './helpers';

const NODES = 6;
const EXPIRY_S = 2;

let env: TestWorkflowEnvironment | undefined;
let metricsPort = 0;
let agents: RunningAgents | undefined;

beforeAll(async () => {
  metricsPort = await freePort();
  env = await startDevEnv({
    extraArgs: [
      '--metrics-port',
      String(metricsPort),
      '--dynamic-config-value',
      `matching.longPollExpirationInterval="${EXPIRY_S}s"`,
    ],
  });
});

afterEach(async () => {
  await agents?.shutdown();
  agents = undefined;
  await cleanupNodes();
});

afterAll(async () => {
  await env?.teardown();
});

/** A sample of the server's frontend for PollActivityTaskQueue in the namespace, by metric. */
async function activityPolls(metric: 'service_pending_requests' | 'service_requests'): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text
    .split('\n')
    .find(
      (l) => l.startsWith(`${metric}{`) && l.includes('namespace="default"') && l.includes('operation="PollActivityTaskQueue"'),
    );
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}
/** The activity-task polls open in the namespace, as the server's last poll recorded it. */
const openActivityPolls = () => activityPolls('service_pending_requests');

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
    // ...and the server holds as many polls open as there are nodes, not eight per node.
    await until(async () => (await openActivityPolls()) >= own + NODES, {
      what: `${NODES} more activity polls`,
      timeoutMs: 30_000,
    });
    // Counted over cycles of polls, not read once after a pause: each of the own + NODES pollers
    // sends at most one poll per EXPIRY_S, so however slow the machine, the polls received in a
    // span stay within (own + NODES) per cycle begun. Two pollers per node would double them.
    const pollers = own + NODES;
    const before = await activityPolls('service_requests');
    const started = performance.now();
    const received = await until(async () => (await activityPolls('service_requests')) - before, {
      what: `three cycles of ${pollers} polls`,
      accept: (n) => n >= 3 * pollers,
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    const cycles = Math.ceil((performance.now() - started) / (EXPIRY_S * 1000)) + 1;
    console.log(`${received} polls received in ${cycles} cycles begun, ${pollers} pollers`);
    expect(received, `${received} polls in ${cycles} cycles begun`).toBeLessThanOrEqual(pollers * cycles);
  });
});
