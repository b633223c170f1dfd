import { describe, expect, it } from 'vitest';
import {
  MEMO_ROLLOUT_CANCELLED,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  rolloutWorkflowId,
  type RolloutCancelled,
  type RolloutWorkflow,
} from '../../src/contract';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { runDatum } from '../helpers/cli';

/*
 * Rollouts as objects, with the real CLI against a real stack: start --wait with jsonl progress,
 * --timeout, list, status, and cancel, which starts no node it has not started and leaves the
 * loops it started running.
 */

const stack = useStack();

const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir });

describe('datum rollout start | status | list | cancel', () => {
  it('start --wait -o jsonl prints a progress object a line and a final one; list and status show the rollout', async () => {
    for (const node of ['R-1', 'R-2']) {
      await stack.fleet.writeDesired(node, 1);
      await stack.fleet.writeAgent(node);
      await stack.startAgent(node);
    }
    // R-3's desired state is at generation 2: refused, the others go on.
    await stack.fleet.writeDesired('R-3', 2);
    const started = await datum(
      'rollout',
      'start',
      '--generation',
      '1',
      '--nodes',
      'R-1,R-2,R-3',
      '--wait',
      '-o',
      'jsonl',
      '--timeout',
      '2m',
    );
    const lines = started.stdout
      .trim()
      .split('\n')
      .map(
        (l) =>
          JSON.parse(l) as {
            rollout: string;
            node?: string;
            outcome?: string;
            status?: string;
            done?: boolean;
            need_attention?: string[];
          },
      );
    const id = rolloutWorkflowId(1, ['R-1', 'R-2', 'R-3']);
    expect(lines.every((l) => l.rollout === id)).toBe(true);
    expect(lines.filter((l) => l.node === 'R-1').at(-1)).toMatchObject({ outcome: 'reported', status: 'CONVERGED' });
    expect(lines.filter((l) => l.node === 'R-3').at(-1)).toMatchObject({ outcome: 'refused' });
    expect(lines.at(-1)).toEqual({ rollout: id, done: true, generation: 1, need_attention: ['R-3'] });
    expect(started.code).toBe(1); // R-3 was refused

    const list = await until(() => datum('rollout', 'list', '--json'), {
      what: 'rollout list to show a COMPLETED rollout',
      accept: (r) => r.stdout.includes('COMPLETED'),
      timeoutMs: 30_000,
    });
    expect((JSON.parse(list.stdout) as { rollouts: unknown[] }).rollouts).toContainEqual(
      expect.objectContaining({ workflow_id: id, generation: 1, nodes: 3, status: 'COMPLETED' }),
    );
    expect((await datum('rollout', 'list')).stdout).toMatch(/^ROLLOUT\s+GEN\s+NODES\s+STATUS\s+STARTED\s+CLOSED/);
    const status = await datum('rollout', 'status', id);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`^${id.replace(/\//g, '\\/')} {2}generation 1 {2}COMPLETED`));
    expect(status.stdout).toMatch(/R-1\s+CONVERGED/);
    expect(status.stdout).toMatch(/R-3\s+REFUSED\s+the authority for R-3 is at generation 2, not 1/);
    // Without an id: the newest rollout (of that generation).
    expect((await datum('rollout', 'status', '--generation', '1', '-o', 'json')).stdout).toContain(`"workflow_id": "${id}"`);
    const bad = await datum('rollout', 'status', 'not-a-rollout');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/"not-a-rollout" is not a rollout id — fix: rollout ids look like datum-rollout\/gen-12\/N-24/);
    const absent = await datum('rollout', 'status', 'datum-rollout/gen-9/R-9');
    expect(absent.code).toBe(1);
    expect(absent.stderr).toMatch(/no rollout datum-rollout\/gen-9\/R-9 — fix: `datum rollout list`/);
  });

  it('--timeout ends the wait, not the rollout; cancel stops following and leaves the loops it started running', async () => {
    // No agent serves R-4 and its node_timeout is long: its loop cannot settle for a minute.
    await stack.fleet.writeDesired('R-4', 1, { policy: { node_timeout: '60s' } });
    const waited = await datum('rollout', 'start', '--generation', '1', '--nodes', 'R-4', '--wait', '--timeout', '3s');
    expect(waited.code).toBe(1);
    expect(waited.stdout).toMatch(/R-4\s+…\s+reconciling/);
    expect(waited.stderr).toMatch(
      /datum-rollout\/gen-1\/R-4 has not finished within --timeout; 1 node\(s\) still reconciling — fix: the rollout goes on/,
    );
    const id = rolloutWorkflowId(1, ['R-4']);
    expect((await stack.client.workflow.getHandle(id).describe()).status.name).toBe('RUNNING');

    const cancelled = await datum('rollout', 'cancel', id, '-o', 'json');
    expect(cancelled.code).toBe(0);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({
      workflow_id: id,
      status: 'CANCELLED',
      cancelled: { started: ['R-4'], not_started: [], refused: [] },
    });
    // The loop it started is a workflow of its own and goes on.
    expect((await stack.client.workflow.getHandle(reconcileWorkflowId('R-4', 1)).describe()).status.name).toBe('RUNNING');
    const again = await datum('rollout', 'cancel', id);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/is not running \(CANCELLED\) — fix: only a running rollout can be cancelled/);
    expect((await datum('rollout', 'status', id)).stdout).toMatch(
      /Cancelled at .*: it started 1 node\(s\), whose loops go on; it never started 0/,
    );
    await stack.client.workflow.getHandle(reconcileWorkflowId('R-4', 1)).terminate('test done');
  });

  it('a rollout cancelled before it ran starts no node at all', async () => {
    const nodes = Array.from({ length: 60 }, (_, i) => `R-${100 + i}`);
    for (const n of nodes) await stack.fleet.writeDesired(n, 1);
    // Started on a queue no worker serves yet, cancelled, then served: its first task holds the cancel.
    const queue = 'datum-control-later';
    const id = rolloutWorkflowId(1, nodes);
    const handle = await stack.client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: queue,
      workflowId: id,
      args: [{ generation: 1, nodes }],
    });
    await handle.cancel();
    await stack.startController({ taskQueue: queue });
    await expect(handle.result()).rejects.toThrow();
    const memo = (await handle.describe()).memo?.[MEMO_ROLLOUT_CANCELLED] as RolloutCancelled;
    expect(memo).toMatchObject({ started: [], refused: [], not_started: nodes });
    const loops: string[] = [];
    for await (const w of stack.client.workflow.list({ query: `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}"` }))
      if (nodes.some((n) => w.workflowId === reconcileWorkflowId(n, 1))) loops.push(w.workflowId);
    expect(loops).toEqual([]);
  });
});
