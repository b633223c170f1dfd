import { execFile, spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { temporalCliPath } from '../../src/worker/paths';
import {
  DatumGeneration,
  DatumNode,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  resolveConflictUpdate,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { startConflictingWriter } from '../helpers/fleet';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { useChildren } from '../helpers/processes';
import { DATUM, runDatum } from '../helpers/cli';

/*
 * The operator's commands against a real stack (dev server, controller worker, agents on temp
 * node roots): resolve and refresh through their Updates, status, nodes, describe, ledger and
 * diff, each with its bad input.
 */

const run = promisify(execFile);
const stack = useStack();
const children = useChildren();

const datum = (...args: string[]) =>
  runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir, DATUM_DATA: stack.fleet.dir });

async function convergedNode(node: string, mode: 'observe' | 'enforce' = 'enforce') {
  await stack.fleet.writeDesired(node, 1);
  await stack.fleet.writeAgent(node, { mode });
  await stack.startAgent(node);
  const handle = await stack.startNode(node, 1);
  return handle;
}

describe('datum resolve / refresh: the Updates, and the signals they replace', () => {
  it('resolves a conflict by retake through the Update and prints the recorded entry; bad input says what is wrong', async () => {
    const node = 'Q-1';
    const handle = await convergedNode(node);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');

    const usage = await datum('resolve', node, '--resource', 'config', '--resolution', 'maybe', '--by', 'alice');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/resolution: must be "retake" or "yield"/);
    const noConflict = await datum('resolve', node, '--resource', 'config', '--resolution', 'retake', '--by', 'alice');
    expect(noConflict.code).toBe(1);
    expect(noConflict.stderr).toMatch(/Q-1 has no open conflict on "config" \(it has none\) — fix:/);
    const noLoop = await datum('resolve', 'NOPE-1', '--resource', 'config', '--resolution', 'retake', '--by', 'alice');
    expect(noLoop.code).toBe(1);
    expect(noLoop.stderr).toMatch(/no reconcile loop is running for node NOPE-1/);
    // The Update's own validator refuses what the CLI would not send: nothing is recorded for it.
    const before = (await stack.ledger(handle)).length;
    await expect(
      handle.executeUpdate(resolveConflictUpdate, { args: [{ resource_key: 'config', resolution: 'retake', by: 'alice' }] }),
    ).rejects.toThrow(WorkflowUpdateFailedError);
    expect((await stack.ledger(handle)).length).toBe(before);

    const file = path.join(stack.fleet.root(node), 'etc/app/config.json');
    const writer = startConflictingWriter(file, fileBytes({ workers: 1 }));
    children.push(writer);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');

    const status = await datum('status', '--json');
    expect(status.code).toBe(1);
    const report = JSON.parse(status.stdout) as { conditions: Array<{ node: string; type: string; resource_key: string }> };
    expect(report.conditions.filter((c) => c.node === node)).toEqual([
      expect.objectContaining({ type: 'CONFLICTING_WRITER', resource_key: 'config', resolver: 'operator' }),
    ]);
    expect((await datum('status')).stdout).toMatch(/Q-1\s+CONFLICTING_WRITER\s+config/);

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
      '-o',
      'json',
    );
    expect(resolved.code).toBe(0);
    const entry = JSON.parse(resolved.stdout) as LedgerEntry;
    // Printed once the loop recorded it: the entry is in its ledger with that seq.
    expect(entry).toMatchObject({ reason: 'OPERATOR_RESOLUTION_RECORDED', node_id: node });
    expect(entry.reason_detail).toMatch(/alice resolved the conflict on "config" by retake \(writer stopped\)/);
    expect((await stack.ledger(handle)).map((e) => e.seq)).toContain(entry.seq);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED' && s.conditions.length === 0);
    expect(await fs.readFile(file, 'utf8')).toBe(fileBytes({ workers: 8 }));
    await handle.terminate('test done');
  });

  it('refresh hands over to a newer generation through the Update, and names a missing loop or node', async () => {
    const node = 'Q-2';
    const handle = await convergedNode(node);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    await stack.fleet.writeDesired(node, 2, { workers: 4 });
    const refreshed = await datum('refresh', node, '--json');
    expect(refreshed.code).toBe(0);
    expect(JSON.parse(refreshed.stdout)).toMatchObject({
      node,
      workflow_id: reconcileWorkflowId(node, 1),
      signal: { generation: 2 },
      sent_as: 'update',
      entry: { convergence_status: 'SUPERSEDED', reason: 'NEWER_GENERATION' },
      handed_over_to: reconcileWorkflowId(node, 2),
    });
    expect(await handle.result()).toMatchObject({
      convergence_status: 'SUPERSEDED',
      superseded_by: reconcileWorkflowId(node, 2),
    });
    const gen2 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 2));
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(await fs.readFile(path.join(stack.fleet.root(node), 'etc/app/config.json'), 'utf8')).toBe(fileBytes({ workers: 4 }));
    // The same generation again re-binds; the text line says what the loop decided.
    const again = await datum('refresh', node);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^Q-2: refreshDesired generation 2 \(sha256:.*\) → \S+ REBOUND: /);
    await gen2.terminate('test done');

    await stack.fleet.writeDesired('Q-8', 1);
    const noLoop = await datum('refresh', 'Q-8');
    expect(noLoop.code).toBe(1);
    expect(noLoop.stderr).toMatch(
      /no reconcile loop is running for node Q-8\b.*fix: start one with `datum rollout start --generation <G> --nodes Q-8`/,
    );
    const missing = await datum('refresh', 'Q-9');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no desired state for node "Q-9"/);
    const timeout = await datum('refresh', 'Q-8', '--timeout', 'a while');
    expect(timeout.code).toBe(2);
    expect(timeout.stderr).toMatch(/--timeout "a while" is not a duration/);
  });
});

