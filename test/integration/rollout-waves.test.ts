import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  MEMO_SUMMARY,
  gateItemId,
  reconcileWorkflowId,
  rolloutWorkflowId,
  stateQuery,
  type RolloutProgress,
  type RolloutResult,
  type WorkItem,
} from '../../src/contract';
import { FAST_POLICY } from '../helpers/fleet';
import { runDatum } from '../helpers/cli';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';

/*
 * Rollouts in waves on real processes: the `datum` CLI as a person runs it, a dev server, the
 * controller worker and one real agent per node. A node "that cannot converge" is one whose
 * desired file goes through a symlink out of its root: its agent refuses the write, and its loop
 * settles BLOCKED (ACTION_REFUSED). The gate judges only what the ledger store records.
 */

const stack = useStack();
const outside: string[] = [];
const started = new Set<string>();

afterAll(async () => {
  for (const dir of outside) await fs.rm(dir, { recursive: true, force: true });
});

const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir });

interface NodeSpec {
  motd: string;
  labels?: Record<string, string>;
  /** A file through a symlink out of the node's root: the agent refuses it, the loop settles BLOCKED. */
  trap?: boolean;
  policy?: Record<string, unknown>;
}

async function writeNode(node: string, generation: number, spec: NodeSpec): Promise<void> {
  const doc = {
    node,
    generation,
    ...(spec.labels ? { labels: spec.labels } : {}),
    resources: {
      motd: { type: 'file', path: 'etc/motd', content: spec.motd },
      maintenance: { type: 'flag', value: false },
      ...(spec.trap ? { trap: { type: 'file', path: 'trap/app.conf', content: 'x\n' } } : {}),
    },
    policy: { ...FAST_POLICY, ...spec.policy },
  };
  await fs.writeFile(stack.fleet.desiredFile(node), stringify(doc));
  if (spec.trap) {
    const root = stack.fleet.root(node);
    await fs.mkdir(root, { recursive: true });
    const away = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-outside-'));
    outside.push(away);
    await fs.rm(path.join(root, 'trap'), { force: true });
    await fs.symlink(away, path.join(root, 'trap'));
  }
  if (!started.has(node)) {
    await stack.fleet.writeAgent(node);
    started.add(node);
  }
}

async function item(id: string): Promise<WorkItem> {
  const shown = await datum('work', 'show', id, '-o', 'json');
  if (shown.code !== 0) throw new Error(shown.stderr);
  return JSON.parse(shown.stdout) as WorkItem;
}

const openItem = (id: string) =>
  until(() => item(id), {
    what: `${id} to be open`,
    accept: (i) => i.state === 'OPEN',
    errors: 'retry',
    timeoutMs: 120_000,
    intervalMs: 1000,
  });

const progress = (id: string) => stack.client.workflow.getHandle(id).query<RolloutProgress>('progress');

async function loopExists(node: string, generation: number): Promise<boolean> {
  return stack.client.workflow
    .getHandle(reconcileWorkflowId(node, generation))
    .describe()
    .then(
      () => true,
      (e: Error) => {
        if (/not found/i.test(e.message)) return false;
        throw e;
      },
    );
}

async function resolveAs(id: string, resolution: string, by: string, note: string): Promise<void> {
  const claimed = await datum('work', 'claim', id, '--by', by);
  expect([claimed.code, claimed.stderr]).toEqual([0, '']);
  const resolved = await datum('work', 'resolve', id, '--resolution', resolution, '--by', by, '--note', note);
  expect([resolved.code, resolved.stderr]).toEqual([0, '']);
}

const resultOf = (id: string) => stack.client.workflow.getHandle(id).result() as Promise<RolloutResult>;

async function terminateLoops(nodes: string[], generation: number): Promise<void> {
  for (const node of nodes)
    if (await loopExists(node, generation))
      await stack.client.workflow
        .getHandle(reconcileWorkflowId(node, generation))
        .terminate('test done')
        .catch(() => undefined);
}

