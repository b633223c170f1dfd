import { execFile } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from '../../src/cluster/cluster';
import { runs } from '../../src/cluster/processes';
import {
  CONTROL_TASK_QUEUE,
  ROLLOUT_OUTCOMES,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  rolloutWorkflowId,
  type ReconcileNodeWorkflow,
  type RolloutWorkflow,
} from '../../src/contract';
import type { LedgerEntry } from '../../src/domain';
import { projectRoot } from '../../src/worker/paths';
import {
  missingFromStore,
  rootOf,
  startProductionStack,
  startsOf,
  waitFor,
  writeAgentFile,
  writeNode,
  type ProductionStack,
} from './fixture';

/*
 * Recovering the production cluster as an operator does, with `npm run cluster` itself (issue 22):
 * `up` is idempotent as `docker compose up -d` is. After a kill -9 of the Temporal server, `up`
 * alone brings it back and leaves the agents and their services running; after `down`, `up` on the
 * same data brings the cluster back and the loops carry on from PostgreSQL.
 */

const run = promisify(execFile);
const MAIN = path.join(projectRoot(), 'dist', 'src', 'cluster', 'main.js');
let stack: ProductionStack;

beforeAll(async () => {
  stack = await startProductionStack(1);
}, 600_000);
afterAll(async () => {
  await stack?.stop();
}, 180_000);

/** `npm run cluster -- <args> --data DATA` as a separate process: its exit code and output. */
async function cluster(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return await run(process.execPath, [MAIN, ...args, '--data', stack.dataDir], { timeout: 600_000 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
}

/** The parts a cluster command's output names, and what it said of each ("running", "STOPPED", "restarted" …). */
function said(stdout: string): Record<string, string> {
  const parts: Record<string, string> = {};
  for (const m of stdout.matchAll(/^cluster: (\S+)\s+(running|STOPPED|started|restarted)\s+pid/gm)) parts[m[1]] = m[2];
  return parts;
}

const servicePid = (node: string) =>
  (JSON.parse(readFileSync(path.join(rootOf(stack, node), '.datum/services/app.json'), 'utf8')) as { pid: number }).pid;

async function startLoop(node: string) {
  return await stack.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId: reconcileWorkflowId(node, 1),
    args: [{ node, generation: 1 }],
  });
}

const appliedIn = (entries: LedgerEntry[]) =>
  entries.flatMap((e) => e.execution_evidence.filter((x) => x.outcome === 'applied').map((x) => `${x.resource_key}:${x.action}`));

