import { Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { createAgentActivities } from '../../src/agent/activities';
import { codecDataConverter } from '../../src/codec';
import { agentTaskQueue } from '../../src/contract';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { runDatum } from '../helpers/cli';

/*
 * A loop that knows when it is blind (issue 32). The node's agent picks each observe up and never
 * answers it, while it keeps heart-beating: the agent's own activities, with observe replaced by
 * one that beats every second until it is cancelled (what a wedged read inside a live agent
 * looks like to the server). Before, the loop held its last CONVERGED for more than three minutes
 * (three attempts of a minute each) and `datum status` named nothing. Now the observation's bound,
 * node_timeout + observation_ttl, ends it: the loop says BLOCKED / NODE_UNREACHABLE within the
 * bound, and `datum status` names the node.
 */

const stack = useStack({ controller: { fleetInterval: '2s' } });

const NODE_TIMEOUT_S = 5;
const OBSERVATION_TTL_S = 10;
const BOUND_MS = (NODE_TIMEOUT_S + OBSERVATION_TTL_S) * 1000;

/** The node's agent, whose observes hang while it beats: a real activity worker on datum-node-<node>. */
async function hangingAgent(node: string): Promise<{ picked: () => number; stop: () => Promise<void> }> {
  let picked = 0;
  const real = createAgentActivities(stack.fleet.agentFile(node));
  const worker = await Worker.create({
    connection: stack.env.nativeConnection,
    taskQueue: agentTaskQueue(node),
    dataConverter: codecDataConverter(),
    activities: {
      ...real,
      observe: async () => {
        picked++;
        const ctx = Context.current();
        const beat = setInterval(() => ctx.heartbeat(), 1000);
        try {
          await ctx.cancelled;
        } finally {
          clearInterval(beat);
        }
        throw new Error('never reached: the observe hangs until it is cancelled');
      },
    },
  });
  const run = worker.run();
  return {
    picked: () => picked,
    stop: async () => {
      worker.shutdown();
      await run.catch(() => undefined);
    },
  };
}

describe('a loop whose observation hangs while its agent beats', () => {
  it('raises a condition within node_timeout + observation_ttl, stops reporting CONVERGED, and datum status names it', async () => {
    const node = 'B-1';
    await stack.fleet.writeDesired(node, 1, {
      policy: { node_timeout: `${NODE_TIMEOUT_S}s`, observation_ttl: `${OBSERVATION_TTL_S}s` },
    });
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');

    await stack.stopAgent(node);
    const agent = await hangingAgent(node);
    try {
      await blindWithin(node, handle, agent);
    } finally {
      await agent.stop();
    }
    await handle.terminate('test done');
  });
});

async function blindWithin(node: string, handle: WorkflowHandle, agent: { picked: () => number }): Promise<void> {
  const env = { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: undefined };
  const asked = await runDatum(['reconcile', node], env);
  expect(asked.code, asked.stderr).toBe(0);
  await until(() => agent.picked(), {
    what: 'the hanging agent to pick an observe up',
    accept: (n) => n > 0,
    timeoutMs: 30_000,
  });
  const pickedAt = Date.now();

  const blind = await stack.waitFor(handle, (s) => s.reason === 'NODE_UNREACHABLE', 60_000);
  const tookMs = Date.now() - pickedAt;
  console.log(`blind-loop: NODE_UNREACHABLE ${tookMs} ms after the hanging observe was picked up (bound ${BOUND_MS} ms)`);
  expect(blind.convergence_status).toBe('BLOCKED');
  expect(blind.conditions.map((c) => c.type)).toContain('NODE_UNREACHABLE');
  // Within the bound (and a few seconds for the workflow task), not after three one-minute attempts.
  expect(tookMs).toBeLessThan(BOUND_MS + 10_000);

  const status = await until(() => runDatum(['status'], env), {
    what: 'datum status to name B-1',
    accept: (r) => /B-1\s+NODE_UNREACHABLE/.test(r.stdout),
    timeoutMs: 30_000,
  });
  expect(status.code).toBe(1);
  expect(status.stdout).not.toMatch(/the fleet is right/);
}
