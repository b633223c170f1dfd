import { describe, expect, it } from 'vitest';
import { CONTROL_TASK_QUEUE, WORKFLOW_TYPES, reconcileWorkflowId, type RolloutWorkflow } from '../../src/contract';
import { alteredAgent } from '../helpers/altered-agent';
import { observesEnded } from '../helpers/observes';
import { useStack } from '../helpers/stack';

/*
 * A rollout counts a node by what its loop settles on, and a stale snapshot the loop re-takes
 * itself is not that (patch rollout-waits-out-stale-retake). The bench found it at 1000 nodes: a
 * controller that fell behind judged 126 snapshots past observation_ttl, the rollout ended with
 * those nodes BLOCKED/STALE_OBSERVATION, a snapshot their loops re-take themselves. Here the
 * real agent's observe is held back past observation_ttl, as a controller that is late to judge
 * it sees it: once for one node, every time for another.
 */

const stack = useStack();

/**
 * The real agent for `node`, whose first `late` observations come back `holdMs` after they were
 * taken, so the controller judges them older than observation_ttl.
 */
function agentLateAtFirst(node: string, late: number, holdMs: number): Promise<{ stop(): Promise<void> }> {
  let observed = 0;
  return alteredAgent(stack.env.nativeConnection, stack.fleet.agentFile(node), node, (real) => ({
    observe: async (request) => {
      const seen = await real.observe(request);
      if (++observed <= late) await new Promise((resolve) => setTimeout(resolve, holdMs));
      return seen;
    },
  }));
}

const policy = { observation_ttl: '5s', backoff: { initial: '1s', factor: 2, max: '4s' } };

describe("a rollout and its loops' stale snapshots", () => {
  it(
    'a node whose first snapshot came back stale is counted by what the retake found, not as BLOCKED',
    { timeout: 120_000 },
    async () => {
      await stack.fleet.writeDesired('L-1', 1, { version: '7.3', policy });
      await stack.fleet.writeDesired('L-2', 1, { version: '7.3', policy });
      for (const node of ['L-1', 'L-2']) await stack.fleet.writeAgent(node);
      await stack.startAgent('L-1');
      const late = await agentLateAtFirst('L-2', 1, 6_000);
      try {
        const result = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId: 'datum-rollout/stale-once',
          args: [{ generation: 1, nodes: ['L-1', 'L-2'] }],
        });
        const byNode = Object.fromEntries(result.nodes.map((n) => [n.node, n]));
        expect(byNode['L-1']).toMatchObject({ outcome: 'reported', status: 'CONVERGED' });
        // Before: { status: 'BLOCKED', reason: 'STALE_OBSERVATION' }, the loop's first decision.
        expect(byNode['L-2']).toMatchObject({ outcome: 'reported', status: 'CONVERGED' });
        // The stale snapshot did happen: it is the loop's first decision in the ledger.
        const ledger = await stack.ledger(stack.client.workflow.getHandle(reconcileWorkflowId('L-2', 1)));
        expect(ledger.map((e) => `${e.convergence_status}/${e.reason}`)[0]).toBe('BLOCKED/STALE_OBSERVATION');
        expect(ledger.at(-1)?.convergence_status).toBe('CONVERGED');
      } finally {
        await late.stop();
        for (const node of ['L-1', 'L-2'])
          await stack.client.workflow.getHandle(reconcileWorkflowId(node, 1)).terminate('test done');
      }
    },
  );

  it(
    'a node whose every snapshot comes back stale is counted BLOCKED at the third in a row, not the first',
    { timeout: 120_000 },
    async () => {
      await stack.fleet.writeDesired('L-3', 1, { version: '7.3', policy });
      await stack.fleet.writeAgent('L-3');
      const late = await agentLateAtFirst('L-3', Number.MAX_SAFE_INTEGER, 6_000);
      try {
        const result = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId: 'datum-rollout/stale-always',
          args: [{ generation: 1, nodes: ['L-3'] }],
        });
        expect(result.nodes[0]).toMatchObject({ outcome: 'reported', status: 'BLOCKED', reason: 'STALE_OBSERVATION' });
        // Counted only once the third stale snapshot was judged: three observes had come back
        // before the rollout closed (before the patch, it closed after the first).
        const closed = await stack.client.workflow.getHandle('datum-rollout/stale-always').describe();
        const done = await observesEnded(stack.client, reconcileWorkflowId('L-3', 1), 'completed');
        expect(done.filter((t) => t <= closed.closeTime!.getTime()).length).toBeGreaterThanOrEqual(3);
      } finally {
        await late.stop();
        await stack.client.workflow.getHandle(reconcileWorkflowId('L-3', 1)).terminate('test done');
      }
    },
  );
});
