// The directory provider, and mode, owner and group on files: observe → plan → apply → observe
// round trips on real directories through the real agent activities, with the plan the domain
// makes from each observation. Hand-made drift (chmod, chown) repaired, observe mode and an
// operator's override left alone, a file where a directory should be never replaced, a file's
// attributes set in place with its content and inode kept, the watch seeing a chmod, and `datum
// import` declaring what is there. Owners other than the agent's own user need root: those tests
// run where the agent can give inodes away, as it does in production.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  desiredValue,
  fileBytes,
  jsonEqual,
  type Assessment,
  type AuthorizedAction,
  type BoundIntent,
  type Observation,
  type ResourceSpec,
} from '../../src/domain';
import { kindOf } from '../../src/domain/resources';
import { PROVIDERS } from '../../src/agent/providers';
import { accountName } from '../../src/agent/users';
import { action, cleanupNodes, expectRefusal, makeNode, sha256, type TestNode } from './helpers';

afterEach(cleanupNodes);

const asRoot = process.getuid?.() === 0;
const provenance = { approved_by: 'oncall', reason: 'disk migration CHG-77', since: '2026-11-28T10:00:00Z' };

const data: ResourceSpec = { type: 'directory', path: 'srv/data', mode: '0750', owner: 'daemon', group: 'adm' };
const plain: ResourceSpec = { type: 'directory', path: 'srv/plain' };

/** The action the domain plans for `key` from this observation, as the workflow sends it (the marker it saw). */
function planFrom(t: TestNode, key: string, spec: ResourceSpec, obs: Observation): AuthorizedAction {
  const seen = obs.resources[key];
  const planned = kindOf(spec).plan({ resource_key: key, observed: seen } as Assessment, spec, {} as BoundIntent);
  return action(t.node, key, planned.action, planned.spec, { observed_marker: seen.marker });
}

/** mode (four octal digits), uid and gid of a path, never following a link. */
async function attributes(p: string) {
  const st = await fs.lstat(p);
  return { mode: (st.mode & 0o7777).toString(8).padStart(4, '0'), uid: st.uid, gid: st.gid, ino: st.ino };
}

const converged = (obs: Observation, key: string, resources: Record<string, ResourceSpec>) =>
  jsonEqual(obs.resources[key].value, desiredValue(key, resources));