describe('a rollout in waves', () => {
  it('four waves picked by a selector: wave 2 has a node that cannot converge; the rollout halts, later waves never start, abort ends it', async () => {
    const web = ['V-1', 'V-2', 'V-3', 'V-4', 'V-5'];
    for (const node of web)
      await writeNode(node, 1, {
        motd: `${node}\n`,
        labels: node === 'V-2' ? { role: 'web', zone: 'b' } : { role: 'web' },
        ...(node === 'V-3' ? { trap: true } : {}),
      });
    // A node of the fleet the selector does not take: never started.
    await writeNode('V-6', 1, { motd: 'db\n', labels: { role: 'db' } });
    for (const node of [...web, 'V-6']) await stack.startAgent(node);

    const start = await datum('rollout', 'start', '--generation', '1', '--selector', 'role=web', '--waves', '1,3,4,100%');
    expect([start.code, start.stderr]).toEqual([0, '']);
    const id = rolloutWorkflowId(1, web);
    expect(start.stdout).toContain(
      `Started rollout ${id} of generation 1 to 5 node(s) in 4 waves: wave-1 (V-1); wave-2 (V-2, V-3); wave-3 (V-4); wave-4 (V-5).`,
    );

    const gate = gateItemId(id, 1);
    const halted = await openItem(gate);
    expect(halted.condition).toBe('ROLLOUT_HALTED');
    expect(halted.gate).toMatchObject({
      rollout: id,
      generation: 1,
      wave: 1,
      wave_name: 'wave-2',
      failing: [{ node: 'V-3', state: 'settled', workflow_id: reconcileWorkflowId('V-3', 1) }],
      later_waves: [
        { name: 'wave-3', nodes: ['V-4'] },
        { name: 'wave-4', nodes: ['V-5'] },
      ],
    });
    expect(halted.gate!.failing[0].why).toMatch(/BLOCKED\/ACTION_REFUSED/);
    // The item carries V-3's entry as the ledger store recorded it.
    expect(halted.ledger).toEqual([expect.objectContaining({ node: 'V-3', status: 'BLOCKED', reason: 'ACTION_REFUSED' })]);
    expect(halted.allowed.map((a) => a.resolution).sort()).toEqual(['abort', 'continue', 'rollback']);
    const shown = await datum('work', 'show', gate);
    expect(shown.stdout).toMatch(/Failing:\n {2}V-3 +settled +its loop recorded BLOCKED\/ACTION_REFUSED: .*PathOutsideRoot/);
    expect(shown.stdout).toContain('Not started: wave-3 (V-4); wave-4 (V-5)');

    // Halted: the waves after it never start, whatever the time.
    for (const node of ['V-4', 'V-5', 'V-6']) expect(await loopExists(node, 1)).toBe(false);
    // A selector on the fleet view: the labels the authority gives, the loops that run.
    const listed = await datum('nodes', '--selector', 'role=web,zone!=b', '-o', 'json');
    expect([listed.code, listed.stderr]).toEqual([0, '']);
    const view = JSON.parse(listed.stdout) as { nodes: Array<{ node: string }>; without_loop: Array<{ node: string }> };
    expect(view.nodes.map((n) => n.node).sort()).toEqual(['V-1', 'V-3']);
    expect(view.without_loop.map((n) => n.node).sort()).toEqual(['V-4', 'V-5']);
    const blocked = await datum('status', '--selector', 'name=V-3');
    expect(blocked.code).toBe(1);
    expect(blocked.stdout).toMatch(/V-3 .*ACTION_REFUSED/);
    expect(blocked.stdout).not.toMatch(/V-[1245]/);
    const calm = await datum('status', '--selector', 'role=web,zone=b');
    expect([calm.code, calm.stdout.trim()]).toEqual([0, 'No open condition on the nodes --selector role=web,zone=b selects.']);
    // The Web UI's list shows the rollout's summary, its page the waves.
    const described = await stack.client.workflow.getHandle(id).describe();
    expect(described.memo?.[MEMO_SUMMARY]).toBe(`HALTED: wave-2 (2/4) of generation 1 — ${gate}`);
    const metadata = await stack.client.workflow.getHandle(id).query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toMatch(/\| wave-2 \| 1 \| halted \| V-2: converged, V-3: settled \|/);
    expect(metadata.currentDetails).toContain(`Halted: \`datum work show ${gate}\``);
    const status = await datum('rollout', 'status', id);
    expect(status.stdout).toMatch(/Waves: halted\./);
    expect(status.stdout).toMatch(/wave-1 +passed +generation 1: V-1 converged/);
    expect(status.stdout).toMatch(/wave-2 +halted +generation 1: V-2 converged, V-3 settled — .*\(waiting for a resolution\)/);
    expect(status.stdout).toMatch(/wave-3 +pending +generation 1: V-4 not_started/);

    await resolveAs(gate, 'abort', 'alice', 'V-3 needs a look first');
    const result = await resultOf(id);
    expect(result.waves).toMatchObject({
      state: 'aborted',
      halts: [{ wave: 1, item: gate, resolution: 'abort', resolved: { by: 'alice', note: 'V-3 needs a look first' } }],
    });
    expect(result.waves!.halts[0].resolved!.identity).toMatch(/@/);
    expect(result.waves!.waves.map((w) => w.state)).toEqual(['passed', 'halted', 'stopped', 'stopped']);
    expect(result.nodes.filter((n) => n.outcome === 'not_started').map((n) => n.node)).toEqual(['V-4', 'V-5']);
    for (const node of ['V-4', 'V-5', 'V-6']) expect(await loopExists(node, 1)).toBe(false);
    const closed = await item(gate).catch(() => null);
    expect(closed === null || closed.state === 'CLOSED').toBe(true);
    await terminateLoops(['V-1', 'V-2', 'V-3'], 1);
  });

  it('pause holds the next wave although the gate holds; resume goes on; continue after a halt starts the next wave', async () => {
    // P-1's agent starts only once the rollout is paused, so wave 1 is still on its way then.
    await writeNode('P-1', 1, { motd: 'p1\n', policy: { node_timeout: '90s' } });
    await writeNode('P-2', 1, { motd: 'p2\n', trap: true });
    await writeNode('P-3', 1, { motd: 'p3\n' });
    for (const node of ['P-2', 'P-3']) await stack.startAgent(node);
    const nodes = ['P-1', 'P-2', 'P-3'];
    const start = await datum('rollout', 'start', '--generation', '1', '--nodes', nodes.join(','), '--waves', '1,2,3');
    expect([start.code, start.stderr]).toEqual([0, '']);
    const id = rolloutWorkflowId(1, nodes);
    const paused = await datum('rollout', 'pause', id, '--by', 'bob', '--note', 'lunch');
    expect([paused.code, paused.stderr]).toEqual([0, '']);
    expect(paused.stdout).toContain(`Paused ${id} by bob`);
    const again = await datum('rollout', 'pause', id, '--by', 'carol');
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/the rollout is already paused by bob .* — fix: resume it first/);

    await stack.startAgent('P-1');
    const p1 = stack.client.workflow.getHandle(reconcileWorkflowId('P-1', 1));
    await stack.waitFor(p1, (s) => s.convergence_status === 'CONVERGED', 90_000);
    // Well past the gate's polls: paused, nothing more starts.
    await new Promise((r) => setTimeout(r, 6000));
    expect(await loopExists('P-2', 1)).toBe(false);
    const held = await progress(id);
    expect(held.waves).toMatchObject({ state: 'paused', paused: { by: 'bob', note: 'lunch' } });
    expect(held.waves!.waves.map((w) => w.state)).toEqual(['running', 'pending', 'pending']);
    const status = await datum('rollout', 'status', id);
    expect(status.stdout).toMatch(/Paused by bob at .* \(lunch\): `datum rollout resume/);

    const resumed = await datum('rollout', 'resume', id, '--by', 'bob');
    expect([resumed.code, resumed.stderr]).toEqual([0, '']);
    const gate = gateItemId(id, 1);
    await openItem(gate);
    expect(await loopExists('P-3', 1)).toBe(false);
    await resolveAs(gate, 'continue', 'bob', 'P-2 is known, go on');

    const result = await resultOf(id);
    expect(result.waves!.state).toBe('completed');
    expect(result.waves!.waves.map((w) => w.state)).toEqual(['passed', 'continued', 'passed']);
    expect(result.waves!.pauses).toEqual([
      {
        paused: expect.objectContaining({ by: 'bob', note: 'lunch' }) as unknown,
        resumed: expect.objectContaining({ by: 'bob' }) as unknown,
      },
    ]);
    const byNode = Object.fromEntries(result.nodes.map((n) => [n.node, n]));
    expect(byNode['P-3']).toMatchObject({ outcome: 'reported', status: 'CONVERGED' });
    expect(byNode['P-2']).toMatchObject({ outcome: 'reported', status: 'BLOCKED' });
    await terminateLoops(nodes, 1);
  });

  it('rollback writes the previous content as a new generation, says so in the file, and rolls it out', async () => {
    const nodes = ['K-1', 'K-2'];
    for (const node of nodes) {
      await writeNode(node, 1, { motd: 'one\n' });
      await stack.startAgent(node);
    }
    const first = await datum('rollout', 'start', '--generation', '1', '--nodes', nodes.join(','), '--wait', '--timeout', '2m');
    expect([first.code, first.stderr]).toEqual([0, '']);

    await writeNode('K-1', 2, { motd: 'two\n' });
    await writeNode('K-2', 2, { motd: 'two\n', trap: true });
    const start = await datum('rollout', 'start', '--generation', '2', '--nodes', nodes.join(','), '--waves', '1,100%');
    expect([start.code, start.stderr]).toEqual([0, '']);
    const id = rolloutWorkflowId(2, nodes);
    const gate = gateItemId(id, 1);
    const halted = await openItem(gate);
    expect(halted.gate!.rollback).toEqual([
      expect.objectContaining({ node: 'K-1', content_of: 1, to_generation: 3 }),
      expect.objectContaining({ node: 'K-2', content_of: 1, to_generation: 3 }),
    ]);
    expect(await fs.readFile(path.join(stack.fleet.root('K-1'), 'etc/motd'), 'utf8')).toBe('two\n');

    await resolveAs(gate, 'rollback', 'dana', 'back to one');
    const result = await resultOf(id);
    expect(result.waves).toMatchObject({
      state: 'rolled_back',
      rollback: { by: 'dana', note: 'back to one' },
    });
    expect(result.waves!.rollback!.nodes).toEqual([
      expect.objectContaining({ node: 'K-1', outcome: 'written', generation: 3, content_of: 1 }),
      expect.objectContaining({ node: 'K-2', outcome: 'written', generation: 3, content_of: 1 }),
    ]);
    expect(result.waves!.waves.at(-1)).toMatchObject({ name: 'rollback', generation: 3, state: 'passed' });
    // The authority's file says what it is and who asked; the node is back on the old content.
    const file = await fs.readFile(stack.fleet.desiredFile('K-1'), 'utf8');
    expect(file).toMatch(
      /^# Generation 3 of K-1 is a rollback to the content of generation 1 \(sha256:[0-9a-f]{64}\),\n# written by Datum for dana \(identity .+@.+\) at /,
    );
    expect(file).toContain(`resolving ${gate} of rollout ${id}.`);
    expect(file).toContain('# Note: back to one');
    for (const node of nodes) {
      const state = await stack.client.workflow.getHandle(reconcileWorkflowId(node, 3)).query(stateQuery);
      expect(state).toMatchObject({ convergence_status: 'CONVERGED', desired_generation: 3 });
      expect(await fs.readFile(path.join(stack.fleet.root(node), 'etc/motd'), 'utf8')).toBe('one\n');
    }
    await terminateLoops(nodes, 3);
  });
});
