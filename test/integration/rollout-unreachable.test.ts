import { describe, expect, it } from 'vitest';
import { CONTROL_TASK_QUEUE, WORKFLOW_TYPES, reconcileWorkflowId, type RolloutWorkflow } from '../../src/contract';
import { observesEnded } from '../helpers/observes';
import { useStack } from '../helpers/stack';

/*
 * A pass the node did not answer is one its loop asks again by itself, soon (rule
 * unreachable-reprobes-soon), and a rollout counts the node by what that finds (patch
 * rollout-waits-out-reprobe). The bench found it on the cluster at 1000 nodes: an agent late under
 * load made its loop decide BLOCKED/NODE_UNREACHABLE, the loop looked again only at its resync,
 * and the rollout counted the node BLOCKED. Here the node's agent starts only after its loop's
 * first pass went unanswered; another node's never does.
 */

const stack = useStack();

describe("a rollout and its loops' unanswered passes", () => {
  it(
    'a node whose agent was late for the first pass is counted by what the re-probe found, not as BLOCKED',
    { timeout: 120_000 },
    async () => {
      // A resync far off: only the loop's own re-probe can find the agent within the test.
      const policy = { node_timeout: '2s', resync_interval: '10m', backoff: { initial: '5s', factor: 2, max: '10s' } };
      await stack.fleet.writeDesired('U-1', 1, { version: '7.3', policy });
      await stack.fleet.writeAgent('U-1');
      const rollout = await stack.client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
        taskQueue: CONTROL_TASK_QUEUE,
        workflowId: 'datum-rollout/late-agent',
        args: [{ generation: 1, nodes: ['U-1'] }],
      });
      const loop = stack.client.workflow.getHandle(reconcileWorkflowId('U-1', 1));
      try {
        const away = await stack.waitFor(loop, (s) => s.reason === 'NODE_UNREACHABLE', 30_000);
        expect(away.recheck_trigger?.detail).toBe(
          'the node answers with a fresh snapshot; the loop asks it again in 5s, then at resync_interval',
        );
        await stack.startAgent('U-1');
        const result = await rollout.result();
        // Before: { status: 'BLOCKED', reason: 'NODE_UNREACHABLE' }, the loop's first decision.
        expect(result.nodes[0]).toMatchObject({ node: 'U-1', outcome: 'reported', status: 'CONVERGED' });
        const ledger = await stack.ledger(loop);
        expect(ledger.map((e) => `${e.convergence_status}/${e.reason}`)[0]).toBe('BLOCKED/NODE_UNREACHABLE');
        expect(ledger.at(-1)?.convergence_status).toBe('CONVERGED');
      } finally {
        await loop.terminate('test done');
      }
    },
  );

  it(
    'a node that never answers is counted BLOCKED once its loop leaves it to the resync, at the third pass in a row',
    { timeout: 120_000 },
    async () => {
      const policy = { node_timeout: '2s', resync_interval: '10m', backoff: { initial: '1s', factor: 2, max: '2s' } };
      await stack.fleet.writeDesired('U-2', 1, { version: '7.3', policy });
      await stack.fleet.writeAgent('U-2');
      const result = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
        taskQueue: CONTROL_TASK_QUEUE,
        workflowId: 'datum-rollout/no-agent',
        args: [{ generation: 1, nodes: ['U-2'] }],
      });
      const loop = stack.client.workflow.getHandle(reconcileWorkflowId('U-2', 1));
      try {
        expect(result.nodes[0]).toMatchObject({ outcome: 'reported', status: 'BLOCKED', reason: 'NODE_UNREACHABLE' });
        // Counted once the third unanswered pass was decided, whose wait is the resync: three
        // observes had timed out before the rollout closed (before the patch, it closed after one).
        const closed = await stack.client.workflow.getHandle('datum-rollout/no-agent').describe();
        const timedOut = await observesEnded(stack.client, loop.workflowId, 'timed out');
        expect(timedOut.filter((t) => t <= closed.closeTime!.getTime()).length).toBe(3);
        const state = await stack.waitFor(loop, (s) => s.reason === 'NODE_UNREACHABLE');
        expect(state.recheck_trigger).toMatchObject({ not_before: null, detail: 'the node answers with a fresh snapshot' });
      } finally {
        await loop.terminate('test done');
      }
    },
  );
});
