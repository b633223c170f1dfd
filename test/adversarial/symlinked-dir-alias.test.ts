// Issue 18, hole 1 (critical): an in-root symlinked directory is a second name for a protected
// file. With `conf -> etc/app` inside the root, a file resource at `conf/app.conf` wrote
// `etc/app/app.conf` although an override, an observe entry or a yield protected
// `etc/app/app.conf`: the agent named targets by their spelled path. A target is now what is
// written (src/agent/fs/identity.ts): the agent resolves every spelling it compares, reports the
// identity in the observation, and refuses at the write a target whose identity is protected.
// On real files with the real agent activities; each case fails on the code before it.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { decisionRequest, type ResourceSpec } from '../../src/domain';
import type { ObserveRequest } from '../../src/contract';
import { applyFileWrite } from '../../src/agent/providers/file';
import { cleanupNodes, expectRefusal, fileAction, makeNode, runActivity, sha256, type TestNode } from '../agent/helpers';
import { n24 } from '../unit/fixtures';

afterEach(cleanupNodes);

const PROTECTED = 'etc/app/app.conf';
const OPS = { approved_by: 'oncall', reason: 'CHG-77', since: '2026-11-28T10:00:00Z' };
const OPERATORS = 'operator tuned\n';
const file = (p: string, content = 'from desired state\n'): ResourceSpec => ({ type: 'file', path: p, content });

/** A root with the operator's etc/app/app.conf and `conf -> etc/app` beside it. */
async function aliasedNode(): Promise<TestNode> {
  const t = await makeNode();
  await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
  await fs.writeFile(path.join(t.root, PROTECTED), OPERATORS);
  await fs.symlink('etc/app', path.join(t.root, 'conf'));
  return t;
}

const onDisk = (t: TestNode, rel = PROTECTED) => fs.readFile(path.join(t.root, rel), 'utf8').catch(() => null);
const inode = async (t: TestNode, rel = PROTECTED) => (await fs.stat(path.join(t.root, rel))).ino;
const observeAt = (t: TestNode, resources: ObserveRequest['resources'], generation = 12) =>
  runActivity((r: ObserveRequest) => t.acts.observe(r), { node: t.node, resources, generation });

