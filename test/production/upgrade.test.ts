import { execFile } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  rolloutWorkflowId,
  type ReconcileNodeWorkflow,
  type RolloutWorkflow,
} from '../../src/contract';
import { projectRoot } from '../../src/worker/paths';
import { rootOf, startProductionStack, startsOf, waitFor, writeAgentFile, writeNode, type ProductionStack } from './fixture';

/*
 * Upgrade in place (docs/production.md "Upgrading"): loops started by the previous release's worker and
 * agents keep running when this release's worker takes over, then this release's agents. The
 * previous release is the commit that last landed before this one (the release running fleets
 * have), built from git into a temporary directory.
 */

const PREVIOUS_RELEASE = '875215a';
const { WorkflowTaskFailedCause } = temporal.api.enums.v1;
const NODES = ['U-1', 'U-2', 'U-3'];
const run = promisify(execFile);
let stack: ProductionStack;
let previous: string;

/** The previous release's checkout, compiled, sharing this checkout's node_modules and .venv. */
async function buildPreviousRelease(): Promise<string> {
  const root = projectRoot();
  const known = await run('git', ['-C', root, 'cat-file', '-e', `${PREVIOUS_RELEASE}^{commit}`]).then(
    () => true,
    () => false,
  );
  if (!known)
    throw new Error(
      `the previous release ${PREVIOUS_RELEASE} is not in this clone's history — fix: clone with full history (git fetch --unshallow), so the upgrade test can build it`,
    );
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-previous-'));
  await run('sh', ['-c', `git -C "${root}" archive ${PREVIOUS_RELEASE} | tar -x -C "${dir}"`]);
  await fs.symlink(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  await fs.symlink(path.join(root, '.venv'), path.join(dir, '.venv'));
  await run(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], {
    cwd: dir,
    timeout: 300_000,
  }).catch((error: { stdout?: string }) => {
    // Type errors do not stop tsc emitting; a missing file does.
    if (!existsSync(path.join(dir, 'dist', 'src', 'cli', 'main.js')))
      throw new Error(`building ${PREVIOUS_RELEASE} failed: ${error.stdout ?? ''}`);
  });
  return dir;
}

beforeAll(async () => {
  [stack, previous] = await Promise.all([startProductionStack(0, { ledger: false }), buildPreviousRelease()]);
}, 900_000);
afterAll(async () => {
  await stack?.stop();
  if (previous) await fs.rm(previous, { recursive: true, force: true });
}, 120_000);

/**
 * Workflow tasks that failed in a loop's history: how a non-deterministic change to a running
 * workflow shows. Not counted: UnhandledCommand, the server's refusal of a task that completes
 * the run while an event it has not seen arrived (a loop superseded as its watch returns): the
 * server hands the task back with that event, whatever code runs, and the run then ends.
 */
async function failedTasks(handle: WorkflowHandle): Promise<string[]> {
  const failed: string[] = [];
  for (const event of (await handle.fetchHistory()).events ?? []) {
    const attributes = event.workflowTaskFailedEventAttributes;
    if (attributes && attributes.cause !== WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND)
      failed.push(attributes.failure?.message ?? 'failed');
  }
  return failed;
}

describe('upgrade in place', () => {
  it("loops of the previous release carry on under this release's worker, then its agents, and the next rollout runs on the new code", async () => {
    const oldDatum = path.join(previous, 'bin', 'datum.js');
    const files: string[] = [];
    for (const node of NODES) {
      await writeNode(stack, node, 1, { version: '7.4', policy: { resync_interval: '2s', conflict_window: '0s' } });
      files.push(await writeAgentFile(stack, node));
    }
    await stack.cluster.startWorker(oldDatum);
    await stack.cluster.startAgents('agents-old', files, oldDatum);
    const handles = [];
    for (const node of NODES)
      handles.push(
        await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId: reconcileWorkflowId(node, 1),
          args: [{ node, generation: 1 }],
        }),
      );
    for (const h of handles) await waitFor(h, (s) => s.convergence_status === 'CONVERGED');

    // The loops so far ran on the previous release's processes.
    expect(stack.cluster.process('worker-1').command[1]).toBe(oldDatum);
    expect(stack.cluster.process('agents-old').command[1]).toBe(oldDatum);

    // 1. The worker is upgraded: the old one drains and stops, the new one takes the running loops.
    await stack.cluster.stop('worker-1');
    await stack.cluster.startWorker();
    // Drift on U-1: only a pass run by the new worker can repair it (conflict_window 0s: a drift
    // after a repair is drift to repair, not another writer).
    await fs.rm(path.join(rootOf(stack, 'U-1'), 'etc/app/config.json'));
    await waitFor(
      handles[0],
      (s, l) => s.convergence_status === 'CONVERGED' && l.filter((e) => e.reason === 'CONVERGED_AFTER_REPAIR').length >= 2,
    );

    // 2. The agents are upgraded (after the controllers, as docs/production.md says).
    await stack.cluster.stop('agents-old');
    await stack.cluster.startAgents('agents-new', files);
    await fs.rm(path.join(rootOf(stack, 'U-2'), 'etc/app/config.json'));
    await waitFor(
      handles[1],
      (s, l) => s.convergence_status === 'CONVERGED' && l.filter((e) => e.reason === 'CONVERGED_AFTER_REPAIR').length >= 2,
    );

    // 3. The next generation rolls out on the new code and hands over from the old loops.
    for (const node of NODES)
      await writeNode(stack, node, 2, { version: '7.5', policy: { resync_interval: '2s', conflict_window: '0s' } });
    const rollout = await stack.client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: rolloutWorkflowId(2, NODES),
      args: [{ generation: 2, nodes: NODES }],
    });
    const result = await rollout.result();
    expect(result.nodes.map((n) => ('status' in n ? `${n.node}:${n.status}` : `${n.node}:refused`))).toEqual(
      NODES.map((n) => `${n}:CONVERGED`),
    );

    // No workflow task of any loop failed (no non-determinism across the upgrade), no decision
    // was lost, and no app started more often than its releases asked, as the app itself counts.
    for (const [i, node] of NODES.entries()) {
      expect(await failedTasks(handles[i]), `${node} generation 1`).toEqual([]);
      expect(await failedTasks(stack.client.workflow.getHandle(reconcileWorkflowId(node, 2))), `${node} generation 2`).toEqual(
        [],
      );
    }
    // U-3 saw no drift: its app started once for 7.4 and once for 7.5.
    expect(startsOf(stack, 'U-3')).toBe(2);
    const superseded = await Promise.all(handles.map((h) => h.result()));
    expect(superseded.map((r) => r.convergence_status)).toEqual(['SUPERSEDED', 'SUPERSEDED', 'SUPERSEDED']);
  }, 900_000);
});