describe("docs/operations.md's plain `temporal workflow update` line", () => {
  it('yields a conflict through the Update and prints the recorded entry; refuses one with no open conflict', async () => {
    const node = 'Q-10';
    const handle = await convergedNode(node);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    // As docs/operations.md writes it, with this node's id and the test server's address.
    const line = `update execute --workflow-id datum/${node}/gen-1 --name resolveConflict --input '{"resource_key":"config","resolution":"yield","by":"oncall"}'`;
    const temporal = () =>
      run('sh', ['-c', `${temporalCliPath()} workflow ${line} --address ${stack.env.address} --output json`]).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
    const refused = await temporal();
    expect(refused.code).not.toBe(0);
    expect(`${refused.stdout}${refused.stderr}`).toMatch(/resolveConflict rejected: .*config/);
    const writer = startConflictingWriter(path.join(stack.fleet.root(node), 'etc/app/config.json'), fileBytes({ workers: 1 }));
    children.push(writer);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
    const yielded = await temporal();
    expect(yielded.code).toBe(0);
    expect(yielded.stdout).toMatch(/OPERATOR_RESOLUTION_RECORDED/);
    expect(yielded.stdout).toMatch(/oncall resolved the conflict on \\?"config\\?" by yield/);
    writer.kill('SIGKILL');
    await handle.terminate('test done');
  });
});

