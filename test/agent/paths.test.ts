// Nothing leaves the node root: absolute and ".." paths, a symlinked directory inside the root
// that points out of it, and archives with "../evil" entries or outward symlinks and hardlinks
// are refused with PathOutsideRoot — and not one byte lands outside the root.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stopServices } from '../../src/agent/services';
import type { ResourceSpec } from '../../src/domain';
import {
  action,
  cleanupNodes,
  expectRefusal,
  fileAction,
  makeNode,
  releaseAction,
  snapshot,
  tarGz,
  writeArtifact,
  type RawEntry,
  type TestNode,
} from './helpers';

afterEach(cleanupNodes);

/** Everything in the test's base dir except the root itself: the "outside" that must not change. */
async function outsideRoot(t: TestNode): Promise<Record<string, string>> {
  const all = await snapshot(t.base);
  return Object.fromEntries(Object.entries(all).filter(([rel]) => rel !== 'root' && !rel.startsWith(`root${path.sep}`)));
}

async function expectNothingOutside(t: TestNode, attempt: () => Promise<unknown>, type = 'PathOutsideRoot') {
  const before = await outsideRoot(t);
  const failure = await expectRefusal(attempt(), type);
  expect(await outsideRoot(t)).toEqual(before);
  return failure;
}

describe('file paths', () => {
  it.each([
    ['an absolute path', (t: TestNode) => path.join(t.outside, 'evil.txt')],
    ['a ".." path', () => '../outside/evil.txt'],
    ['a ".." in the middle', () => 'etc/../../outside/evil.txt'],
  ])('refuses %s', async (_name, target) => {
    const t = await makeNode();
    const failure = await expectNothingOutside(t, () => t.apply(fileAction(t.node, 'config', target(t), 'evil')));
    expect(failure.message).toMatch(/would leave the node root|could leave the node root/);
  });

  it('refuses to write through a symlinked directory inside the root that points outside', async () => {
    const t = await makeNode();
    await fs.symlink(t.outside, path.join(t.root, 'etc'));
    const failure = await expectNothingOutside(t, () =>
      t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 })),
    );
    expect(failure.message).toContain(`goes through "etc", a symlink to ${t.outside} outside the node root`);
    // Observe does not read through it either: no value from the outside file, and the reason
    // in detail (the planned write is then refused as PathOutsideRoot, which the ledger records).
    const obs = await t.observe({ config: { type: 'file', path: 'etc/precious.txt', content: 'x' } });
    expect(obs.resources.config).toMatchObject({
      value: null,
      obstruction: null,
      detail: { refusal: 'PathOutsideRoot', path_error: expect.stringContaining('outside the node root') as string },
    });
  });

  it('refuses a relative symlink that climbs out, even several levels down', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.symlink('../../../outside', path.join(t.root, 'etc/app/conf.d'));
    await expectNothingOutside(t, () => t.apply(fileAction(t.node, 'config', 'etc/app/conf.d/x.json', 'evil')));
  });

  it('follows a symlinked directory that stays inside the root', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'data/etc'), { recursive: true });
    await fs.symlink('data/etc', path.join(t.root, 'etc'));
    await t.apply(fileAction(t.node, 'config', 'etc/config.json', 'inside'));
    expect(await fs.readFile(path.join(t.root, 'data/etc/config.json'), 'utf8')).toBe('inside');
  });

  it('never writes through a symlink at the file path itself (an obstruction)', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc'));
    await fs.symlink(path.join(t.outside, 'precious.txt'), path.join(t.root, 'etc/config.json'));
    const obs = await t.observe({ config: { type: 'file', path: 'etc/config.json', content: 'x' } });
    expect(obs.resources.config.obstruction).toMatch(/is a symlink, not a regular file/);
    await expectNothingOutside(
      t,
      () => t.apply(fileAction(t.node, 'config', 'etc/config.json', 'evil')),
      'DestructiveActionRefusal',
    );
  });

  it('refuses a flag when flags/ is a symlink out of the root, and does not list what is there', async () => {
    const t = await makeNode();
    await fs.writeFile(path.join(t.outside, 'secret.json'), '"outside"');
    await fs.symlink(t.outside, path.join(t.root, 'flags'));
    await expectNothingOutside(t, () =>
      t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: true })),
    );
    const obs = await t.observe({ maintenance: { type: 'flag', value: true } });
    expect(obs.resources.maintenance.obstruction).toContain('outside the node root');
    expect(obs.undeclared).toEqual([]);
  });

  it("refuses every action when the agent's own .datum/ is a symlink out of the root", async () => {
    const t = await makeNode();
    await fs.symlink(t.outside, path.join(t.root, '.datum'));
    await expectNothingOutside(t, () => t.apply(fileAction(t.node, 'config', 'etc/config.json', 'x')));
    // stopServices (the clean-up) refuses to read service state through it as well.
    await expect(stopServices(t.root)).rejects.toThrow(/goes through "\.datum", a symlink/);
    await fs.rm(path.join(t.root, '.datum'));
  });
});

