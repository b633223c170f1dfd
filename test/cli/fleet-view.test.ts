import { describe, expect, it } from 'vitest';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  loopShardQueue,
  reconcileWorkflowId,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { nodesWithoutLoop } from '../../src/worker/fleet-metrics';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { runDatum } from '../helpers/cli';

/*
 * The fleet's own view (issues 20 and 32): the fleet workflow on the controller compares the nodes
 * the authority declares with the loops, and `datum status` and `datum nodes` read its view, so the
 * person asking needs no fleet directory. A node with desired state and no running loop is a
 * condition saying how its last loop ended; a fleet nobody looks at is said to be unwatched, and a
 * server that cannot be reached is said to be so: neither is ever "the fleet is right".
 * A real dev server, the real controller worker, a real agent, and `datum` as a user runs it.
 */

const stack = useStack({ controller: { fleetInterval: '2s' } });

/** `datum` with the Temporal address alone: no --fleet, no DATUM_FLEET anywhere in its environment. */
const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: undefined });

interface StatusCondition {
  node: string;
  type: string;
  workflow_id: string | null;
  since: string;
  message: string;
  evidence: { desired_generation: number | null; end: string; last_loop: { how: string; closed_at: string | null } | null };
}

interface StatusReport {
  conditions: StatusCondition[];
  declared: number | null;
  fleet: string | null;
  watch: { watched: boolean; since: string | null; problem: string | null; looked_at: string | null };
}

const MISSING = ['F-2', 'F-3', 'F-4', 'F-5'];