describe('datum nodes / status / describe / ledger / diff', () => {
  it('lists the fleet from visibility alone, filters it, and status asks only the loops with conditions', async () => {
    const right = await convergedNode('Q-3');
    const drifting = await convergedNode('Q-4', 'observe');
    await stack.waitFor(right, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitFor(drifting, (s) => s.convergence_status === 'DRIFTED');
    // A loop no worker serves: visibility lists it, a query would never be answered.
    await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: 'no-worker-serves-this',
      workflowId: reconcileWorkflowId('Q-5', 1),
      args: [{ node: 'Q-5', generation: 1 }],
      typedSearchAttributes: new TypedSearchAttributes([
        { key: DatumNode, value: 'Q-5' },
        { key: DatumGeneration, value: 1 },
      ]),
    });

    const table = await until(() => datum('nodes'), {
      what: 'nodes to show Q-3, Q-4 and Q-5',
      accept: (r) => /Q-4\s+DRIFTED/.test(r.stdout) && /Q-3\s+CONVERGED/.test(r.stdout) && /Q-5/.test(r.stdout),
      timeoutMs: 30_000,
    });
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^NODE\s+STATUS\s+REASON\s+GEN\s+MODE\s+CONDITIONS\s+LAST VERIFIED\s+AGE$/);
    expect(table.stdout).toMatch(/Q-3\s+CONVERGED\s+\S+\s+1\s+enforce\s+-\s+\d+s ago\s+\d+s/);
    expect(table.stdout).toMatch(/Q-4\s+DRIFTED\s+OBSERVE_MODE_DRIFT\s+1\s+observe\s+OBSERVED_DRIFT\s+\d+s ago/);
    expect(table.stdout).toMatch(/Q-5\s+-\s+-\s+1\s+-\s+-\s+-\s+\d+s/);

    const drifted = await datum('nodes', '--status', 'DRIFTED', '-o', 'jsonl');
    const rows = drifted.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { node: string; conditions: string[]; last_verified_at: string });
    expect(rows.map((r) => r.node)).toEqual(['Q-4']);
    expect(rows[0].conditions).toEqual(['OBSERVED_DRIFT']);
    expect(Date.parse(rows[0].last_verified_at)).toBeGreaterThan(Date.now() - 60_000);
    const byCondition = JSON.parse((await datum('nodes', '--condition', 'OBSERVED_DRIFT', '--json')).stdout) as {
      nodes: Array<{ node: string }>;
    };
    expect(byCondition.nodes.map((n) => n.node)).toEqual(['Q-4']);
    expect((await datum('nodes', '--generation', '7')).stdout).toMatch(/No running reconcile loop matches these filters/);

    // status: the drift, and no word about Q-5 (it has no condition, so it is never queried).
    const status = await datum('status', '-o', 'json');
    expect(status.code).toBe(1);
    const report = JSON.parse(status.stdout) as { conditions: Array<{ node: string; type: string }>; unreadable: unknown[] };
    expect(report.conditions.map((c) => `${c.node}/${c.type}`)).toContain('Q-4/OBSERVED_DRIFT');
    expect(report.unreadable).toEqual([]);
    const conflictsOnly = await datum('status', '--condition', 'CONFLICTING_WRITER');
    expect(conflictsOnly).toMatchObject({ code: 0 });
    // A filtered report cannot call the fleet right: it says what it looked for, across the declared nodes.
    expect(conflictsOnly.stdout).toMatch(/^No open CONFLICTING_WRITER condition across \d+ node\(s\)\.$/m);
    expect(conflictsOnly.stdout).not.toMatch(/right/);
    await stack.client.workflow.getHandle(reconcileWorkflowId('Q-5', 1)).terminate('test done');
  });

  it('describe and ledger read one node, with -o and --limit / --since; an unknown node is named', async () => {
    const handle = stack.client.workflow.getHandle(reconcileWorkflowId('Q-3', 1));
    const described = await datum('describe', 'Q-3', '-o', 'jsonl');
    expect(described.code).toBe(0);
    expect(described.stdout.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(described.stdout)).toMatchObject({ state: { node: 'Q-3', convergence_status: 'CONVERGED' } });
    expect((await datum('describe', 'Q-3')).stdout).toMatch(/^Q-3 {2}generation 1/);
    const unknown = await datum('describe', 'NOPE-2');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no reconcile loop is running for node NOPE-2 — fix: start one with `datum rollout start/);

    const ledger = await stack.ledger(handle);
    const all = JSON.parse((await datum('ledger', 'Q-3', '--json')).stdout) as LedgerEntry[];
    expect(all.length).toBeGreaterThanOrEqual(1);
    const newest = JSON.parse((await datum('ledger', 'Q-3', '--limit', '1', '-o', 'json')).stdout) as LedgerEntry[];
    expect(newest).toHaveLength(1);
    expect(newest[0].seq).toBe(all[all.length - 1].seq);
    expect(ledger.map((e) => e.seq)).toContain(newest[0].seq);
    const lastHour = (await datum('ledger', 'Q-3', '--since', '1h', '-o', 'jsonl')).stdout.trim().split('\n');
    expect(lastHour).toHaveLength(all.length);
    expect((await datum('ledger', 'Q-3', '--since', '0s')).stdout).toMatch(/No ledger entries for Q-3 .* since /);
    const limit = await datum('ledger', 'Q-3', '--limit', '0');
    expect(limit.code).toBe(2);
    expect(limit.stderr).toMatch(/--limit must be a whole number of 1 or more, got "0"/);
  });

  it("diff plans the authority's generation against the last fresh observation, and says when it is stale", async () => {
    const same = await datum('diff', 'Q-3');
    expect(same.code).toBe(0);
    expect(same.stdout).toMatch(/Nothing would change\./);
    // A TTL of 1 ms: whatever the loop observed last, even a moment ago, is stale by the time diff reads it.
    await stack.fleet.writeDesired('Q-3', 2, { workers: 4, policy: { observation_ttl: '1ms' } });
    const changed = await datum('diff', 'Q-3', '--generation', '2', '-o', 'json');
    expect(changed.code).toBe(1);
    const report = JSON.parse(changed.stdout) as {
      stale: boolean;
      changes: number;
      resources: Array<{ resource_key: string; action: string | null; ownership: string; mode: string }>;
    };
    expect(report.stale).toBe(true);
    const byKey = Object.fromEntries(report.resources.map((r) => [r.resource_key, r]));
    expect(byKey.config).toMatchObject({ ownership: 'MANAGED', mode: 'enforce', action: 'file.write' });
    expect(byKey.app).toMatchObject({ action: 'service.restart' });
    expect(byKey.build).toMatchObject({ action: null });
    const text = await datum('diff', 'Q-3');
    expect(text.stdout).toMatch(/STALE: that observation is older than observation_ttl \(1ms\)/);
    expect(text.stdout).toMatch(/config\s+file\s+MANAGED\s+enforce\s+file\.write/);
    const observe = await datum('diff', 'Q-4');
    expect(observe.stdout).toMatch(
      /maintenance\s+flag\s+MANAGED\s+observe\s+flag\.write .* observe mode: planned and recorded as DRIFTED, not applied/,
    );
    const wrong = await datum('diff', 'Q-3', '--generation', '3');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/the authority for Q-3 is at generation 2, not 3: a rollout of 3 would refuse the node — fix:/);
    const unknown = await datum('diff', 'NOPE-3');
    expect(unknown.stderr).toMatch(/no desired state for node "NOPE-3"/);
    await stack.fleet.writeDesired('Q-6', 1);
    const unobserved = await datum('diff', 'Q-6');
    expect(unobserved.stderr).toMatch(/has no fresh observation of Q-6 — fix: roll the node out once/);
  });
});

describe('datum_build_info', () => {
  it('an agent serving metrics labels them with the version --version prints', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const { port: p } = s.address() as net.AddressInfo;
        s.close(() => resolve(p));
      });
    });
    await stack.fleet.writeAgent('Q-7');
    const agent = spawn(
      process.execPath,
      [
        DATUM,
        'agent',
        '--config',
        stack.fleet.agentFile('Q-7'),
        '--address',
        stack.env.address,
        '--metrics-address',
        `127.0.0.1:${port}`,
      ],
      { stdio: 'ignore' },
    );
    children.push(agent);
    const version = (await datum('--version')).stdout.trim().replace(/^datum /, '');
    const metrics = await until(
      () =>
        fetch(`http://127.0.0.1:${port}/metrics`).then(
          (r) => r.text(),
          () => '',
        ),
      { what: 'the agent to serve datum_build_info', accept: (t) => t.includes('datum_build_info'), timeoutMs: 30_000 },
    );
    expect(metrics).toMatch(new RegExp(`datum_build_info\\{[^}]*version="${version.replace(/\./g, '\\.')}"[^}]*\\} 1`));
  });
});