describe.runIf(asRoot)('directory provider', () => {
  it('creates an absent directory with its mode, owner and group, and then observes exactly the desired value', async () => {
    const t = await makeNode();
    const before = await t.observe({ data });
    expect(before.resources.data).toMatchObject({ type: 'directory', value: null, marker: 'absent', obstruction: null });

    const plan = planFrom(t, 'data', data, before);
    expect(plan).toMatchObject({
      action: 'directory.ensure',
      spec: { path: 'srv/data', mode: '0750', owner: 'daemon', group: 'adm' },
    });
    const ev = await t.apply(plan);
    expect(ev).toMatchObject({
      outcome: 'applied',
      detail: 'created the directory srv/data with mode 0750, owner daemon, group adm.',
    });
    expect(await attributes(path.join(t.root, 'srv/data'))).toMatchObject({ mode: '0750', uid: 1, gid: 4 });

    const after = await t.observe({ data });
    expect(after.resources.data.value).toEqual({ mode: '0750', owner: 'daemon', group: 'adm' });
    expect(converged(after, 'data', { data })).toBe(true);
    expect(after.resources.data.marker).toBe(ev.marker_after);
  });

  it('observes a directory that declares nothing as {}, and ids in the spelling the spec used', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'srv/plain'), { recursive: true });
    await fs.mkdir(path.join(t.root, 'srv/byid'));
    await fs.chown(path.join(t.root, 'srv/byid'), 1, 4);
    const byid: ResourceSpec = { type: 'directory', path: 'srv/byid', owner: '1', group: '4' };
    const obs = await t.observe({ plain, byid });
    expect(obs.resources.plain.value).toEqual({});
    expect(obs.resources.byid.value).toEqual({ owner: '1', group: '4' });
    expect(converged(obs, 'plain', { plain })).toBe(true);
    expect(converged(obs, 'byid', { byid })).toBe(true);
    // The same directory declared by name reads back as the name: what the spec wrote is what is compared.
    const named: ResourceSpec = { type: 'directory', path: 'srv/byid', owner: 'daemon', group: 'adm' };
    expect((await t.observe({ named })).resources.named.value).toEqual({ owner: 'daemon', group: 'adm' });
  });

  it('repairs a chmod and a chown made by hand on the same inode, and leaves what is inside alone', async () => {
    const t = await makeNode();
    await t.apply(planFrom(t, 'data', data, await t.observe({ data })));
    const dir = path.join(t.root, 'srv/data');
    await fs.writeFile(path.join(dir, 'keep.db'), 'the service data');
    const converged1 = await t.observe({ data });

    await fs.chmod(dir, 0o777);
    await fs.chown(dir, 0, 0);
    const drifted = await t.observe({ data });
    expect(drifted.resources.data.value).toEqual({ mode: '0777', owner: 'root', group: 'root' });
    expect(drifted.resources.data.marker).not.toBe(converged1.resources.data.marker);

    const before = await attributes(dir);
    const ev = await t.apply(planFrom(t, 'data', data, drifted));
    expect(ev.detail).toBe(`set mode 0750, owner daemon, group adm on the directory srv/data (inode ${before.ino} kept).`);
    expect(await attributes(dir)).toEqual({ mode: '0750', uid: 1, gid: 4, ino: before.ino });
    expect(await fs.readFile(path.join(dir, 'keep.db'), 'utf8')).toBe('the service data');
    expect(converged(await t.observe({ data }), 'data', { data })).toBe(true);
  });

  it('does not see a file written inside the directory as a change of the directory (its marker is not its times)', async () => {
    const t = await makeNode();
    await t.apply(planFrom(t, 'data', data, await t.observe({ data })));
    const seen = (await t.observe({ data })).resources.data.marker;
    const stamp = await PROVIDERS.directory.watch.marker(t.root, 'data', data, await t.config());
    await fs.writeFile(path.join(t.root, 'srv/data/log.txt'), 'a line\n');
    expect((await t.observe({ data })).resources.data.marker).toBe(seen);
    expect(await PROVIDERS.directory.watch.marker(t.root, 'data', data, await t.config())).toBe(stamp);
    // A chmod by hand moves both: the watch wakes, and compare-and-swap sees another writer.
    await fs.chmod(path.join(t.root, 'srv/data'), 0o700);
    expect(await PROVIDERS.directory.watch.marker(t.root, 'data', data, await t.config())).not.toBe(stamp);
    expect((await t.observe({ data })).resources.data.marker).not.toBe(seen);
  });

  it('in observe mode reports the drift and the agent refuses the ensure, changing nothing', async () => {
    const t = await makeNode({ mode: 'observe' });
    await fs.mkdir(path.join(t.root, 'srv/data'), { recursive: true, mode: 0o777 });
    await fs.chmod(path.join(t.root, 'srv/data'), 0o777);
    const obs = await t.observe({ data });
    expect(obs.mode).toBe('observe');
    expect(obs.resources.data.value).toEqual({ mode: '0777', owner: 'root', group: 'root' });
    const before = await attributes(path.join(t.root, 'srv/data'));
    await expectRefusal(t.apply(planFrom(t, 'data', data, obs)), 'ObserveModeRefusal');
    expect(await attributes(path.join(t.root, 'srv/data'))).toEqual(before);
  });

  it('never touches a directory an operator owns by its target, under whatever key', async () => {
    const t = await makeNode();
    await t.writeConfig({ overrides: { 'directory:srv/data': provenance } });
    await fs.mkdir(path.join(t.root, 'srv/data'), { recursive: true });
    await fs.chmod(path.join(t.root, 'srv/data'), 0o777);
    const renamed = { store: data };
    const obs = await t.observe(renamed);
    expect(obs.overrides).toMatchObject({ store: provenance });
    const before = await attributes(path.join(t.root, 'srv/data'));
    const refused = await expectRefusal(t.apply(planFrom(t, 'store', data, obs)), 'OperatorOwnedRefusal');
    expect(refused.message).toMatch(/"store" writes directory:srv\/data, which is operator-owned/);
    expect(await attributes(path.join(t.root, 'srv/data'))).toEqual(before);
  });

  it('reports a file where the directory should be as an obstruction: never replaced, the repair destructive', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'srv'));
    await fs.writeFile(path.join(t.root, 'srv/data'), 'someone keeps a file here');
    const obs = await t.observe({ data });
    expect(obs.resources.data.value).toBeNull();
    expect(obs.resources.data.obstruction).toBe(
      '"srv/data" is a regular file, not a directory; making it the directory would destroy what is there — fix: move "srv/data" away by hand if it is not needed, then let Datum make the directory',
    );
    // Sent anyway (a forged or stale plan): refused, and the file is still there.
    const failure = await expectRefusal(t.apply(planFrom(t, 'data', data, obs)), 'DestructiveActionRefusal');
    expect(failure.message).toMatch(/"srv\/data" is a regular file, not a directory; making it the directory would destroy/);
    await expectRefusal(t.apply(action(t.node, 'data', 'directory.delete', { path: 'srv/data' })), 'DestructiveActionRefusal');
    expect(await fs.readFile(path.join(t.root, 'srv/data'), 'utf8')).toBe('someone keeps a file here');
  });

  it('refuses an owner the host does not have, naming it, and creates nothing', async () => {
    const t = await makeNode();
    const ghost: ResourceSpec = { type: 'directory', path: 'srv/ghost', owner: 'no-such-user-x' };
    const obs = await t.observe({ ghost });
    const failure = await expectRefusal(t.apply(planFrom(t, 'ghost', ghost, obs)), 'InvalidAction');
    expect(failure.message).toMatch(
      /this host has no user named "no-such-user-x" \(getent passwd no-such-user-x finds none\) — fix: create the user/,
    );
    await expect(fs.lstat(path.join(t.root, 'srv/ghost'))).rejects.toThrow(/ENOENT/);
  });

  it('refuses a changed directory at the moment of the change (MarkerMoved), leaving the other writer’s mode', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'srv/data'), { recursive: true });
    const obs = await t.observe({ data });
    await fs.chmod(path.join(t.root, 'srv/data'), 0o711); // another writer, between plan and write
    await expectRefusal(t.apply(planFrom(t, 'data', data, obs)), 'MarkerMoved');
    expect((await attributes(path.join(t.root, 'srv/data'))).mode).toBe('0711');
  });
});