describe('datum status and datum nodes from the fleet workflow, with no fleet directory', () => {
  it('names a node never rolled out, and one whose loop was terminated, cancelled or failed; exit 1', async () => {
    // F-1 runs and converges; F-2 was never rolled out; F-3's loop is terminated, F-4's cancelled,
    // and F-5's failed (a start carrying state only continue-as-new may hand over is refused).
    for (const node of ['F-1', ...MISSING]) await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent('F-1');
    await stack.startAgent('F-1');
    const right = await stack.startNode('F-1', 1);
    await stack.waitFor(right, (s) => s.convergence_status === 'CONVERGED');
    await (await stack.startNode('F-3', 1)).terminate('decommissioned by mistake');
    const cancelled = await stack.startNode('F-4', 1);
    await cancelled.cancel();
    await expect(cancelled.result()).rejects.toThrow();
    const forged = await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: reconcileWorkflowId('F-5', 1),
      args: [{ node: 'F-5', generation: 1, carry: {} as never }],
    });
    await expect(forged.result()).rejects.toThrow();

    // A look taken while F-3 to F-5 still had no loop at all says NEVER_STARTED for each: wait for one
    // taken after their loops ended.
    const ends = (stdout: string) =>
      (JSON.parse(stdout) as StatusReport).conditions
        .filter((c) => c.type === 'NO_RUNNING_LOOP')
        .map((c) => `${c.node}:${c.evidence.end}`);
    const status = await until(() => datum('status', '--json'), {
      what: 'status to name how the loops of F-3 to F-5 ended, from the fleet workflow',
      accept: (r) => {
        const seen = ends(r.stdout);
        return MISSING.every((n) => seen.some((e) => e.startsWith(`${n}:`))) && !seen.includes('F-3:NEVER_STARTED');
      },
      timeoutMs: 60_000,
    });
    expect(status.code).toBe(1);
    const report = JSON.parse(status.stdout) as StatusReport;
    expect(report.fleet).toBeNull();
    expect(report.watch).toMatchObject({ watched: true, problem: null });
    expect(report.declared).toBe(5);
    const missing = report.conditions.filter((c) => c.type === 'NO_RUNNING_LOOP');
    expect(ends(status.stdout)).toEqual(['F-2:NEVER_STARTED', 'F-3:TERMINATED', 'F-4:CANCELED', 'F-5:FAILED']);
    const [never, terminated, , failed] = missing;
    expect(never).toMatchObject({ workflow_id: null, evidence: { desired_generation: 1, last_loop: null } });
    expect(never.message).toMatch(
      /F-2 has desired state at generation 1 but no reconcile loop has ever run for it — fix: roll it out/,
    );
    expect(terminated.workflow_id).toBe('datum/F-3/gen-1');
    expect(terminated.evidence.last_loop?.how).toMatch(/^terminated by .+: "decommissioned by mistake"$/);
    expect(Date.parse(terminated.since)).toBe(Date.parse(terminated.evidence.last_loop!.closed_at!));
    expect(failed.evidence.last_loop?.how).toMatch(/InvalidWorkflowInput|carry/);
    expect(report.conditions.some((c) => c.node === 'F-1')).toBe(false);

    // The text a person reads names each node, how its loop ended, and the fix.
    const text = await datum('status');
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(
      /F-3\s+NO_RUNNING_LOOP\s+-\s+\S+ ago\s+operator \(judgement\)\s+F-3 has desired state at generation 1 but no running reconcile loop: datum\/F-3\/gen-1 terminated by .*"decommissioned by mistake" at /,
    );
    expect(text.stdout).toMatch(/F-4\s+NO_RUNNING_LOOP.*cancel/);
    expect(text.stdout).toMatch(/--generation 1 --nodes F-3`/);
    expect(text.stdout).not.toMatch(/the fleet is right/);
    const nodes = await datum('nodes');
    expect(nodes.code).toBe(0);
    expect(nodes.stdout).toMatch(/F-1\s+CONVERGED/);
    expect(nodes.stdout).toMatch(/F-2\s+NO LOOP\s+never rolled out\s+1\s+-\s+NO_RUNNING_LOOP/);
    expect(nodes.stdout).toMatch(/F-3\s+NO LOOP\s+terminated\s+1/);
    expect(nodes.stdout).toMatch(/F-4\s+NO LOOP\s+canceled\s+1/);
    expect(nodes.stdout).toMatch(/F-5\s+NO LOOP\s+failed\s+1/);

    // --fleet DIR stays an override: the same look, run by the CLI against that directory.
    const override = JSON.parse(
      (await runDatum(['status', '--json', '--fleet', stack.fleet.dir], { TEMPORAL_ADDRESS: stack.env.address })).stdout,
    ) as StatusReport;
    expect(override.fleet).toBe(stack.fleet.dir);
    expect(override.conditions.filter((c) => c.type === 'NO_RUNNING_LOOP').map((c) => c.node)).toEqual(MISSING);
    // The controller's metric counts the same nodes, by how their loop ended.
    expect(await nodesWithoutLoop(stack.client, ['F-1', ...MISSING])).toEqual({
      NEVER_STARTED: 1,
      TERMINATED: 1,
      CANCELED: 1,
      FAILED: 1,
    });

    // A loop running again closes the node's condition at the fleet workflow's next look.
    const again = await stack.startNode('F-3', 1);
    const after = await until(() => datum('status', '--condition', 'NO_RUNNING_LOOP', '--json'), {
      what: 'status to drop F-3 from NO_RUNNING_LOOP',
      accept: (r) => !r.stdout.includes('"node": "F-3"'),
      timeoutMs: 30_000,
    });
    expect((JSON.parse(after.stdout) as StatusReport).conditions.map((c) => c.node)).toEqual(['F-2', 'F-4', 'F-5']);
    for (const h of [right, again]) await h.terminate('test done');
  });

  it('a loop on a shard queue no controller serves is LOOP_QUEUE_UNSERVED at the next look, and clears once one does (issue 33)', async () => {
    // S-1's loop starts on shard 1's queue, as a rollout on a fleet of two shards would put it,
    // while the only controller serves datum-control.
    const shard = loopShardQueue(1);
    await stack.fleet.writeDesired('S-1', 1);
    await stack.fleet.writeAgent('S-1');
    await stack.startAgent('S-1');
    const loop = await stack.startNode('S-1', 1, shard);
    const unserved = await until(() => datum('status', '--condition', 'LOOP_QUEUE_UNSERVED', '--json'), {
      what: 'status to name S-1 as LOOP_QUEUE_UNSERVED',
      accept: (r) => r.stdout.includes('"node": "S-1"'),
      timeoutMs: 30_000,
    });
    expect(unserved.code).toBe(1);
    const [condition] = (JSON.parse(unserved.stdout) as StatusReport).conditions;
    expect([condition.node, condition.type, condition.workflow_id]).toEqual(['S-1', 'LOOP_QUEUE_UNSERVED', loop.workflowId]);
    expect(condition.message).toMatch(
      /^no controller worker polls datum-control-loops-1, where datum\/S-1\/gen-1 runs: .* — fix: start a controller worker that serves shard 1: `datum worker --loop-shards N --serve-shards 1`/,
    );
    // The human view names it too, and nothing says the fleet is right.
    const human = await datum('status', '--condition', 'LOOP_QUEUE_UNSERVED');
    expect(human.stdout).toMatch(/S-1.*LOOP_QUEUE_UNSERVED/);
    expect(human.stdout).not.toMatch(/the fleet is right/);

    // A controller on that shard's queue: the loop runs, and the next look closes the condition.
    await stack.startController({ taskQueue: shard });
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    await until(() => datum('status', '--condition', 'LOOP_QUEUE_UNSERVED', '--json'), {
      what: 'status to drop S-1 from LOOP_QUEUE_UNSERVED',
      accept: (r) => (JSON.parse(r.stdout) as StatusReport).conditions.length === 0,
      timeoutMs: 30_000,
    });
    await loop.terminate('test done');
    await stack.stopAgent('S-1');
  });

  it('with every controller worker stopped the fleet is unwatched (exit 3); with Temporal stopped, a clear error', async () => {
    await stack.stopAgent('F-1');
    await stack.stopControllers();
    const stoppedAt = Date.now();
    // Nothing looks any more: within the interval and its grace, status says so and since when.
    const unwatched = await until(() => datum('status'), {
      what: 'status to say the fleet is unwatched',
      accept: (r) => r.code === 3,
      timeoutMs: 30_000,
    });
    expect(Date.now() - stoppedAt).toBeLessThan(30_000);
    expect(unwatched.stdout).toMatch(/^The fleet is UNWATCHED since \d{4}-\d\d-\d\dT\S+: .* — fix: /m);
    expect(unwatched.stdout).not.toMatch(/the fleet is right/);
    const json = JSON.parse((await datum('status', '--json')).stdout) as StatusReport;
    expect(json.watch.watched).toBe(false);
    expect(Date.parse(json.watch.since!)).toBeLessThanOrEqual(Date.now());
    const nodes = await datum('nodes');
    expect(nodes.code).toBe(3);
    expect(nodes.stdout).toMatch(/The fleet is UNWATCHED since /);

    await stack.stopServer();
    const down = await datum('status');
    expect(down.code).not.toBe(0);
    expect(down.stderr).toMatch(/cannot reach Temporal at .* — fix: /);
    expect(down.stdout).not.toMatch(/right/);
  });
});
