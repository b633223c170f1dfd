import { execFile, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fileBytes } from '../../src/domain';
import { projectRoot } from '../../src/worker/paths';
import { reconcileWorkflowId } from '../../src/contract';
import { startConflictingWriter } from '../helpers/fleet';
import { Stack } from '../helpers/stack';

/* The operator's commands against a real stack: resolve, refresh, status, and their bad input. */

const run = promisify(execFile);
const DATUM = path.join(projectRoot(), 'bin', 'datum.js');
let stack: Stack;
const children: ChildProcess[] = [];

beforeAll(async () => {
  stack = await Stack.start();
  await stack.startController();
});
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});
afterAll(async () => {
  await stack?.stop();
});

async function datum(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [DATUM, ...args], {
      env: { ...process.env, TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir },
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

describe('datum resolve / refresh / status', () => {
  it('resolves a conflict by retake, and says what is wrong with bad input', async () => {
    const node = 'Q-1';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');

    const usage = await datum('resolve', node, '--resource', 'config', '--resolution', 'maybe', '--by', 'alice');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/resolution: must be "retake" or "yield"/);
    const noConflict = await datum('resolve', node, '--resource', 'config', '--resolution', 'retake', '--by', 'alice');
    expect(noConflict.code).toBe(1);
    expect(noConflict.stderr).toMatch(/Q-1 has no open conflict on "config" \(it has none\) — fix:/);
    const noLoop = await datum('resolve', 'NOPE-1', '--resource', 'config', '--resolution', 'retake', '--by', 'alice');
    expect(noLoop.code).toBe(1);
    expect(noLoop.stderr).toMatch(/NOPE-1/);

    const file = path.join(stack.fleet.root(node), 'etc/app/config.json');
    const writer = startConflictingWriter(file, fileBytes({ workers: 1 }));
    children.push(writer);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');

    const status = await datum('status', '--json');
    expect(status.code).toBe(1);
    const report = JSON.parse(status.stdout) as {
      conditions: Array<{ node: string; type: string; resource_key: string; resolver: string; evidence: unknown }>;
    };
    expect(report.conditions.filter((c) => c.node === node)).toEqual([
      expect.objectContaining({ type: 'CONFLICTING_WRITER', resource_key: 'config', resolver: 'operator' }),
    ]);
    const table = await datum('status');
    expect(table.stdout).toMatch(/Q-1\s+CONFLICTING_WRITER\s+config/);

    writer.kill('SIGKILL');
    const resolved = await datum(
      'resolve',
      node,
      '--resource',
      'config',
      '--resolution',
      'retake',
      '--by',
      'alice',
      '--note',
      'writer stopped',
    );
    expect(resolved.code).toBe(0);
    expect(resolved.stdout).toMatch(/alice resolved the conflict on "config" by retake \(writer stopped\)/);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED' && s.conditions.length === 0);
    expect(await fs.readFile(file, 'utf8')).toBe(fileBytes({ workers: 8 }));
    await handle.terminate('test done');
  });

  it('refresh hands over to a newer generation, and names a missing loop', async () => {
    const node = 'Q-2';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    await stack.fleet.writeDesired(node, 2, { workers: 4 });
    const refreshed = await datum('refresh', node, '--json');
    expect(refreshed.code).toBe(0);
    expect(JSON.parse(refreshed.stdout)).toMatchObject({
      node,
      workflow_id: reconcileWorkflowId(node, 1),
      signal: { generation: 2 },
    });
    expect(await handle.result()).toMatchObject({
      convergence_status: 'SUPERSEDED',
      superseded_by: reconcileWorkflowId(node, 2),
    });
    const gen2 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 2));
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(await fs.readFile(path.join(stack.fleet.root(node), 'etc/app/config.json'), 'utf8')).toBe(fileBytes({ workers: 4 }));
    await gen2.terminate('test done');

    // A node with desired state but no loop running: the error names the missing loop and how to start one.
    await stack.fleet.writeDesired('Q-8', 1);
    const noLoop = await datum('refresh', 'Q-8');
    expect(noLoop.code).toBe(1);
    expect(noLoop.stderr).toMatch(
      /no reconcile loop is running for node Q-8\b.*fix: start one with `datum rollout start --generation <G> --nodes Q-8`/,
    );
    const missing = await datum('refresh', 'Q-9');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no desired state for node "Q-9"/);
    const badNode = await datum('describe', '../etc');
    expect(badNode.code).toBe(2);
    expect(badNode.stderr).toMatch(/"\.\.\/etc" is not a node name/);
    const unknown = await datum('frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "frobnicate"/);
    const help = await datum('rollout', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/usage: datum rollout start --generation G/);
  });
});
