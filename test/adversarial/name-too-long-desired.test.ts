import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { CONTROL_TASK_QUEUE, WORKFLOW_TYPES, reconcileWorkflowId, type RolloutWorkflow } from '../../src/contract';
import { useStack } from '../helpers/stack';

/*
 * Hole 8 of issue 18, the validation side: a desired-state author writes a file resource whose
 * path has a segment longer than any filesystem takes (NAME_MAX, 255 bytes). It passed
 * validation, and the node then went NODE_UNREACHABLE for good (every observe failed with
 * ENAMETOOLONG) instead of the author being told the desired state is invalid. It must be
 * refused where every invalid file is, naming the field and the fix, while the node's loop at
 * the last valid generation goes on repairing it.
 */

const stack = useStack();

describe('a file path with a name longer than the filesystem allows', () => {
  it('is invalid desired state, named with its fix, not an unreachable node', async () => {
    const node = 'L-1';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');

    // Generation 2 adds a file under a 300-byte directory name.
    const doc = parse(await fs.readFile(stack.fleet.desiredFile(node), 'utf8')) as { generation: number; resources: object };
    doc.generation = 2;
    doc.resources = { ...doc.resources, long: { type: 'file', path: `etc/${'a'.repeat(300)}/app.conf`, content: 'x' } };
    await fs.writeFile(stack.fleet.desiredFile(node), stringify(doc));

    const result = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: 'datum-rollout/long-name',
      args: [{ generation: 2, nodes: [node] }],
    });
    // Before the fix: { outcome: 'reported', status: 'BLOCKED', reason: 'NODE_UNREACHABLE' }.
    expect(result.nodes[0]).toMatchObject({ node, outcome: 'refused' });
    const error = (result.nodes[0] as { error: string }).error;
    expect(error).toMatch(/resources\.long\.path: .*has a directory name of 300 bytes .*more than the 255 bytes/);
    expect(error).toMatch(/fix: shorten the path/);

    // The node's loop says the same, as a desired-state problem, not an unreachable node.
    const state = await stack.waitFor(gen1, (s) => s.conditions.some((c) => c.type === 'INVALID_DESIRED_STATE'));
    expect(state).toMatchObject({ convergence_status: 'BLOCKED', reason: 'INVALID_DESIRED_STATE' });
    expect(state.conditions.map((c) => c.type)).not.toContain('NODE_UNREACHABLE');

    // The author shortens the name: the next rollout converges the node, the new file included.
    doc.resources = { ...doc.resources, long: { type: 'file', path: `etc/${'a'.repeat(200)}/app.conf`, content: 'x' } };
    await fs.writeFile(stack.fleet.desiredFile(node), stringify(doc));
    const fixed = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: 'datum-rollout/long-name-fixed',
      args: [{ generation: 2, nodes: [node] }],
    });
    expect(fixed.nodes[0]).toMatchObject({ node, outcome: 'reported', status: 'CONVERGED' });
    expect(await fs.readFile(path.join(stack.fleet.root(node), `etc/${'a'.repeat(200)}/app.conf`), 'utf8')).toBe('x');
    await stack.client.workflow.getHandle(reconcileWorkflowId(node, 2)).terminate('test done');
  });
});
