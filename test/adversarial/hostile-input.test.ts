import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { projectRoot } from '../../src/worker/paths';
import { describe, expect, it } from 'vitest';
import {
  CONTROL_TASK_QUEUE,
  MAX_SIGNAL_DEPTH,
  MAX_SIGNAL_ECHO,
  WORKFLOW_TYPES,
  ledgerQuery,
  reconcileWorkflowId,
  rolloutProgressQuery,
  rolloutWorkflowId,
  type RolloutWorkflow,
} from '../../src/contract';
import { useStack } from '../helpers/stack';
import { aliasBomb, deep } from '../fuzz/generators';

/*
 * Hole 7 of issue 10: hostile input never stops a loop. Each test performs one attack on the real
 * stack (a dev server, the controller worker in this process, a real agent, node roots on disk)
 * and checks what a user would: the loop is still running, the condition is visible in the state
 * query and the DatumConditions search attribute, and nothing was applied on disk.
 */

const stack = useStack();

/** Every path under `dir` with a digest of what it holds: equal before and after means nothing was written. */
async function treeOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(d, e.name);
      const rel = path.relative(dir, full);
      // The agent's journal and fence are its own bookkeeping; the managed state is the rest.
      if (rel.startsWith('.datum')) continue;
      if (e.isSymbolicLink()) out[rel] = `link:${await fs.readlink(full)}`;
      else if (e.isDirectory()) await walk(full);
      else
        out[rel] = createHash('sha256')
          .update(await fs.readFile(full))
          .digest('hex');
    }
  };
  await walk(dir);
  return out;
}

async function conditionsAttribute(workflowId: string): Promise<string[]> {
  const d = await stack.client.workflow.getHandle(workflowId).describe();
  return (d.searchAttributes.DatumConditions as string[] | undefined) ?? [];
}

/** A node converged at generation 1 on the real stack. */
async function convergedNode(node: string) {
  await stack.fleet.writeDesired(node, 1);
  await stack.fleet.writeAgent(node);
  await stack.startAgent(node);
  const handle = await stack.startNode(node, 1);
  await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
  return handle;
}

const bombed = async (node: string) => {
  const text = await fs.readFile(stack.fleet.desiredFile(node), 'utf8');
  return `${text}lol:\n${aliasBomb(9, 9)}\n`;
};