describe('attack: a symlinked parent directory as a second name for a protected file', () => {
  it('an override of etc/app/app.conf protects it when desired state spells it conf/app.conf', async () => {
    const t = await aliasedNode();
    await t.writeConfig({ overrides: { [`file:${PROTECTED}`]: OPS } });
    const before = await inode(t);
    const seen = await t.observe({ config: file('conf/app.conf') });
    // Before the fix: no override and no protection under "config"; the write below went through.
    expect(seen.overrides.config).toEqual(OPS);
    expect(seen.protections.config).toEqual([
      { entry: `overrides.file:${PROTECTED}`, kind: 'override', target: `file:${PROTECTED}` },
    ]);
    expect(seen.resources.config.detail).toMatchObject({ path: 'conf/app.conf', identity: `file:${PROTECTED}` });
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'conf/app.conf', 'from desired state\n')),
      'OperatorOwnedRefusal',
    );
    expect(failure.message).toMatch(
      /"config" writes file:etc\/app\/app\.conf \(spelled file:conf\/app\.conf\), which is operator-owned/,
    );
    expect(await onDisk(t)).toBe(OPERATORS);
    expect(await inode(t)).toBe(before);
  });

  it('an observe entry of etc/app/app.conf holds against conf/app.conf', async () => {
    const t = await aliasedNode();
    await t.writeConfig({ resources: { [`file:${PROTECTED}`]: 'observe' } });
    const seen = await t.observe({ config: file('conf/app.conf') });
    expect(seen.resource_modes).toEqual({ config: 'observe' });
    await expectRefusal(t.apply(fileAction(t.node, 'config', 'conf/app.conf', 'from desired state\n')), 'ObserveModeRefusal');
    expect(await onDisk(t)).toBe(OPERATORS);
  });

  it('a yield recorded for etc/app/app.conf holds against conf/app.conf, and one recorded through the alias holds too', async () => {
    const t = await aliasedNode();
    const intent = n24(12);
    const direct = { ...intent, resources: { config: file(PROTECTED) } };
    const yieldOf = (i: typeof intent) =>
      decisionRequest(i, 'config', { kind: 'yield', by: 'oncall', at: new Date().toISOString(), note: 'theirs' })!;
    await t.acts.recordDecision(yieldOf(direct));
    const seen = await t.observe({ config: file('conf/app.conf') });
    expect(seen.decisions.config).toMatchObject({ kind: 'yield', target: `file:${PROTECTED}` });
    await expectRefusal(t.apply(fileAction(t.node, 'config', 'conf/app.conf', 'from desired state\n')), 'OperatorOwnedRefusal');
    expect(await onDisk(t)).toBe(OPERATORS);

    // The other way round: yielded as spelled through the alias, written by its real path.
    const u = await aliasedNode();
    const aliased = { ...intent, resources: { config: file('conf/app.conf') } };
    const held = await u.acts.recordDecision(yieldOf(aliased));
    expect(held.holds?.target).toBe(`file:${PROTECTED}`);
    await expectRefusal(u.apply(fileAction(u.node, 'other', PROTECTED, 'from desired state\n')), 'OperatorOwnedRefusal');
    expect(await onDisk(u)).toBe(OPERATORS);
  });

  it('a chain of symlinks with no ".." (a -> b, b -> etc) is the same file too', async () => {
    const t = await aliasedNode();
    await fs.symlink('etc', path.join(t.root, 'b'));
    await fs.symlink('b', path.join(t.root, 'a'));
    await t.writeConfig({ overrides: { [`file:${PROTECTED}`]: OPS } });
    const seen = await t.observe({ config: file('a/app/app.conf') });
    expect(seen.overrides.config).toEqual(OPS);
    await expectRefusal(t.apply(fileAction(t.node, 'config', 'a/app/app.conf', 'from desired state\n')), 'OperatorOwnedRefusal');
    // And the protection itself may be spelled through the chain: it protects the real file.
    const u = await aliasedNode();
    await fs.symlink('etc', path.join(u.root, 'b'));
    await fs.symlink('b', path.join(u.root, 'a'));
    await u.writeConfig({ overrides: { 'file:a/app/app.conf': OPS } });
    await expectRefusal(u.apply(fileAction(u.node, 'config', PROTECTED, 'from desired state\n')), 'OperatorOwnedRefusal');
    expect([await onDisk(t), await onDisk(u)]).toEqual([OPERATORS, OPERATORS]);
  });

  it('a symlink created between the observe and the apply: the apply judges where the write lands then', async () => {
    // The operator protects a file that does not exist yet: Datum must not create it. Desired
    // state writes conf/app.conf, and conf is an ordinary empty directory when observed.
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.mkdir(path.join(t.root, 'conf'));
    await t.writeConfig({ resources: { [`file:${PROTECTED}`]: 'observe' } });
    const seen = await t.observe({ config: file('conf/app.conf') });
    expect(seen.resource_modes).toEqual({});
    expect(seen.resources.config.marker).toBe('absent');
    const planned = fileAction(t.node, 'config', 'conf/app.conf', 'from desired state\n', { observed_marker: 'absent' });
    // The local writer swaps conf for a symlink to the protected file's directory.
    await fs.rmdir(path.join(t.root, 'conf'));
    await fs.symlink('etc/app', path.join(t.root, 'conf'));
    // Before the fix: the marker was "absent" at both names, so the write created etc/app/app.conf.
    await expectRefusal(t.apply(planned), 'ObserveModeRefusal');
    expect(await onDisk(t)).toBeNull();
  });

  it('at the write itself, a path that now leads elsewhere than where protections were judged writes nothing', async () => {
    // The last line of defence, for a swap after the apply's checks and before its write: the
    // provider is called as the apply calls it, with the identity the checks judged (conf/app.conf
    // while conf was a directory), on the tree as the local writer has reshaped it since.
    const t = await aliasedNode();
    const content = 'from desired state\n';
    const spec = { path: 'conf/app.conf', content, sha256: sha256(content) };
    const ctx = { node: t.node, root: await fs.realpath(t.root), judged: 'file:conf/app.conf' };
    const write = applyFileWrite(
      ctx,
      'config',
      spec,
      () => new Date(),
      (step) => step(undefined),
    );
    await expect(write).rejects.toMatchObject({ type: 'PathOutsideRoot' });
    await expect(write).rejects.toThrow(/now leads to file:etc\/app\/app\.conf, not to file:conf\/app\.conf where Datum judged/);
    expect(await onDisk(t)).toBe(OPERATORS);
    expect(await fs.readdir(path.join(t.root, 'etc/app'))).toEqual(['app.conf']);
  });

  it('two resources spelling one file (etc/app/app.conf and conf/app.conf) are each obstructed and refused', async () => {
    const t = await aliasedNode();
    const seen = await observeAt(t, { a: file(PROTECTED, 'one\n'), b: file('conf/app.conf', 'two\n') });
    expect(seen.resources.a.obstruction).toMatch(
      /"a" writes file:etc\/app\/app\.conf, the same file as "b": one target has one owner/,
    );
    expect(seen.resources.b.obstruction).toMatch(
      /"b" writes file:etc\/app\/app\.conf \(spelled file:conf\/app\.conf\), the same file as "a"/,
    );
    // A plan that writes them anyway (a forged or an older workflow) is refused at the agent.
    const failure = await expectRefusal(t.apply(fileAction(t.node, 'b', 'conf/app.conf', 'two\n')), 'InvalidAction');
    expect(failure.message).toMatch(/which "a" of the same generation also writes under another spelling/);
    await expectRefusal(t.apply(fileAction(t.node, 'a', PROTECTED, 'one\n')), 'InvalidAction');
    expect(await onDisk(t)).toBe(OPERATORS);
  });
});