describe.runIf(asRoot)('file mode, owner and group', () => {
  const secret: ResourceSpec = { type: 'file', path: 'etc/app/secret.key', content: 'k3y\n', mode: '0600', owner: 'daemon' };
  const file = path.join('etc/app/secret.key');

  it('writes a new file with its declared attributes and observes {sha256, mode, owner}', async () => {
    const t = await makeNode();
    const obs = await t.observe({ secret });
    expect(obs.resources.secret.value).toBeNull();
    const plan = planFrom(t, 'secret', secret, obs);
    expect(plan).toMatchObject({ action: 'file.write', spec: { path: file, mode: '0600', owner: 'daemon' } });
    const ev = await t.apply(plan);
    expect(ev.detail).toMatch(
      /^wrote 4 bytes \(sha256 [0-9a-f]{12}…\) to etc\/app\/secret\.key with mode 0600, owner daemon where no file was\.$/,
    );
    expect(await attributes(path.join(t.root, file))).toMatchObject({ mode: '0600', uid: 1 });
    const after = await t.observe({ secret });
    expect(after.resources.secret.value).toEqual({ sha256: sha256('k3y\n'), mode: '0600', owner: 'daemon' });
    expect(converged(after, 'secret', { secret })).toBe(true);
  });

  it('sets attributes alone in place (file.attributes): the content and the inode kept, no backup taken', async () => {
    const t = await makeNode();
    await t.apply(planFrom(t, 'secret', secret, await t.observe({ secret })));
    await fs.chmod(path.join(t.root, file), 0o644);
    await fs.chown(path.join(t.root, file), 0, 0);
    const before = await attributes(path.join(t.root, file));
    const drifted = await t.observe({ secret });
    expect(drifted.resources.secret.value).toEqual({ sha256: sha256('k3y\n'), mode: '0644', owner: 'root' });

    const plan = planFrom(t, 'secret', secret, drifted);
    expect(plan).toMatchObject({
      action: 'file.attributes',
      spec: { path: file, sha256: sha256('k3y\n'), mode: '0600', owner: 'daemon' },
    });
    expect(plan.spec).not.toHaveProperty('content');
    const ev = await t.apply(plan);
    expect(ev.detail).toBe(
      `set mode 0600, owner daemon on ${file} in place (content sha256 ${sha256('k3y\n').slice(0, 12)}… and inode ${before.ino} kept).`,
    );
    expect(await attributes(path.join(t.root, file))).toEqual({ mode: '0600', uid: 1, gid: before.gid, ino: before.ino });
    expect(await fs.readFile(path.join(t.root, file), 'utf8')).toBe('k3y\n');
    await expect(fs.readdir(path.join(t.root, '.datum/backup'))).rejects.toThrow(/ENOENT/);
    const after = await t.observe({ secret });
    expect(converged(after, 'secret', { secret })).toBe(true);
    expect(after.resources.secret.marker).toBe(ev.marker_after);
  });

  it('writes changed content with the declared mode already on the new inode', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(t.root, file), 'old key\n', { mode: 0o644 });
    const obs = await t.observe({ secret });
    const plan = planFrom(t, 'secret', secret, obs);
    expect(plan.action).toBe('file.write');
    await t.apply(plan);
    expect(await attributes(path.join(t.root, file))).toMatchObject({ mode: '0600', uid: 1 });
    expect(await fs.readFile(path.join(t.root, file), 'utf8')).toBe('k3y\n');
    // The replaced content is kept, with the mode it had.
    const [backup] = await fs.readdir(path.join(t.root, '.datum/backup/etc/app'));
    expect(await fs.readFile(path.join(t.root, '.datum/backup/etc/app', backup), 'utf8')).toBe('old key\n');
  });

  it('keeps the plain sha256 value for a file that declares no attribute, whatever its mode', async () => {
    const t = await makeNode();
    const config: ResourceSpec = { type: 'file', path: 'etc/app/config.json', content: { workers: 8 } };
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(t.root, 'etc/app/config.json'), fileBytes({ workers: 8 }), { mode: 0o666 });
    const obs = await t.observe({ config });
    expect(obs.resources.config.value).toBe(sha256(fileBytes({ workers: 8 })));
    expect(converged(obs, 'config', { config })).toBe(true);
  });

  it('the watch sees a chmod made by hand on a managed file', async () => {
    const t = await makeNode();
    await t.apply(planFrom(t, 'secret', secret, await t.observe({ secret })));
    const stamp = await PROVIDERS.file.watch.marker(t.root, 'secret', secret, await t.config());
    await fs.chmod(path.join(t.root, file), 0o640);
    expect(await PROVIDERS.file.watch.marker(t.root, 'secret', secret, await t.config())).not.toBe(stamp);
  });
});

