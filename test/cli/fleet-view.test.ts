import { describe, expect, it } from 'vitest';
import { CONTROL_TASK_QUEUE, WORKFLOW_TYPES, reconcileWorkflowId, type ReconcileNodeWorkflow } from '../../src/contract';
import { nodesWithoutLoop } from '../../src/worker/fleet-metrics';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { runDatum } from '../helpers/cli';

/*
 * A fleet view that cannot lie (issue 20): `datum status` and `datum nodes` compare the nodes the
 * authority declares with the loops visibility shows running. A node with desired state and no
 * running loop is a condition, with how its last loop ended and when, and status exits 1 naming it.
 * A real dev server, the real controller worker, a real agent, and `datum` as a user runs it.
 */

const stack = useStack();

const datum = (env: Record<string, string | undefined>, ...args: string[]) =>
  runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir, ...env });

interface StatusCondition {
  node: string;
  type: string;
  workflow_id: string | null;
  since: string;
  message: string;
  evidence: { desired_generation: number | null; end: string; last_loop: { how: string; closed_at: string | null } | null };
}

describe('datum status and datum nodes against the authority', () => {
  it('a terminated loop makes status exit 1 and name the node; a node never rolled out and a timed-out loop too', async () => {
    // F-1 runs and converges; F-2 has desired state and was never rolled out; F-3's loop is terminated.
    for (const node of ['F-1', 'F-2', 'F-3']) await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent('F-1');
    await stack.startAgent('F-1');
    const right = await stack.startNode('F-1', 1);
    await stack.waitFor(right, (s) => s.convergence_status === 'CONVERGED');
    const doomed = await stack.startNode('F-3', 1);
    await doomed.terminate('decommissioned by mistake');
    // F-4's loop was started on a queue no worker serves, with a run timeout that then passed.
    await stack.fleet.writeDesired('F-4', 1);
    const lost = await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: 'no-worker-serves-this',
      workflowId: reconcileWorkflowId('F-4', 1),
      args: [{ node: 'F-4', generation: 1 }],
      workflowRunTimeout: '1s',
    });
    await expect(lost.result()).rejects.toThrow();

    const status = await until(() => datum({}, 'status', '--json'), {
      what: 'status to list F-2, F-3 and F-4',
      accept: (r) => ['F-2', 'F-3', 'F-4'].every((n) => r.stdout.includes(`"node": "${n}"`)),
      timeoutMs: 30_000,
    });
    expect(status.code).toBe(1);
    const report = JSON.parse(status.stdout) as { conditions: StatusCondition[]; declared: number; fleet: string };
    expect(report.fleet).toBe(stack.fleet.dir);
    expect(report.declared).toBe(4);
    const missing = report.conditions.filter((c) => c.type === 'NO_RUNNING_LOOP');
    expect(missing.map((c) => c.node)).toEqual(['F-2', 'F-3', 'F-4']);
    const [never, terminated, timedOut] = missing;
    expect(never).toMatchObject({
      workflow_id: null,
      evidence: { desired_generation: 1, end: 'NEVER_STARTED', last_loop: null },
    });
    expect(never.message).toMatch(
      /F-2 has desired state at generation 1 but no reconcile loop has ever run for it — fix: roll it out/,
    );
    expect(terminated).toMatchObject({ workflow_id: 'datum/F-3/gen-1', evidence: { end: 'TERMINATED' } });
    expect(terminated.evidence.last_loop?.how).toMatch(/^terminated by .+: "decommissioned by mistake"$/);
    expect(Date.parse(terminated.since)).toBe(Date.parse(terminated.evidence.last_loop!.closed_at!));
    expect(timedOut).toMatchObject({ workflow_id: 'datum/F-4/gen-1', evidence: { end: 'TIMED_OUT' } });
    expect(report.conditions.some((c) => c.node === 'F-1')).toBe(false);

    // The text a person reads names the node, how its loop ended, and the fix.
    const text = await datum({}, 'status');
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(
      /F-3\s+NO_RUNNING_LOOP\s+-\s+\S+ ago\s+operator\s+F-3 has desired state at generation 1 but no running reconcile loop: datum\/F-3\/gen-1 terminated by .*"decommissioned by mistake" at /,
    );
    expect(text.stdout).toMatch(/--generation 1 --nodes F-3`/);
    const nodes = await datum({}, 'nodes');
    expect(nodes.stdout).toMatch(/F-1\s+CONVERGED/);
    expect(nodes.stdout).toMatch(/F-2\s+NO LOOP\s+never rolled out\s+1\s+-\s+NO_RUNNING_LOOP/);
    expect(nodes.stdout).toMatch(/F-3\s+NO LOOP\s+terminated\s+1\s+-\s+NO_RUNNING_LOOP/);
    expect(nodes.stdout).toMatch(/F-4\s+NO LOOP\s+timed out\s+1/);
    const onlyMissing = JSON.parse((await datum({}, 'nodes', '--condition', 'NO_RUNNING_LOOP', '--json')).stdout) as {
      nodes: unknown[];
      without_loop: Array<{ node: string; end: string }>;
    };
    expect(onlyMissing.nodes).toEqual([]);
    expect(onlyMissing.without_loop.map((w) => `${w.node}:${w.end}`)).toEqual([
      'F-2:NEVER_STARTED',
      'F-3:TERMINATED',
      'F-4:TIMED_OUT',
    ]);

    // The fleet metric counts the same nodes, by how their loop ended.
    const declared = ['F-1', 'F-2', 'F-3', 'F-4'];
    expect(await nodesWithoutLoop(stack.client, declared)).toEqual({ NEVER_STARTED: 1, TERMINATED: 1, TIMED_OUT: 1 });

    // Without the authority, status cannot call the fleet right: it says what it did not check.
    const unchecked = await datum({ DATUM_FLEET: undefined }, 'status', '--condition', 'OBSERVED_DRIFT');
    expect(unchecked).toMatchObject({ code: 0 });
    const blind = await datum({ DATUM_FLEET: undefined }, 'nodes');
    expect(blind.stdout).toMatch(
      /Nodes without a running loop were not checked: no fleet directory — fix: pass --fleet DIR or set DATUM_FLEET/,
    );
    expect(blind.stdout).not.toMatch(/F-2/);
    const asked = await datum({ DATUM_FLEET: undefined }, 'status', '--condition', 'NO_RUNNING_LOOP');
    expect(asked.code).toBe(2);
    expect(asked.stderr).toMatch(/--condition NO_RUNNING_LOOP compares the loops with the authority — fix: pass --fleet DIR/);

    // A loop running again clears the node's condition: the next status no longer names it.
    const again = await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: reconcileWorkflowId('F-3', 1),
      args: [{ node: 'F-3', generation: 1 }],
    });
    const after = await until(() => datum({}, 'status', '--condition', 'NO_RUNNING_LOOP', '--json'), {
      what: 'status to drop F-3 from NO_RUNNING_LOOP',
      accept: (r) => !r.stdout.includes('"node": "F-3"'),
      timeoutMs: 30_000,
    });
    expect((JSON.parse(after.stdout) as { conditions: StatusCondition[] }).conditions.map((c) => c.node)).toEqual(['F-2', 'F-4']);
    for (const h of [right, again]) await h.terminate('test done');
  });
});