describe('production cluster: `up` brings back what died, and only that', () => {
  it('kill -9 of the server, a managed file edited during the outage: `up` alone restarts the server, the agents and their services keep running, and the next pass repairs the edit', async () => {
    const node = 'K-1';
    const motd = { path: 'etc/motd', content: 'welcome\n' };
    await writeNode(stack, node, 1, {
      version: '7.4',
      files: { motd },
      policy: { resync_interval: '2s', conflict_window: '0s' },
    });
    await stack.cluster.startAgents(`agent-${node}`, [await writeAgentFile(stack, node)]);
    const loop = await startLoop(node);
    await waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    const agents = stack.cluster.processes.filter((p) => p.name.startsWith('agent-'));
    const worker = stack.cluster.process('worker-1');
    const service = servicePid(node);
    const seqBefore = Math.max(...(await stack.ledger.list(node)).map((e) => e.seq));

    await stack.cluster.kill('temporal-server');
    const status = await cluster('status');
    expect(status.code).toBe(1);
    expect(said(status.stdout)).toMatchObject({
      'temporal-server': 'STOPPED',
      'worker-1': 'running',
      [`agent-${node}`]: 'running',
    });
    await fs.writeFile(path.join(rootOf(stack, node), motd.path), 'defaced by hand\n');

    const up = await cluster('up');
    expect(up.code, up.stderr).toBe(0);
    expect(said(up.stdout)).toEqual({
      postgres: 'running',
      'temporal-server': 'restarted',
      'worker-1': 'running',
      ...Object.fromEntries(agents.map((a) => [a.name, 'running'])),
    });
    // The banner names the 0600 env file instead of printing the ledger URL's password.
    const env = path.join(stack.dataDir, 'cluster.env');
    expect(up.stdout).not.toContain(stack.cluster.databases.datum.password);
    expect(up.stdout).toContain(`. ${env};`);
    expect((await fs.stat(env)).mode & 0o777).toBe(0o600);
    const { stdout: url } = await run('sh', ['-c', `. '${env}' && printf %s "$DATUM_LEDGER_URL"`]);
    expect(url).toBe(stack.cluster.ledgerUrl);

    stack.cluster = (await Cluster.attach(stack.dataDir)) as Cluster;
    // The same agent and worker processes, still running: `up` started the server alone.
    for (const a of agents) expect(runs(stack.cluster.process(a.name)) && stack.cluster.process(a.name).pid).toBe(a.pid);
    expect(stack.cluster.process('worker-1').pid).toBe(worker.pid);

    // The next pass judges the edit: repaired (conflict_window 0s), recorded in PostgreSQL.
    await waitFor(
      loop,
      (s, l) =>
        s.convergence_status === 'CONVERGED' && l.some((e) => e.seq > seqBefore && appliedIn([e]).includes('motd:file.write')),
    );
    expect(await fs.readFile(path.join(rootOf(stack, node), motd.path), 'utf8')).toBe(motd.content);
    const after = (await stack.ledger.list(node)).filter((e) => e.seq > seqBefore);
    expect(appliedIn(after)).toEqual(['motd:file.write']);
    expect(await missingFromStore(stack, loop, node)).toEqual([]);
    // Its service was never restarted: the same process, one start.
    expect(servicePid(node)).toBe(service);
    expect(startsOf(stack, node)).toBe(1);
  }, 600_000);

  it('up, a rollout, down, up again on the same data: the loops resume from PostgreSQL, the ledger keeps every entry, no action is repeated', async () => {
    const nodes = ['D-1', 'D-2'];
    const files: string[] = [];
    for (const node of nodes) {
      await writeNode(stack, node, 1, { version: '7.4', policy: { resync_interval: '2s' } });
      files.push(await writeAgentFile(stack, node));
    }
    // One agent process for both (one host, two nodes); after down, up starts one per agent file.
    await stack.cluster.startAgents('agents-D', files);
    const rollout = await stack.client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: rolloutWorkflowId(1, nodes),
      args: [{ generation: 1, nodes }],
    });
    const result = await rollout.result();
    expect(result.nodes.map((n) => n.outcome === ROLLOUT_OUTCOMES.refused)).toEqual([false, false]);
    const before = new Map<string, { entries: LedgerEntry[]; runId: string; config: string }>();
    for (const node of nodes) {
      const handle = stack.client.workflow.getHandle(reconcileWorkflowId(node, 1));
      await waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
      const config = await fs.stat(path.join(rootOf(stack, node), 'etc/app/config.json'));
      before.set(node, {
        entries: await stack.ledger.list(node),
        runId: (await handle.describe()).runId,
        config: `${config.ino}:${config.mtimeMs}`,
      });
    }

    const down = await cluster('down');
    expect(down.code, down.stderr).toBe(0);
    expect(stack.cluster.processes.filter(runs)).toEqual([]);
    expect(stack.cluster.pg.running()).toBe(false);
    // Same data, no flags: the recorded port base and fleet. Every part starts (the agents' logs hold
    // multi-byte characters from the first run: their readiness is read after it, by byte offset).
    const up = await cluster('up', '--no-rollout');
    expect(up.code, up.stderr).toBe(0);
    expect(new Set(Object.values(said(up.stdout)))).toEqual(new Set(['started']));
    stack.cluster = (await Cluster.attach(stack.dataDir)) as Cluster;

    for (const node of nodes) {
      const was = before.get(node)!;
      const handle = stack.client.workflow.getHandle(reconcileWorkflowId(node, 1));
      const lastSeq = Math.max(...was.entries.map((e) => e.seq));
      // down stopped the node's service: the same loop (same run, its state in PostgreSQL) sees it and starts it again.
      await waitFor(
        handle,
        (s, l) => s.convergence_status === 'CONVERGED' && l.some((e) => e.seq > lastSeq && appliedIn([e]).length > 0),
      );
      expect((await handle.describe()).runId).toBe(was.runId);
      const entries = await stack.ledger.list(node);
      // Every entry from before is kept as it was, and the loop's ledger has no gap in the store.
      expect(entries.filter((e) => e.seq <= lastSeq)).toEqual(was.entries);
      expect(await missingFromStore(stack, handle, node)).toEqual([]);
      // No action repeated: each action the rollout applied, once; after up, only the start of the
      // service down stopped. The app counted its own starts: the rollout's and that one.
      const applied = appliedIn(was.entries);
      expect(applied).toEqual([...new Set(applied)]);
      expect(appliedIn(entries.filter((e) => e.seq > lastSeq))).toEqual(['app:service.start']);
      expect(startsOf(stack, node)).toBe(2);
      const config = await fs.stat(path.join(rootOf(stack, node), 'etc/app/config.json'));
      expect(`${config.ino}:${config.mtimeMs}`).toBe(was.config);
    }
  }, 600_000);
});