describe('a directory target is what it resolves to, not how it is spelled', () => {
  it('an override of directory:etc/app/data protects it spelled through a symlinked parent', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app/data'), { recursive: true });
    await fs.chmod(path.join(t.root, 'etc/app/data'), 0o700);
    await fs.symlink('etc/app', path.join(t.root, 'conf'));
    await t.writeConfig({ overrides: { 'directory:etc/app/data': provenance } });
    const respelled: ResourceSpec = { type: 'directory', path: 'conf/data', mode: '0777' };
    const obs = await t.observe({ respelled });
    expect(obs.resources.respelled.detail).toMatchObject({ identity: 'directory:etc/app/data' });
    expect(obs.overrides).toMatchObject({ respelled: provenance });
    const refused = await expectRefusal(t.apply(planFrom(t, 'respelled', respelled, obs)), 'OperatorOwnedRefusal');
    expect(refused.message).toMatch(/writes directory:etc\/app\/data \(spelled directory:conf\/data\), which is operator-owned/);
    expect((await attributes(path.join(t.root, 'etc/app/data'))).mode).toBe('0700');
  });

  it('a file and a directory that are one place through a symlink are each obstructed', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.symlink('etc/app', path.join(t.root, 'conf'));
    const resources: Record<string, ResourceSpec> = {
      dir: { type: 'directory', path: 'etc/app/x' },
      file: { type: 'file', path: 'conf/x', content: 'x' },
    };
    const obs = await t.observe(resources);
    expect(obs.resources.dir.obstruction).toMatch(
      /^"dir" writes directory:etc\/app\/x, the same path as "file": one target has one owner/,
    );
    expect(obs.resources.file.obstruction).toMatch(
      /^"file" writes file:etc\/app\/x \(spelled file:conf\/x\), the same path as "dir"/,
    );
  });
});

