// An approved planned removal on the agent itself: exactly the targets named, the bytes kept,
// once per approval (a repeated request is answered from the record and removes nothing, even
// what stands at the same path again), and nothing when the target moved since the plan.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RemovalPlanRequest, RemovalRequest } from '../../src/contract';
import { cleanupNodes, expectRefusal, fileAction, makeNode, runActivity, type TestNode } from './helpers';

afterEach(cleanupNodes);

async function allowRemoval(t: TestNode): Promise<void> {
  const doc = {
    node: t.node,
    root: t.root,
    reconciliation: { mode: 'enforce', resources: {} },
    allow: { destructive: ['file'] },
  };
  await fs.writeFile(t.configPath, JSON.stringify(doc));
}

async function planned(t: TestNode) {
  const request: RemovalPlanRequest = { node: t.node, cause: 'decommission', generation: null, resources: {} };
  return await runActivity((r: RemovalPlanRequest) => t.acts.planRemoval(r), request);
}

const approval = (t: TestNode, key: string, targets: RemovalRequest['targets']): RemovalRequest => ({
  node: t.node,
  item: `datum-work/${t.node}/PLANNED_REMOVAL/decommission`,
  cause: 'decommission',
  key,
  approval: { by: 'erin', identity: null, note: null, at: new Date().toISOString() },
  targets,
});

const remove = (t: TestNode, r: RemovalRequest) => runActivity((x: RemovalRequest) => t.acts.removeTargets(x), r);
const motd = (t: TestNode) => path.join(t.root, 'etc/motd');
const logLines = async (t: TestNode) =>
  (await fs.readFile(path.join(t.root, '.datum/removals.jsonl'), 'utf8')).trim().split('\n');

describe('removeTargets', () => {
  it('removes once per approval: a repeated request removes nothing, not even a new file at the same path', async () => {
    const t = await makeNode();
    await allowRemoval(t);
    await t.apply(fileAction(t.node, 'motd', 'etc/motd', 'hello\n'));
    const plan = await planned(t);
    expect(plan.targets.map((x) => [x.target, x.refused])).toEqual([['file:etc/motd', null]]);
    const request = approval(
      t,
      'item@run-1',
      plan.targets.map((x) => ({ target: x.target, marker: x.marker, sha256: x.sha256 })),
    );

    const first = await remove(t, request);
    expect(first).toMatchObject({ replayed: false, removed: [{ target: 'file:etc/motd', path: 'etc/motd', size: 6 }] });
    await expect(fs.lstat(motd(t))).rejects.toThrow(/ENOENT/);
    expect(await fs.readFile(path.join(t.root, first.removed[0].backup), 'utf8')).toBe('hello\n');

    // Someone writes the path again; the same approval, repeated, is answered from the record.
    await fs.writeFile(motd(t), 'new\n');
    const again = await remove(t, request);
    expect(again).toMatchObject({ replayed: true, removed: first.removed });
    expect(await fs.readFile(motd(t), 'utf8')).toBe('new\n');
    expect(await logLines(t)).toHaveLength(1);
  });

  it('refuses, removing nothing, when the target is not what the plan saw', async () => {
    const t = await makeNode();
    await allowRemoval(t);
    await t.apply(fileAction(t.node, 'motd', 'etc/motd', 'hello\n'));
    const plan = await planned(t);
    await fs.writeFile(motd(t), 'changed by hand\n');
    const failure = await expectRefusal(
      remove(
        t,
        approval(
          t,
          'item@run-2',
          plan.targets.map((x) => ({ target: x.target, marker: x.marker, sha256: x.sha256 })),
        ),
      ),
      'MarkerMoved',
    );
    expect(failure.message).toMatch(/MARKER_MOVED: "etc\/motd" is not what the approved plan saw .* — fix:/);
    expect(await fs.readFile(motd(t), 'utf8')).toBe('changed by hand\n');
  });
});
