import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { reconcileWorkflowId, removalItemId, type WorkItem } from '../../src/contract';
import { FAST_POLICY } from '../helpers/fleet';
import { runDatum } from '../helpers/cli';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';

/*
 * Removal with consent, end to end on real processes (the `datum` CLI, a dev server, the
 * controller worker, one real agent per node): a file and a flag dropped from desired state, and
 * a node decommissioned. Nothing goes before an approval; after it, exactly the targets the plan
 * named, each kept in the node's backup area; a second approval of the same item removes nothing.
 */

const stack = useStack();

const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir });

async function writeDesired(node: string, generation: number, resources: Record<string, unknown>): Promise<void> {
  await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation, resources, policy: FAST_POLICY }));
}

/** agent.yaml that allows removing what `destructive` names (none: the agent removes nothing). */
async function writeAgent(node: string, destructive: string[]): Promise<void> {
  const doc = {
    node,
    root: stack.fleet.root(node),
    reconciliation: { mode: 'enforce', resources: {} },
    overrides: {},
    ...(destructive.length ? { allow: { destructive } } : {}),
  };
  await fs.writeFile(stack.fleet.agentFile(node), stringify(doc));
}

const at = (node: string, rel: string) => path.join(stack.fleet.root(node), rel);

async function item(id: string): Promise<WorkItem> {
  const shown = await datum('work', 'show', id, '-o', 'json');
  if (shown.code !== 0) throw new Error(shown.stderr);
  return JSON.parse(shown.stdout) as WorkItem;
}

const waitState = (id: string, state: WorkItem['state']) =>
  until(() => item(id), { what: `${id} to be ${state}`, accept: (i) => i.state === state, errors: 'retry', intervalMs: 1000 });

async function rollout(generation: number, node: string, code = 0): Promise<string> {
  const r = await datum('rollout', 'start', '--generation', String(generation), '--nodes', node, '--wait', '--timeout', '2m');
  expect([r.code, r.stderr, r.stdout]).toEqual([code, '', expect.any(String)]);
  return r.stdout;
}

async function approve(id: string, by: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const claimed = await datum('work', 'claim', id, '--by', by);
  if (claimed.code !== 0) return claimed;
  return await datum('work', 'resolve', id, '--resolution', 'approve', '--by', by, '--note', 'agreed');
}

