import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONTROL_TASK_QUEUE,
  ROLLOUT_OUTCOMES,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  rolloutWorkflowId,
  type RolloutWorkflow,
} from '../../src/contract';
import {
  appliedActions,
  missingFromStore,
  startProductionStack,
  startsOf,
  waitFor,
  writeAgentFile,
  writeNode,
  type ProductionStack,
} from './fixture';
import { until } from '../helpers/until';

/*
 * Crashes on the production topology, 20 nodes, two `datum worker` processes: a worker killed -9
 * mid-rollout (the other finishes), then the Temporal server killed -9 and restarted and
 * PostgreSQL restarted mid-rollout. Evidence from outside the loop: each node's app counts its own
 * starts, the PostgreSQL ledger holds every decision each loop made, and no action was applied
 * twice.
 */

const NODES = Array.from({ length: 20 }, (_, i) => `R-${String(i + 1).padStart(2, '0')}`);
let stack: ProductionStack;

beforeAll(async () => {
  stack = await startProductionStack(2);
  // Four agent processes, five nodes each: a host per five nodes, and less load on a 2-core box.
  for (let a = 0; a < 4; a++) {
    const nodes = NODES.slice(a * 5, a * 5 + 5);
    const files: string[] = [];
    for (const node of nodes) {
      await writeNode(stack, node, 1, { version: '7.4', policy: { watch: false, resync_interval: '5s' } });
      files.push(await writeAgentFile(stack, node));
    }
    await stack.cluster.startAgents(`agents-${a + 1}`, files);
  }
}, 900_000);
afterAll(async () => {
  await stack?.stop();
}, 120_000);

async function startRollout(generation: number) {
  return await stack.client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId: rolloutWorkflowId(generation, NODES),
    args: [{ generation, nodes: NODES }],
  });
}

/** Resolves once `n` nodes have a recorded decision at `generation` in the store (the rollout is under way). */
async function untilDecided(generation: number, n: number): Promise<void> {
  await until(
    async () => {
      let decided = 0;
      for (const node of NODES) if ((await stack.ledger.list(node)).some((e) => e.desired_generation === generation)) decided++;
      return decided >= n;
    },
    { what: `${n} nodes to decide at generation ${generation}`, timeoutMs: 180_000 },
  );
}

async function expectEveryNode(generation: number, starts: number): Promise<void> {
  const problems: string[] = [];
  for (const node of NODES) {
    const handle = stack.client.workflow.getHandle(reconcileWorkflowId(node, generation));
    await waitFor(handle, (s) => s.convergence_status === 'CONVERGED', 240_000);
    problems.push(...(await missingFromStore(stack, handle, node)));
    const applied = await appliedActions(stack, node);
    const twice = applied.filter((a, i) => applied.indexOf(a) !== i);
    if (twice.length > 0) problems.push(`${node}: applied twice: ${twice.join(', ')}`);
    if (startsOf(stack, node) !== starts)
      problems.push(`${node}: the app counted ${startsOf(stack, node)} starts, expected ${starts}`);
  }
  expect(problems).toEqual([]);
}

describe('production cluster: 20 nodes, two controller workers', () => {
  it('a worker killed -9 mid-rollout: the other finishes every node, with no action applied twice and no decision lost', async () => {
    const rollout = await startRollout(1);
    await untilDecided(1, 3);
    await stack.cluster.kill('worker-1');
    const result = await rollout.result();
    expect(result.nodes.filter((n) => n.outcome === ROLLOUT_OUTCOMES.refused)).toEqual([]);
    await expectEveryNode(1, 1);
  }, 600_000);

  it('the Temporal server killed -9 and restarted, then PostgreSQL restarted, mid-rollout: every loop carries on, nothing lost, nothing repeated', async () => {
    await stack.cluster.restartWorker('worker-1');
    for (const node of NODES)
      await writeNode(stack, node, 2, { version: '7.5', policy: { watch: false, resync_interval: '5s' } });
    const rollout = await startRollout(2);
    await untilDecided(2, 3);
    await stack.cluster.crashServer();
    await untilDecided(2, 10);
    await stack.cluster.pg.restart();
    // The rollout workflow's own result, fetched through the restarted server.
    const result = await stack.client.workflow.getHandle<RolloutWorkflow>(rollout.workflowId).result();
    expect(result.nodes.filter((n) => n.outcome === ROLLOUT_OUTCOMES.refused)).toEqual([]);
    // 7.4 once, then 7.5 once.
    await expectEveryNode(2, 2);
    for (const node of NODES) {
      const gen1 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 1));
      expect(await missingFromStore(stack, gen1, node)).toEqual([]);
    }
  }, 900_000);
});
