// Issue 18, hole 6: an agent.yaml entry keyed by a resource key (overrides.config) protects the
// target its key claimed when the agent first saw it; that binding lived only in
// <root>/.datum/claims.json. Lose .datum/ (a restore, an rm -rf by a local writer) and rename the
// resource in desired state, and the override protected nothing while the observation still
// reported it (the ledger listed it as honoured under the old key) and the new key wrote the
// operator's file. Now an entry whose target cannot be established fails closed: no file or
// release of the node is written, each says why and how to name the target, until the operator
// names it or removes the entry. On real files with the real agent activities.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ResourceSpec } from '../../src/domain';
import type { ObserveRequest } from '../../src/contract';
import { action, cleanupNodes, expectRefusal, fileAction, makeNode, runActivity, type TestNode } from '../agent/helpers';

afterEach(cleanupNodes);

const CONFIG = 'etc/app/config.json';
const OPS = { approved_by: 'oncall', reason: 'CHG-6', since: '2026-11-28T10:00:00Z' };
const OPERATORS = '{"workers": 3}\n';
const file = (content = 'from desired state\n'): ResourceSpec => ({ type: 'file', path: CONFIG, content });
const onDisk = (t: TestNode) => fs.readFile(path.join(t.root, CONFIG), 'utf8').catch(() => null);
const observeAt = (t: TestNode, resources: ObserveRequest['resources'], generation: number) =>
  runActivity((r: ObserveRequest) => t.acts.observe(r), { node: t.node, resources, generation });

/** A node whose override of `config` was bound to etc/app/config.json, then lost with .datum/. */
async function lostBinding(): Promise<TestNode> {
  const t = await makeNode();
  await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
  await fs.writeFile(path.join(t.root, CONFIG), OPERATORS);
  await t.writeConfig({ overrides: { config: OPS } });
  await observeAt(t, { config: file() }, 12); // binds overrides.config to file:etc/app/config.json
  const claims = JSON.parse(await fs.readFile(path.join(t.root, '.datum/claims.json'), 'utf8')) as {
    bindings: Record<string, { target: string }>;
  };
  expect(claims.bindings['overrides.config']?.target).toBe(`file:${CONFIG}`);
  await fs.rm(path.join(t.root, '.datum'), { recursive: true });
  return t;
}

describe('attack: .datum/ lost, then the overridden resource renamed', () => {
  it('fails closed: the renamed key is obstructed and its write refused, the operator file kept', async () => {
    const t = await lostBinding();
    const seen = await observeAt(t, { settings: file(), maintenance: { type: 'flag', value: false } }, 13);
    // Before the fix: settings had no obstruction and no protection, and the write below went through.
    expect(seen.resources.settings.obstruction).toMatch(
      /overrides\.config protects a target the agent cannot establish: no resource of desired state is "config" and \.datum\/claims\.json has no binding for it/,
    );
    expect(seen.resources.settings.obstruction).toMatch(
      /fix: name the target in agent\.yaml \(overrides: \{"file:<path>": …\}\)/,
    );
    // A flag is its key's own target: a renamed flag is another flag, so it is not held back.
    expect(seen.resources.maintenance.obstruction).toBeNull();
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'settings', CONFIG, 'from desired state\n', { desired_generation: 13 })),
      'OperatorOwnedRefusal',
    );
    expect(failure.message).toMatch(/overrides\.config protects a target the agent cannot establish/);
    expect(await onDisk(t)).toBe(OPERATORS);
    await expect(
      t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: false }, { desired_generation: 13 })),
    ).resolves.toMatchObject({ outcome: 'applied' });
  });

  it('lifts when the operator names the target: the file is then operator-owned by target, still not written', async () => {
    const t = await lostBinding();
    await t.writeConfig({ overrides: { [`file:${CONFIG}`]: OPS } });
    const seen = await observeAt(t, { settings: file() }, 13);
    expect(seen.resources.settings.obstruction).toBeNull();
    expect(seen.overrides.settings).toEqual(OPS);
    await expectRefusal(
      t.apply(fileAction(t.node, 'settings', CONFIG, 'from desired state\n', { desired_generation: 13 })),
      'OperatorOwnedRefusal',
    );
    expect(await onDisk(t)).toBe(OPERATORS);
  });

  it('lifts when the operator removes the entry: Datum manages the file again', async () => {
    const t = await lostBinding();
    await t.writeConfig({});
    expect((await observeAt(t, { settings: file() }, 13)).resources.settings.obstruction).toBeNull();
    await expect(
      t.apply(fileAction(t.node, 'settings', CONFIG, 'from desired state\n', { desired_generation: 13 })),
    ).resolves.toMatchObject({ outcome: 'applied' });
  });
});
