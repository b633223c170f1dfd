// File and flag providers: observe → apply → observe round trips on a real directory, the change
// markers each leaves, backups, undeclared flags and the obstructions that make a repair
// destructive.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { desiredValue, fileBytes, type ResourceSpec } from '../../src/domain';
import { action, cleanupNodes, expectRefusal, fileAction, makeNode, sha256 } from './helpers';

afterEach(cleanupNodes);

const config: ResourceSpec = { type: 'file', path: 'etc/app/config.json', content: { workers: 8 } };
const maintenance: ResourceSpec = { type: 'flag', value: false };

describe('file provider', () => {
  it('observes an absent file as null with the marker "absent"', async () => {
    const t = await makeNode();
    const obs = await t.observe({ config });
    expect(obs.resources.config).toMatchObject({ type: 'file', value: null, marker: 'absent', obstruction: null });
  });

  it('writes atomically, then observes exactly the value desiredValue() expects, with the marker the write left', async () => {
    const t = await makeNode();
    const ev = await t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }));
    expect(ev).toMatchObject({ resource_key: 'config', action: 'file.write', outcome: 'applied', refusal: null });
    expect(ev.detail).toMatch(/wrote \d+ bytes .* to etc\/app\/config\.json where no file was\./);

    const bytes = await fs.readFile(path.join(t.root, 'etc/app/config.json'), 'utf8');
    expect(bytes).toBe(fileBytes({ workers: 8 }));
    // Atomically: written beside and renamed into place, so no temporary file is left next to it.
    expect(await fs.readdir(path.join(t.root, 'etc/app'))).toEqual(['config.json']);
    const st = await fs.lstat(path.join(t.root, 'etc/app/config.json'));
    // mtime, inode, size, ctime and the bytes' digest: a writer that restores mtime still moves it.
    expect(ev.marker_after).toBe(`file:${st.mtimeMs}:${st.ino}:${st.size}:${st.ctimeMs}:${sha256(bytes).slice(0, 16)}`);

    const obs = await t.observe({ config });
    expect(obs.resources.config.value).toEqual(desiredValue('config', { config }));
    expect(obs.resources.config.marker).toBe(ev.marker_after);
    expect(obs.resources.config.detail).toMatchObject({ kind: 'regular file', path: 'etc/app/config.json' });
  });

  it('keeps the previous content under .datum/backup/ and moves the marker when it replaces a file', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(t.root, 'etc/app/config.json'), '{"workers": 2}\n');
    const before = (await t.observe({ config })).resources.config;
    expect(before.value).toBe(sha256('{"workers": 2}\n'));

    const ev = await t.apply(
      fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }, { observed_marker: before.marker }),
    );
    expect(ev.marker_after).not.toBe(before.marker);
    const backups = await fs.readdir(path.join(t.root, '.datum/backup/etc/app'));
    expect(backups).toHaveLength(1);
    expect(backups[0]).toMatch(/^config\.json\.\d{4}-\d\d-\d\dT/);
    expect(await fs.readFile(path.join(t.root, '.datum/backup/etc/app', backups[0]), 'utf8')).toBe('{"workers": 2}\n');
    expect(ev.detail).toContain('kept at .datum/backup/etc/app/config.json.');
  });

  it('sees another writer as a moved marker', async () => {
    const t = await makeNode();
    const ev = await t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }));
    await fs.writeFile(path.join(t.root, 'etc/app/config.json'), '{"workers": 1}\n');
    const obs = await t.observe({ config });
    expect(obs.resources.config.marker).not.toBe(ev.marker_after);
    expect(obs.resources.config.value).toBe(sha256('{"workers": 1}\n'));
  });

  it('reports a directory at the file path as an obstruction and refuses to replace it (DestructiveActionRefusal)', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app/config.json'), { recursive: true });
    await fs.writeFile(path.join(t.root, 'etc/app/config.json/keep.txt'), 'precious');

    const obs = await t.observe({ config });
    expect(obs.resources.config.value).toBeNull();
    expect(obs.resources.config.obstruction).toMatch(/"etc\/app\/config\.json" is a directory, not a regular file/);

    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 })),
      'DestructiveActionRefusal',
    );
    expect(failure.message).toMatch(
      /is a directory, not a regular file; writing the file would replace it .* — fix: move "etc\/app\/config\.json" away by hand/,
    );
    expect(await fs.readFile(path.join(t.root, 'etc/app/config.json/keep.txt'), 'utf8')).toBe('precious');
  });

  it('reports a file where a parent directory should be as an obstruction and refuses', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc'));
    await fs.writeFile(path.join(t.root, 'etc/app'), 'a file, not a directory');
    const obs = await t.observe({ config });
    expect(obs.resources.config.obstruction).toMatch(/needs "etc\/app" to be a directory, but it is a regular file/);
    await expectRefusal(t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 })), 'DestructiveActionRefusal');
    expect(await fs.readFile(path.join(t.root, 'etc/app'), 'utf8')).toBe('a file, not a directory');
  });

  it('refuses a file.write whose content does not match its sha256 (InvalidAction)', async () => {
    const t = await makeNode();
    const a = action(t.node, 'config', 'file.write', { path: 'etc/app/config.json', content: 'x', sha256: sha256('y') });
    await expectRefusal(t.apply(a), 'InvalidAction');
  });

  it("refuses a file path inside Datum's own entries (InvalidAction)", async () => {
    const t = await makeNode();
    const failure = await expectRefusal(t.apply(fileAction(t.node, 'config', '.datum/fence.json', '{}')), 'InvalidAction');
    expect(failure.message).toContain('which Datum manages itself');
  });
});

