import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { CONTROL_TASK_QUEUE, WORKFLOW_TYPES, reconcileWorkflowId, type RolloutWorkflow } from '../../src/contract';
import { useStack } from '../helpers/stack';

/*
 * Hole 9 of issue 18: a rollout trusted a `prepared` list from whoever started it. An adversary
 * with a namespace credential starts `rollout` the way `temporal workflow start` would, claiming
 * that a node with no desired state at all was "started" as another node's converged loop. The
 * rollout must refuse the list (it is carried by continue-as-new only), not report that node
 * CONVERGED from a loop that is not its own.
 */

const stack = useStack();

describe('a rollout started with a forged prepared list', () => {
  it('is refused instead of reporting a node CONVERGED from another loop', async () => {
    // R-1 is a real node whose loop converges; R-2 has no desired state and no agent.
    await stack.fleet.writeDesired('R-1', 1);
    await stack.fleet.writeAgent('R-1');
    await stack.startAgent('R-1');
    const loop = await stack.startNode('R-1', 1);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');

    const handle = await stack.client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: 'datum-rollout/forged',
      args: [
        {
          generation: 1,
          nodes: ['R-2'],
          prepared: [
            {
              node: 'R-2',
              outcome: 'started',
              workflow_id: reconcileWorkflowId('R-1', 1),
              digest: 'sha256:x',
              handed_over_from: [],
            },
          ],
        },
      ],
    });
    const outcome = await handle.result().then(
      (result) => ({ result, error: null }),
      (error: unknown) => ({ result: null, error }),
    );
    // Before the fix: { nodes: [{ node: 'R-2', outcome: 'reported', status: 'CONVERGED', … }] }.
    expect(outcome.result).toBeNull();
    expect(outcome.error).toBeInstanceOf(WorkflowFailedError);
    const cause = (outcome.error as WorkflowFailedError).cause;
    expect(cause?.message).toContain('"prepared" is handed over by continue-as-new of this rollout only');
    expect(cause?.message).toContain('— fix: start it with {"generation": 1');
    // Nothing was read or started on its behalf: no activity ran at all.
    const history = await stack.historyCounts(handle);
    expect(history.scheduled).toEqual({});
    await loop.terminate('test done');
  });
});