describe('hostile input never stops a loop', () => {
  it('a YAML alias bomb in desired state blocks the node as INVALID_DESIRED_STATE and the loop keeps running', async () => {
    const node = 'H-1';
    const handle = await convergedNode(node);
    const before = await treeOf(stack.fleet.root(node));
    const acted = (await stack.ledger(handle)).filter((e) => e.execution_evidence.length > 0).length;
    await fs.writeFile(stack.fleet.desiredFile(node), await bombed(node));

    const state = await stack.waitFor(handle, (s) => s.conditions.some((c) => c.type === 'INVALID_DESIRED_STATE'));
    const condition = state.conditions.find((c) => c.type === 'INVALID_DESIRED_STATE')!;
    expect(condition.message).toMatch(
      /desired\/nodes\/H-1\.yaml: invalid desired state; nothing from this file was applied:\n {2}- lol: holds more than 100000 values once its aliases are expanded \(MAX_DOCUMENT_VALUES\) — fix: /,
    );
    expect(state.convergence_status).toBe('BLOCKED');
    // More passes run, and each blocks again: the loop did not fail, stall or act.
    await stack.waitForPasses(handle, 2);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(await conditionsAttribute(handle.workflowId)).toContain('INVALID_DESIRED_STATE');
    expect((await stack.ledger(handle)).filter((e) => e.execution_evidence.length > 0)).toHaveLength(acted);
    expect(await treeOf(stack.fleet.root(node))).toEqual(before);
    await handle.terminate('test done');
  });

  it("a rollout with one node's desired state an alias bomb refuses that node only, and the other converges", async () => {
    const [good, bad] = ['H-2a', 'H-2b'];
    await stack.fleet.writeDesired(good, 1);
    await stack.fleet.writeAgent(good);
    await stack.startAgent(good);
    await stack.fleet.writeDesired(bad, 1);
    await fs.writeFile(stack.fleet.desiredFile(bad), await bombed(bad));
    await stack.fleet.writeAgent(bad);
    await stack.startAgent(bad);

    const nodes = [good, bad];
    const rollout = await stack.client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: rolloutWorkflowId(1, nodes),
      args: [{ generation: 1, nodes }],
    });
    const result = await rollout.result();
    const byNode = Object.fromEntries(result.nodes.map((n) => [n.node, n]));
    expect(byNode[bad]).toMatchObject({ outcome: 'refused' });
    expect((byNode[bad] as { error: string }).error).toMatch(
      /H-2b\.yaml: invalid desired state; .*\n {2}- lol: holds more than 100000 values .*MAX_DOCUMENT_VALUES.* — fix: /s,
    );
    expect(byNode[good]).toMatchObject({ outcome: 'reported', status: 'CONVERGED' });
    expect((await rollout.query(rolloutProgressQuery)).nodes.map((n) => n.outcome).sort()).toEqual(['refused', 'reported']);
    // No loop was started for the refused node, and nothing touched its root.
    await expect(stack.client.workflow.getHandle(reconcileWorkflowId(bad, 1)).describe()).rejects.toThrow(/not found/i);
    expect(await treeOf(stack.fleet.root(bad))).toEqual({});
    await stack.client.workflow.getHandle(reconcileWorkflowId(good, 1)).terminate('test done');
  });

  it('a signal payload nested 4,000 levels deep is SIGNAL_REJECTED with the cap named, the loop keeps running, and its history still replays', async () => {
    const node = 'H-3';
    const handle = await convergedNode(node);
    const before = await treeOf(stack.fleet.root(node));
    const payload = deep(4000, 'object');
    expect(JSON.stringify(payload).length).toBeLessThan(30_000);
    for (const name of ['refreshDesired', 'resolveConflict', 'recheck']) await handle.signal(name, payload);
    // And a huge one: its echo in the ledger is bounded.
    await handle.signal('resolveConflict', { resource_key: 'config', resolution: 'retake', by: 'x'.repeat(100_000) });

    const signalsIn = (s: { conditions: Array<{ type: string; evidence: unknown }> }) =>
      Object.keys(
        (s.conditions.find((c) => c.type === 'INVALID_SIGNAL')?.evidence as { signals?: object } | undefined)?.signals ?? {},
      ).sort();
    const state = await stack.waitFor(handle, (s) => signalsIn(s).join() === 'recheck,refreshDesired,resolveConflict');
    const ledger = await handle.query(ledgerQuery);
    const rejected = ledger.filter((e) => e.reason === 'SIGNAL_REJECTED');
    expect(rejected.length).toBe(4);
    for (const name of ['refreshDesired', 'recheck'])
      expect(rejected.map((e) => e.reason_detail)).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^${name} payload rejected before it was read: a\\.a\\.a\\.a: is nested deeper than ${MAX_SIGNAL_DEPTH} levels \\(fix: `,
          ),
        ),
      );
    const huge = rejected[rejected.length - 1];
    expect(huge.reason_detail).toMatch(
      /^resolveConflict payload rejected before it was read: by: makes the value larger than 16384 characters \(fix: /,
    );
    for (const e of rejected) expect(e.reason_detail.length).toBeLessThan(MAX_SIGNAL_ECHO * 6 + 2000);
    expect(state.convergence_status).toBe('CONVERGED');

    // The loop goes on: fresh passes after the last rejection, no action, nothing written.
    await stack.waitForPass(handle, Date.parse(huge.decided_at), 2);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(await conditionsAttribute(handle.workflowId)).toContain('INVALID_SIGNAL');
    expect(await treeOf(stack.fleet.root(node))).toEqual(before);

    // Every replay of this history used to overflow the stack: it replays now. (It also covers the
    // opening: the state queries above start while the first workflow task runs, which once split
    // it after the first local activity and left a history that did not replay.)
    const history = await handle.fetchHistory();
    await Worker.runReplayHistory({ workflowBundle: stack.bundle }, history, handle.workflowId).catch(async (error: unknown) => {
      // Kept for whoever reads the failure: the history that did not replay.
      const file = path.join(projectRoot(), 'test-artifacts', 'replay-failed-H-3.json');
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(
        file,
        JSON.stringify(
          temporal.api.history.v1.History.toObject(history as temporal.api.history.v1.History, {
            longs: String,
            enums: String,
            bytes: String,
          }),
          null,
          1,
        ),
      );
      throw error;
    });
    await handle.terminate('test done');
  });

  it('a YAML alias bomb in agent.yaml blocks the node as AGENT_CONFIG_INVALID and the loop keeps running', async () => {
    const node = 'H-4';
    const handle = await convergedNode(node);
    const before = await treeOf(stack.fleet.root(node));
    const file = stack.fleet.agentFile(node);
    const good = await fs.readFile(file, 'utf8');
    await fs.writeFile(file, `${good}lol:\n${aliasBomb(9, 9)}\n`);
    const state = await stack.waitFor(handle, (s) => s.conditions.some((c) => c.type === 'AGENT_CONFIG_INVALID'));
    expect(state.conditions.find((c) => c.type === 'AGENT_CONFIG_INVALID')!.message).toMatch(
      /agents\/H-4\.yaml: invalid agent config; nothing from this file was applied:\n {2}- lol: holds more than 100000 values .*MAX_DOCUMENT_VALUES.* — fix: /s,
    );
    await stack.waitForPasses(handle, 2);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(await conditionsAttribute(handle.workflowId)).toContain('AGENT_CONFIG_INVALID');
    expect(await treeOf(stack.fleet.root(node))).toEqual(before);

    // The operator fixes agent.yaml: the same loop verifies the node again and the condition closes.
    await fs.writeFile(file, good);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED' && s.conditions.length === 0);
    await handle.terminate('test done');
  });

  it('a desired-state file over MAX_DESIRED_STATE_BYTES is refused before it is read, and the loop keeps running', async () => {
    const node = 'H-5';
    const handle = await convergedNode(node);
    const before = await treeOf(stack.fleet.root(node));
    const text = await fs.readFile(stack.fleet.desiredFile(node), 'utf8');
    await fs.writeFile(stack.fleet.desiredFile(node), `${text}# ${'x'.repeat(300_000)}\n`);
    const state = await stack.waitFor(handle, (s) => s.conditions.some((c) => c.type === 'INVALID_DESIRED_STATE'));
    expect(state.conditions.find((c) => c.type === 'INVALID_DESIRED_STATE')!.message).toMatch(
      /H-5\.yaml: invalid desired state; .*\(file\): is \d+ bytes, more than the 262144 bytes Datum reads \(MAX_DESIRED_STATE_BYTES\) — fix: /s,
    );
    await stack.waitForPasses(handle, 1);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(await treeOf(stack.fleet.root(node))).toEqual(before);
    // Restored, the loop re-verifies from the file and the condition closes.
    await fs.writeFile(stack.fleet.desiredFile(node), text);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED' && s.conditions.length === 0);
    await handle.terminate('test done');
  });
});
