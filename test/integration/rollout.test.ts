import { defaultPayloadConverter } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { CONTROL_TASK_QUEUE, WORKFLOW_TYPES, reconcileWorkflowId, stateQuery, type RolloutWorkflow } from '../../src/contract';
import { useStack } from '../helpers/stack';

const stack = useStack();

describe('rollout', () => {
  it('starts one loop per node, hands over from older generations, refuses a node whose authority is elsewhere', async () => {
    for (const node of ['W-1', 'W-2', 'W-3']) {
      await stack.fleet.writeDesired(node, 1, { version: '7.3' });
      await stack.fleet.writeAgent(node);
      await stack.startAgent(node);
    }
    // W-1 already runs generation 1; the rollout to 2 must hand it over.
    const old = await stack.startNode('W-1', 1);
    await stack.waitFor(old, (s) => s.convergence_status === 'CONVERGED');
    await stack.fleet.writeDesired('W-1', 2, { version: '7.4' });
    await stack.fleet.writeDesired('W-2', 2, { version: '7.4' });
    // W-3's authority stays at generation 1: refused, the others proceed.

    const result = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: 'datum-rollout/test',
      args: [{ generation: 2, nodes: ['W-1', 'W-2', 'W-3'] }],
    });
    expect(result.generation).toBe(2);
    const byNode = Object.fromEntries(result.nodes.map((n) => [n.node, n]));
    expect(byNode['W-1']).toMatchObject({
      outcome: 'reported',
      status: 'CONVERGED',
      workflow_id: reconcileWorkflowId('W-1', 2),
      handed_over_from: [reconcileWorkflowId('W-1', 1)],
    });
    expect(byNode['W-2']).toMatchObject({
      outcome: 'reported',
      status: 'CONVERGED',
      workflow_id: reconcileWorkflowId('W-2', 2),
      handed_over_from: [],
    });
    expect(byNode['W-3']).toMatchObject({ outcome: 'refused' });
    expect((byNode['W-3'] as { error: string }).error).toMatch(/the authority for W-3 is at generation 1, not 2 — fix:/);
    // One loop per node it accepted, each running generation 2 and reporting its own id; none for W-3.
    for (const node of ['W-1', 'W-2']) {
      expect(await stack.client.workflow.getHandle(reconcileWorkflowId(node, 2)).query(stateQuery)).toMatchObject({
        node,
        workflow_id: reconcileWorkflowId(node, 2),
        desired_generation: 2,
      });
    }
    await expect(stack.client.workflow.getHandle(reconcileWorkflowId('W-3', 2)).describe()).rejects.toThrow(/not found/i);

    expect(await old.result()).toMatchObject({ convergence_status: 'SUPERSEDED', superseded_by: reconcileWorkflowId('W-1', 2) });
    expect((await old.query(stateQuery)).convergence_status).toBe('SUPERSEDED');
    // The Web UI's list and page read the loop's static summary and details (set by the rollout).
    const described = await stack.client.workflow.getHandle(reconcileWorkflowId('W-2', 2)).describe();
    const digest = (await stack.client.workflow.getHandle(reconcileWorkflowId('W-2', 2)).query(stateQuery)).desired_digest;
    expect(await described.staticSummary()).toBe(
      `W-2 → generation 2 (${digest.slice(7, 19)}): build 7.4, config, app, maintenance`,
    );
    const details = (await described.staticDetails()) ?? '';
    expect(details).toContain(`digest: \`${digest}\``);
    expect(details).toContain('| config | file | `file:etc/app/config.json` |');
    expect(details).not.toContain('workers'); // a file's content never: its target only
    // The rollout's own timeline names what each activity did.
    const history = await stack.client.workflow.getHandle('datum-rollout/test').fetchHistory();
    const summaries = (history.events ?? [])
      .filter((e) => e.activityTaskScheduledEventAttributes && e.userMetadata?.summary)
      .map((e) => defaultPayloadConverter.fromPayload<string>(e.userMetadata!.summary!));
    expect(summaries[0]).toBe('start generation 2: W-1 … W-3 (3 nodes)');
    expect(summaries).toContain('read the state of 2 node(s)');
    for (const node of ['W-1', 'W-2']) await stack.client.workflow.getHandle(reconcileWorkflowId(node, 2)).terminate('test done');
  });

  it('hears its loops settle instead of reading every node each second; a loop attached to is read at once', async () => {
    for (const node of ['H-1', 'H-2']) {
      await stack.fleet.writeDesired(node, 1, { version: '7.3' });
      await stack.fleet.writeAgent(node);
      await stack.startAgent(node);
    }
    // H-1's loop runs already, started without a rollout to tell: the rollout attaches to it.
    const attached = await stack.startNode('H-1', 1);
    await stack.waitFor(attached, (s) => s.convergence_status === 'CONVERGED');
    // An hour between reads of the nodes that say nothing: only H-2's own word can end this rollout in time.
    const id = 'datum-rollout/gen-1/hears';
    const result = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: id,
      args: [{ generation: 1, nodes: ['H-1', 'H-2'], poll_seconds: 3600 }],
    });
    expect(result.nodes.map((n) => [n.node, 'status' in n ? n.status : n.outcome])).toEqual([
      ['H-1', 'CONVERGED'],
      ['H-2', 'CONVERGED'],
    ]);
    const history = await stack.client.workflow.getHandle(id).fetchHistory();
    const events = history.events ?? [];
    const summaries = events
      .filter((e) => e.activityTaskScheduledEventAttributes && e.userMetadata?.summary)
      .map((e) => defaultPayloadConverter.fromPayload<string>(e.userMetadata!.summary!));
    // One read of both at the start (H-1 settled), then only H-2, once it said it settled.
    expect(summaries.filter((t) => t.startsWith('read the state'))).toEqual(
      expect.arrayContaining(['read the state of 2 node(s)', 'read the state of 1 node(s) that said they settled']),
    );
    expect(events.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'nodeSettled').length).toBeGreaterThan(
      0,
    );
    for (const node of ['H-1', 'H-2']) await stack.client.workflow.getHandle(reconcileWorkflowId(node, 1)).terminate('test done');
  });

  it('a loop tells only a rollout: a start naming another workflow to tell is refused with the fix', async () => {
    const handle = await stack.client.workflow.start(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: reconcileWorkflowId('T-1', 1),
      args: [{ node: 'T-1', generation: 1, report_to: 'datum-fleet' }],
    });
    const failure: string = await handle.result().then(
      () => '',
      (e: { cause?: { message?: string } }) => e.cause?.message ?? '',
    );
    expect(failure).toMatch(
      /report_to "datum-fleet" is not a rollout's id \(datum-rollout\/…\): a loop tells only its rollout — fix:/,
    );
  });

  it('rejects malformed rollout input with the fix', async () => {
    const handle = await stack.client.workflow.start(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: 'datum-rollout/bad',
      args: [{ generation: 0, nodes: ['ok', '../etc'], poll_seconds: 0 }],
    });
    await expect(handle.result()).rejects.toThrow();
    const description = await handle.describe();
    expect(description.status.name).toBe('FAILED');
    const failure: string = await handle.result().then(
      () => '',
      (e: { cause?: { message?: string } }) => e.cause?.message ?? '',
    );
    expect(failure).toMatch(
      /generation 0 must be a whole number of 1 or more; not node names: "\.\.\/etc"; poll_seconds 0 must be a whole number of seconds from 1 to 86400 — fix:/,
    );
  });
});