describe('datum import of a directory and a file', () => {
  it('declares what is there, so the first observation of the spec finds no drift', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'srv/share'), { recursive: true });
    await fs.chmod(path.join(t.root, 'srv/share'), 0o2775);
    await fs.mkdir(path.join(t.root, 'etc'));
    await fs.writeFile(path.join(t.root, 'etc/motd'), 'welcome\n', { mode: 0o640 });
    await fs.chmod(path.join(t.root, 'etc/motd'), 0o640);
    const ctx = { node: t.node, root: t.root };
    const dir = await PROVIDERS.directory.importSpec!(ctx, 'share', 'srv/share');
    const me = {
      owner: await accountName('passwd', process.getuid?.() ?? 0),
      group: await accountName('group', process.getgid?.() ?? 0),
    };
    expect(dir).toEqual({ spec: { type: 'directory', path: 'srv/share', mode: '2775', ...me } });
    const motd = await PROVIDERS.file.importSpec!(ctx, 'motd', 'etc/motd');
    expect(motd).toEqual({ spec: { type: 'file', path: 'etc/motd', content: 'welcome\n', mode: '0640', ...me } });

    const resources = { share: (dir as { spec: ResourceSpec }).spec, motd: (motd as { spec: ResourceSpec }).spec };
    const obs = await t.observe(resources);
    expect(converged(obs, 'share', resources)).toBe(true);
    expect(converged(obs, 'motd', resources)).toBe(true);
  });

  it('says why it cannot declare binary content, content over the cap, a setuid file or nothing at all', async () => {
    const t = await makeNode();
    const ctx = { node: t.node, root: t.root };
    await fs.writeFile(path.join(t.root, 'blob'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x00, 0xff]));
    await fs.writeFile(path.join(t.root, 'huge.txt'), 'x'.repeat(64 * 1024 + 1));
    await fs.writeFile(path.join(t.root, 'tool'), '#!/bin/sh\n');
    await fs.chmod(path.join(t.root, 'tool'), 0o4755);
    const problem = async (name: string, type: 'file' | 'directory' = 'file') =>
      ((await PROVIDERS[type].importSpec!(ctx, 'k', name)) as { problem: string }).problem;
    expect(await problem('blob')).toMatch(
      /"blob" is binary \(not UTF-8 text, or it holds NUL bytes\), and desired state holds text — fix: ship it in a release artifact/,
    );
    expect(await problem('huge.txt')).toMatch(
      /"huge\.txt" holds 65537 bytes, more than the 64 KiB datum import writes into desired state .* — fix: ship it in a release artifact/,
    );
    expect(await problem('tool')).toMatch(
      /"tool" cannot be declared as it is: mode "4755" sets the setuid bit on a file: a setuid or setgid file runs with its owner's or group's rights whoever starts it, and Datum never makes one/,
    );
    expect(await problem('missing')).toBe('nothing is at "missing"');
    expect(await problem('blob', 'directory')).toBe('"blob" is a regular file, not a directory');
  });
});
