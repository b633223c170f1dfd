import { promises as fs } from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  recheckSignal,
  resolveConflictSignal,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { MAINTENANCE, startConflictingWriter } from '../helpers/fleet';
import { until } from '../helpers/until';
import { D7, rootOf, startProductionStack, startsOf, waitFor, writeAgentFile, writeNode, type ProductionStack } from './fixture';

/*
 * The seed's worked example and a conflicting writer on the production topology: PostgreSQL, the
 * pinned Temporal server on it (set up by the deploy/ scripts docker-compose.yml runs), a `datum
 * worker` process with its ledger in PostgreSQL, `datum agent` processes, the `datum` CLI.
 */

const run = promisify(execFile);
let stack: ProductionStack;

beforeAll(async () => {
  stack = await startProductionStack(1);
}, 600_000);
afterAll(async () => {
  await stack?.stop();
}, 120_000);

const datum = (args: string[]) =>
  run(process.execPath, [path.join(__dirname, '..', '..', 'bin', 'datum.js'), ...args], {
    env: { ...process.env, ...stack.cluster.clientEnv },
    timeout: 180_000,
  });

async function health(node: string): Promise<{ build: string; config_sha256: string }> {
  const state = JSON.parse(await fs.readFile(path.join(rootOf(stack, node), '.datum/services/app.json'), 'utf8')) as {
    port: number;
  };
  return (await (await fetch(`http://127.0.0.1:${state.port}/health`)).json()) as { build: string; config_sha256: string };
}

describe('production cluster: the worked example', () => {
  it('N-24 from 7.3 to 7.4 with D7 by `datum rollout start --wait`: only the managed drift is repaired, maintenance is left alone, the ledger is in PostgreSQL', async () => {
    const node = 'N-24';
    await writeNode(stack, node, 11, { version: '7.3' });
    await stack.cluster.startAgents(`agent-${node}`, [
      await writeAgentFile(stack, node, { overrides: { maintenance: MAINTENANCE } }),
    ]);
    await datum(['rollout', 'start', '--generation', '11', '--nodes', node, '--wait']);
    // The operator turns maintenance on by hand, under the approved override.
    const flag = path.join(rootOf(stack, node), 'flags/maintenance.json');
    await fs.mkdir(path.dirname(flag), { recursive: true });
    await fs.writeFile(flag, 'true\n');
    const gen11 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 11));
    await gen11.signal(recheckSignal, {});
    await waitFor(gen11, (s, l) => s.convergence_status === 'CONVERGED' && l.some((e) => e.operator_exceptions.length > 0));
    expect(await health(node)).toMatchObject({ build: '7.3', config_sha256: D7 });
    const flagBefore = await fs.stat(flag);

    await writeNode(stack, node, 12, { version: '7.4' });
    const { stdout } = await datum(['rollout', 'start', '--generation', '12', '--nodes', node, '--wait']);
    expect(stdout).toContain('CONVERGED');
    expect(await health(node)).toMatchObject({ build: '7.4', config_sha256: D7 });
    expect((await fs.readFile(flag, 'utf8')).trim()).toBe('true');
    expect((await fs.stat(flag)).mtimeMs).toBe(flagBefore.mtimeMs);

    const entries = await stack.ledger.list(node);
    const repair = entries.find((e) => e.desired_generation === 12 && e.reason === 'CONVERGED_AFTER_REPAIR');
    expect(repair, 'the gen-12 repair is recorded in the PostgreSQL ledger').toBeDefined();
    expect(repair?.execution_evidence.map((x) => `${x.resource_key}:${x.outcome}`)).toEqual(['build:applied', 'app:applied']);
    expect(repair?.operator_exceptions.map((x) => x.resource_key)).toEqual(['maintenance']);
    expect(entries.find((e) => e.desired_generation === 11 && e.convergence_status === 'SUPERSEDED')).toBeDefined();
    expect(stack.ledger.backend).toBe('postgres');
    // The app started once at 7.3 and once at 7.4: nothing was started twice.
    expect(startsOf(stack, node)).toBe(2);
  }, 300_000);
});

describe('production cluster: a conflicting writer', () => {
  it('stops the loop as CONFLICT; `retake` by signal takes the file back and the loop converges', async () => {
    const node = 'C-1';
    await writeNode(stack, node, 1, { version: '7.4', policy: { conflict_window: '10m' } });
    await stack.cluster.startAgents(`agent-${node}`, [await writeAgentFile(stack, node)]);
    const handle = await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: reconcileWorkflowId(node, 1),
      args: [{ node, generation: 1 }],
    });
    await waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const config = path.join(rootOf(stack, node), 'etc/app/config.json');
    const writer = startConflictingWriter(config, '{"workers": 2}\n');
    try {
      const conflict = await waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
      expect(conflict.conditions.map((c) => c.type)).toContain('CONFLICTING_WRITER');
    } finally {
      writer.kill('SIGKILL');
    }
    await handle.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'retake', by: 'oncall' });
    await waitFor(
      handle,
      (s, l) => s.convergence_status === 'CONVERGED' && l.some((e) => e.reason === 'OPERATOR_RESOLUTION_RECORDED'),
    );
    expect(JSON.parse(await fs.readFile(config, 'utf8'))).toEqual({ workers: 8 });
    const stored = await stack.ledger.list(node);
    expect(stored.map((e) => e.convergence_status)).toContain('CONFLICT');
    expect(stored.some((e) => e.reason === 'OPERATOR_RESOLUTION_RECORDED')).toBe(true);
  }, 300_000);
});

describe('production cluster: task-queue partitions', () => {
  it("gives datum-control 4 partitions and a node's queue 1 (deploy/temporal/dynamicconfig/production.yaml)", async () => {
    // The matching service labels its metrics with the partition it loaded: datum-control's
    // pollers load partitions 1-3 as well, a node agent's poller only partition 0. An agent of
    // its own, so that the test stands alone.
    await stack.cluster.startAgents('agent-N-31', [await writeAgentFile(stack, 'N-31')]);
    const loaded = async () => {
      const text = await (await fetch(`http://127.0.0.1:${stack.cluster.ports.metrics}/metrics`)).text();
      const label = new RegExp(`partition="(\\d+)"[^}]*taskqueue="(\\w+)"|taskqueue="(\\w+)"[^}]*partition="(\\d+)"`, 'g');
      const pairs = [...text.matchAll(label)].map((m) => ({ queue: m[2] ?? m[3], partition: m[1] ?? m[4] }));
      const of = (queue: string) => [...new Set(pairs.filter((p) => p.queue === queue).map((p) => p.partition))].sort();
      return { control: of('datum_control'), node: of('datum_node_N_31') };
    };
    const seen = await until(loaded, {
      what: "datum-control's partitions 0-3 and N-31's queue in the server's metrics",
      timeoutMs: 120_000,
      intervalMs: 2000,
      accept: (l) => ['0', '1', '2', '3'].every((p) => l.control.includes(p)) && l.node.includes('0'),
    });
    expect(seen.node).toEqual(['0']);
  }, 180_000);
});