/** Every file under the node's root but Datum's own bookkeeping, with its bytes. */
async function tree(node: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (dir: string, rel: string) => {
    for (const e of await fs.readdir(dir, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (r === '.datum') continue;
      if (e.isDirectory()) await walk(path.join(dir, e.name), r);
      else out[r] = await fs.readFile(path.join(dir, e.name), 'utf8');
    }
  };
  await walk(stack.fleet.root(node), '');
  return out;
}

/** The backup of `target` the agent reports, and that it holds `bytes`. */
async function expectKept(node: string, removed: { target: string; backup: string }, bytes: string): Promise<void> {
  expect(removed.backup).toMatch(new RegExp(`^\\.datum/backup/`));
  expect(await fs.readFile(at(node, removed.backup), 'utf8')).toBe(bytes);
}

describe('removal with consent', () => {
  it('a file and a flag dropped from desired state: planned, removed only on approval, kept in the backup area, once', async () => {
    const node = 'D-1';
    await writeAgent(node, ['file', 'flag']);
    await writeDesired(node, 1, {
      motd: { type: 'file', path: 'etc/motd', content: 'hello\n' },
      old: { type: 'file', path: 'etc/old.conf', content: 'old=1\n' },
      maintenance: { type: 'flag', value: false },
      legacy: { type: 'flag', value: true },
    });
    await stack.startAgent(node);
    await rollout(1, node);
    const before = await tree(node);
    expect(before['etc/old.conf']).toBe('old=1\n');
    expect(before['flags/legacy.json']).toBeDefined();

    await writeDesired(node, 2, {
      motd: { type: 'file', path: 'etc/motd', content: 'hello\n' },
      maintenance: { type: 'flag', value: false },
    });
    // The flag it no longer declares is there, and nobody is known to own it: the loop says so, and removes nothing.
    expect(await rollout(2, node, 1)).toMatch(/D-1 +BLOCKED +UNKNOWN_OWNERSHIP: Ownership of "legacy" is not proven/);
    const id = removalItemId(node, { kind: 'dropped', generation: 2 });
    const open = await waitState(id, 'OPEN');
    expect(open.condition).toBe('PLANNED_REMOVAL');
    expect(open.removal!.targets.map((t) => [t.target, t.resource_key, t.claimed_generation, t.refused])).toEqual([
      ['file:etc/old.conf', 'old', 1, null],
      ['flag:legacy', 'legacy', 1, null],
    ]);
    const listed = async (selector: string) =>
      (
        JSON.parse(
          (await datum('work', 'list', '--selector', selector, '--condition', 'PLANNED_REMOVAL', '-o', 'json')).stdout,
        ) as {
          items: Array<{ id: string }>;
        }
      ).items.map((i) => i.id);
    expect(await listed('name=D-1')).toEqual([id]);
    expect(await listed('name=D-2')).toEqual([]);
    const shown = await datum('work', 'show', id);
    expect(shown.stdout).toContain('Approving removes exactly 2 target(s): file:etc/old.conf (6 bytes), flag:legacy');
    // Planned, not done: nothing is gone.
    expect(await tree(node)).toEqual(before);

    const approved = await approve(id, 'frank');
    expect([approved.code, approved.stderr]).toEqual([0, '']);
    const closed = await waitState(id, 'CLOSED').catch(() => null);
    const done = closed?.removal?.done ?? null;
    const after = await tree(node);
    // Exactly the two named targets are gone; everything else is as it was.
    const expected = { ...before };
    delete expected['etc/old.conf'];
    delete expected['flags/legacy.json'];
    expect(after).toEqual(expected);
    expect(done).not.toBeNull();
    expect(done!.removed.map((r) => r.target)).toEqual(['file:etc/old.conf', 'flag:legacy']);
    await expectKept(node, done!.removed[0], 'old=1\n');
    await expectKept(node, done!.removed[1], before['flags/legacy.json']);
    const log = (await fs.readFile(at(node, '.datum/removals.jsonl'), 'utf8')).trim().split('\n');
    expect(log.map((l) => JSON.parse(l) as { target: string; by: string; item: string })).toEqual([
      expect.objectContaining({ target: 'file:etc/old.conf', by: 'frank', item: id }),
      expect.objectContaining({ target: 'flag:legacy', by: 'frank', item: id }),
    ]);

    // With the flag gone, the loop of generation 2 has nothing left it does not own.
    await stack.waitFor(
      stack.client.workflow.getHandle(reconcileWorkflowId(node, 2)),
      (s) => s.convergence_status === 'CONVERGED',
    );

    // A second approval of the same item does nothing.
    const again = await approve(id, 'grace');
    expect(again.code).not.toBe(0);
    expect(await tree(node)).toEqual(after);
    expect((await fs.readFile(at(node, '.datum/removals.jsonl'), 'utf8')).trim().split('\n')).toHaveLength(2);
    await stack.client.workflow.getHandle(reconcileWorkflowId(node, 2)).terminate('test done');
  });

  it('a decommissioned node: its loops end, everything Datum holds is planned, removed only on approval', async () => {
    const node = 'D-2';
    await writeAgent(node, ['file', 'flag']);
    await writeDesired(node, 1, {
      motd: { type: 'file', path: 'etc/motd', content: 'bye\n' },
      maintenance: { type: 'flag', value: false },
    });
    await stack.startAgent(node);
    await rollout(1, node);
    // Something on the host Datum never managed: never planned, never removed.
    await fs.writeFile(at(node, 'etc/local.conf'), 'mine\n');
    const before = await tree(node);

    // Still declared by the authority: refused, nothing planned.
    const early = await datum('decommission', node, '--by', 'erin');
    expect(early.code).toBe(1);
    expect(early.stdout + early.stderr).toMatch(/is still declared by the authority .* — fix: remove desired\/nodes\/D-2\.yaml/);

    await fs.rm(stack.fleet.desiredFile(node));
    const id = removalItemId(node, { kind: 'decommission', by: 'erin', note: null, at: '' });
    // The refused attempt closed its item; a decommission now is a new run of the same id.
    const planned = await datum('decommission', node, '--by', 'erin', '--note', 'host retired', '-o', 'json');
    expect([planned.code, planned.stderr]).toEqual([0, '']);
    const plan = JSON.parse(planned.stdout) as WorkItem;
    expect(plan).toMatchObject({ id, state: 'OPEN' });
    expect(plan.removal!.targets.map((t) => t.target)).toEqual(['file:etc/motd', 'flag:maintenance']);
    const loop = await stack.client.workflow.getHandle(reconcileWorkflowId(node, 1)).describe();
    expect(loop.status.name).toBe('TERMINATED');
    expect(await tree(node)).toEqual(before);

    const approved = await approve(id, 'erin');
    expect([approved.code, approved.stderr]).toEqual([0, '']);
    const closed = await waitState(id, 'CLOSED').catch(() => null);
    expect(await tree(node)).toEqual({ 'etc/local.conf': 'mine\n' });
    expect(closed?.removal?.done?.removed.map((r) => r.target)).toEqual(['file:etc/motd', 'flag:maintenance']);
    await expectKept(node, closed!.removal!.done!.removed[0], 'bye\n');
  });

  it('where agent.yaml does not allow it, the approval is refused and nothing is removed', async () => {
    const node = 'D-3';
    await writeAgent(node, []);
    await writeDesired(node, 1, { motd: { type: 'file', path: 'etc/motd', content: 'stay\n' } });
    await stack.startAgent(node);
    await rollout(1, node);
    const before = await tree(node);
    await fs.rm(stack.fleet.desiredFile(node));
    const planned = await datum('decommission', node, '--by', 'erin', '-o', 'json');
    expect([planned.code, planned.stderr]).toEqual([0, '']);
    const plan = JSON.parse(planned.stdout) as WorkItem;
    expect(plan.removal!.targets[0].refused).toMatch(/agent\.yaml on D-3 does not allow removing a file .* — fix:/);
    const approve1 = await approve(plan.id, 'erin');
    expect(approve1.code).not.toBe(0);
    expect(approve1.stderr).toMatch(/does not allow removing a file/);
    expect(await tree(node)).toEqual(before);
  });
});
