import { promises as fs } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { emptyHistory, type BoundIntent } from '../../src/domain';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  type ReconcileCarry,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { useStack } from '../helpers/stack';

/*
 * Hole 4 of the safety model: a reconcile workflow trusted carried state from any caller. Here
 * an adversary with only a namespace credential starts reconcileNode the way `temporal workflow
 * start` would, with a `carry` that smuggles in a service command. It must be refused before
 * anything runs on the node, with a failure that says why.
 */

const stack = useStack();

/** A carry as continue-as-new would hand over, but built by the caller. */
function forgedCarry(intent: BoundIntent): ReconcileCarry {
  return {
    intent,
    history: emptyHistory(),
    ledger_tail: [],
    next_seq: 1,
    last_verified_at: null,
    last_fingerprint: null,
    runs: 1,
    unstored: [],
  };
}

async function startWith(node: string, generation: number, carry: ReconcileCarry): Promise<string> {
  const handle = await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId: reconcileWorkflowId(node, generation),
    args: [{ node, generation, carry }],
  });
  const error = await handle.result().then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkflowFailedError);
  const cause = (error as WorkflowFailedError).cause;
  return `${cause?.name}: ${cause?.message}`;
}

describe('a forged carry is refused before anything acts', () => {
  it('a plain start with a carry that injects a service command is refused, and nothing runs on the node', async () => {
    const node = 'F-1';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
    if (!read.ok) throw new Error(read.error);
    const marker = path.join(stack.fleet.root(node), 'pwned');
    const evil: BoundIntent = {
      ...read.intent,
      resources: {
        ...read.intent.resources,
        app: { type: 'service', release: 'build', config: 'config', command: ['sh', '-c', `touch ${marker}; sleep 600`] },
      },
    };

    const failure = await startWith(node, 1, forgedCarry(evil));
    expect(failure).toContain('ApplicationFailure');
    expect(failure).toContain('"carry" is handed over by continue-as-new of this workflow only');
    expect(failure).toContain('— fix: start it with {"node": "F-1", "generation": 1}');
    // Nothing reached the node: no observation, no apply, no file, no process.
    const history = await stack.historyCounts(stack.client.workflow.getHandle(reconcileWorkflowId(node, 1)));
    expect(history.scheduled).toEqual({});
    await expect(fs.stat(marker)).rejects.toThrow(/ENOENT/);
    await expect(fs.stat(path.join(stack.fleet.root(node), 'current'))).rejects.toThrow(/ENOENT/);
  });

  it('a correct start of the same node afterwards reconciles as usual', async () => {
    const node = 'F-1';
    const handle = await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: reconcileWorkflowId(node, 1),
      args: [{ node, generation: 1 }],
    });
    const state = await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    expect(state.convergence_status).toBe('CONVERGED');
    // The repair is in the ledger (the state may already show the steady pass after it).
    expect((await stack.ledger(handle)).map((e) => e.reason)).toContain('CONVERGED_AFTER_REPAIR');
    await expect(fs.stat(path.join(stack.fleet.root(node), 'pwned'))).rejects.toThrow(/ENOENT/);
  });
});
