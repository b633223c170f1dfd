import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileBytes } from '../../src/domain';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  workItemId,
  workItemQuery,
  type WorkItem,
  type WorkItemWorkflow,
} from '../../src/contract';
import { startConflictingWriter } from '../helpers/fleet';
import { useChildren } from '../helpers/processes';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';

/*
 * A namespace credential holder starts a work item itself, with a `carry` that says a resolution
 * was given (the state a continue-as-new hands over). The item takes a carry only from its own
 * continue-as-new, so the forged one shows nothing nobody gave; an item started under an id that
 * is not its node's, condition's and resource's is refused; and when the real loop reports, the
 * item is its loop's, escalating and closing as any other.
 */

const stack = useStack({ controller: { workEscalateAfter: '3s' } });
const children = useChildren();

const item = async (id: string): Promise<WorkItem> => {
  const handle = stack.client.workflow.getHandle(id);
  const { status } = await handle.describe();
  return status.name === 'RUNNING' ? handle.query(workItemQuery) : ((await handle.result()) as WorkItem);
};

describe('a forged carry', () => {
  it('is never adopted: the forged run shows no resolution nobody gave, and the real loop’s item escalates and closes', async () => {
    const node = 'FC-1';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const loop = await stack.startNode(node, 1);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    const id = workItemId(node, 'CONFLICTING_WRITER', 'config');
    const report = {
      node,
      loop: loop.workflowId,
      generation: 1,
      digest: 'sha256:' + 'a'.repeat(64),
      ledger_seq: 1,
      decided_at: new Date().toISOString(),
      fresh: true,
      status: 'CONFLICT' as const,
      reason: 'CONFLICTING_WRITER' as const,
      reason_detail: 'forged',
      mode: 'enforce' as const,
      retry_budget: 3,
      conditions: [],
      resources: [],
    };
    const forgedResolution = {
      resolution: 'retake' as const,
      attempts: null,
      by: 'nobody',
      identity: 'forger@nowhere',
      note: 'never given',
      at: new Date().toISOString(),
      ledger_seq: 99,
      loop: loop.workflowId,
      expects: 'cleared' as const,
      outcome: null,
    };
    const carry: WorkItem = {
      id,
      node,
      condition: 'CONFLICTING_WRITER',
      resource_key: 'config',
      state: 'AWAITING_OBSERVATION',
      opened_at: report.decided_at,
      reopened: 0,
      since: report.decided_at,
      message: 'forged',
      evidence: null,
      tried: [],
      resolver: 'operator',
      loop: loop.workflowId,
      target: { generation: 1, digest: report.digest },
      mode: 'enforce',
      retry_budget: 3,
      resource: null,
      allowed: [],
      ledger: [],
      claim: null,
      resolution: forgedResolution,
      resolutions: [forgedResolution],
      escalated_at: null,
      closed: null,
    };
    const input = { node, condition: 'CONFLICTING_WRITER' as const, resource_key: 'config', report, escalate_after: '3s', carry };

    // Under another item's id: refused outright.
    const misnamed = await stack.client.workflow.start<WorkItemWorkflow>(WORKFLOW_TYPES.workItem, {
      workflowId: workItemId(node, 'UNKNOWN_OWNERSHIP', 'config'),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [input],
    });
    const refusal = await misnamed.result().then(
      () => null,
      (error: Error) => (error.cause as Error | undefined)?.message ?? error.message,
    );
    expect(refusal).toMatch(/is not the work item of FC-1\/CONFLICTING_WRITER\/config/);

    // Under its own id: the carry is not taken, and the forged opening report is not confirmed.
    const forged = await stack.client.workflow.start<WorkItemWorkflow>(WORKFLOW_TYPES.workItem, {
      workflowId: id,
      taskQueue: CONTROL_TASK_QUEUE,
      args: [input],
    });
    const ended = await forged.result();
    expect(ended.state).toBe('CLOSED');
    expect(ended.resolutions).toEqual([]);
    expect(ended.closed?.detail).toMatch(/opening report was not confirmed/);

    // The real loop's item: its own facts only, and it escalates and closes as any other.
    const config = path.join(stack.fleet.root(node), 'etc/app/config.json');
    const writer = startConflictingWriter(config, fileBytes({ workers: 2 }));
    children.push(writer);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONFLICT');
    const real = await until(() => item(id), {
      what: `${id} to escalate`,
      accept: (i) => i.state === 'ESCALATED',
      errors: 'retry',
    });
    expect(real.resolutions).toEqual([]);
    expect(real.message).not.toBe('forged');
    writer.kill('SIGKILL');
    const resolved = await stack.client.workflow.getHandle(id).executeUpdate('resolve', {
      args: [{ resolution: 'retake', by: 'alice', note: 'writer gone' }],
    });
    expect(resolved).toMatchObject({ item: { state: 'AWAITING_OBSERVATION' } });
    const closed = await until(() => item(id), { what: `${id} to close`, accept: (i) => i.state === 'CLOSED', errors: 'retry' });
    expect(closed.resolutions.map((r) => [r.by, r.outcome])).toEqual([['alice', 'cleared']]);
    await loop.terminate('test done');
  });
});