describe('flag provider', () => {
  it('stores the value at flags/<name>.json and observes it back, with the marker the write left', async () => {
    const t = await makeNode();
    expect((await t.observe({ maintenance })).resources.maintenance).toMatchObject({ value: null, marker: 'absent' });

    const ev = await t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: false }));
    expect(ev.detail).toBe('set flag maintenance to false in flags/maintenance.json.');
    expect(JSON.parse(await fs.readFile(path.join(t.root, 'flags/maintenance.json'), 'utf8'))).toBe(false);

    const obs = await t.observe({ maintenance });
    expect(obs.resources.maintenance).toMatchObject({ type: 'flag', value: false, marker: ev.marker_after, obstruction: null });
    expect(obs.resources.maintenance.value).toEqual(desiredValue('maintenance', { maintenance }));
  });

  it('writes structured values and keeps the previous document', async () => {
    const t = await makeNode();
    await t.apply(action(t.node, 'limits', 'flag.write', { name: 'limits', value: { rps: 10 } }));
    const ev = await t.apply(action(t.node, 'limits', 'flag.write', { name: 'limits', value: { rps: 20, burst: [1, 2] } }));
    expect(ev.detail).toContain('replacing the previous document');
    const obs = await t.observe({ limits: { type: 'flag', value: { rps: 20, burst: [1, 2] } } });
    expect(obs.resources.limits.value).toEqual({ rps: 20, burst: [1, 2] });
    const backups = await fs.readdir(path.join(t.root, '.datum/backup/flags'));
    expect(backups).toHaveLength(1);
    expect(JSON.parse(await fs.readFile(path.join(t.root, '.datum/backup/flags', backups[0]), 'utf8'))).toEqual({ rps: 10 });
  });

  it('reports an unparseable flag file as null with its parse error and a real marker', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'flags'));
    await fs.writeFile(path.join(t.root, 'flags/maintenance.json'), 'not json');
    const obs = await t.observe({ maintenance });
    expect(obs.resources.maintenance.value).toBeNull();
    expect(obs.resources.maintenance.marker).toMatch(/^file:/);
    expect(obs.resources.maintenance.detail.parse_error).toMatch(/not valid JSON/);
  });

  it('lists every flags/*.json not requested as undeclared', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'flags'));
    await fs.writeFile(path.join(t.root, 'flags/maintenance.json'), 'true\n');
    await fs.writeFile(path.join(t.root, 'flags/canary.json'), '{"pct": 5}\n');
    await fs.writeFile(path.join(t.root, 'flags/notes.txt'), 'not a flag');
    const obs = await t.observe({ maintenance });
    expect(obs.resources.maintenance.value).toBe(true);
    expect(obs.undeclared).toEqual([
      { resource_key: 'canary', type: 'flag', value: { pct: 5 }, marker: expect.stringMatching(/^file:/) as string },
    ]);
  });

  it('refuses a flag.write whose name is not its resource key (InvalidAction) or leaves flags/ (PathOutsideRoot)', async () => {
    const t = await makeNode();
    await expectRefusal(t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'other', value: 1 })), 'InvalidAction');
    await expectRefusal(
      t.apply(action(t.node, 'maintenance', 'flag.write', { name: '../../evil', value: 1 })),
      'PathOutsideRoot',
    );
  });
});