describe('release archives', () => {
  const cases: Array<[string, (t: TestNode) => RawEntry[], RegExp]> = [
    [
      'a "../evil" entry',
      () => [
        { name: 'server.js', content: 'ok' },
        { name: '../evil', content: 'evil' },
      ],
      /archive entry "\.\.\/evil" has a "\.\." segment/,
    ],
    ['a deep "../../../outside/evil" entry', () => [{ name: '../../../outside/evil', content: 'evil' }], /has a "\.\." segment/],
    ['an absolute entry', (t) => [{ name: path.join(t.outside, 'evil'), content: 'evil' }], /is absolute/],
    [
      'a symlink to an absolute path outside',
      (t) => [{ name: 'escape', type: 'symlink', linkname: t.outside }],
      /is a symlink to .* which is absolute/,
    ],
    [
      'a symlink climbing out',
      () => [{ name: 'escape', type: 'symlink', linkname: '../../../outside' }],
      /which climbs above the release directory/,
    ],
    [
      'a symlink then a file written through it',
      (t) => [
        { name: 'escape', type: 'symlink', linkname: t.outside },
        { name: 'escape/evil', content: 'evil' },
      ],
      /archive entry "escape(\/evil)?"/,
    ],
    [
      'a ".." out of another symlink',
      () => [
        { name: 'here', type: 'symlink', linkname: '.' },
        { name: 'escape', type: 'symlink', linkname: 'here/../../../outside' },
      ],
      /climbs out of another symlink/,
    ],
    [
      'a hardlink to a path outside',
      () => [{ name: 'hard', type: 'hardlink', linkname: '../../../outside/precious.txt' }],
      /is a hardlink to/,
    ],
  ];

  it.each(cases)('refuses %s with PathOutsideRoot before extracting anything', async (_name, entries, message) => {
    const t = await makeNode();
    const art = await writeArtifact(t, 'evil.tgz', tarGz(entries(t)));
    const failure = await expectNothingOutside(t, () => t.apply(releaseAction(t, '6.6', art)));
    expect(failure.message).toMatch(message);
    expect(failure.message).toContain('nothing was unpacked');
    // Nothing was unpacked inside the root either, and current was not switched.
    expect(await fs.readdir(path.join(t.root, 'releases')).catch(() => [])).toEqual([]);
    await expect(fs.lstat(path.join(t.root, 'current'))).rejects.toThrow(/ENOENT/);
  });

  it('refuses a device or fifo entry (InvalidAction)', async () => {
    const t = await makeNode();
    const art = await writeArtifact(t, 'fifo.tgz', tarGz([{ name: 'pipe', type: 'fifo' }]));
    await expectRefusal(t.apply(releaseAction(t, '6.6', art)), 'InvalidAction');
  });

  it('refuses when releases/ is a symlink out of the root', async () => {
    const t = await makeNode();
    await fs.symlink(t.outside, path.join(t.root, 'releases'));
    const art = await writeArtifact(t, 'ok.tgz', tarGz([{ name: 'server.js', content: 'ok' }]));
    await expectNothingOutside(t, () => t.apply(releaseAction(t, '1.0', art)));
  });
});

describe('service paths', () => {
  it('refuses a config path that leaves the root', async () => {
    const t = await makeNode();
    const spec = { command: ['node', 'server.js'], build: '7.4', config_path: '../outside/precious.txt', config_sha256: 'x' };
    await expectNothingOutside(t, () => t.apply(action(t.node, 'app', 'service.start', spec)));
  });

  it('refuses to run a service in a current that points out of the root', async () => {
    const t = await makeNode();
    await fs.symlink(t.outside, path.join(t.root, 'current'));
    const config: ResourceSpec = { type: 'file', path: 'etc/config.json', content: 'x' };
    await t.apply(fileAction(t.node, 'config', config.path, 'x'));
    const spec = { command: ['node', 'server.js'], build: '7.4', config_path: config.path, config_sha256: 'x' };
    await expectNothingOutside(t, () => t.apply(action(t.node, 'app', 'service.start', spec)));
  });
});
