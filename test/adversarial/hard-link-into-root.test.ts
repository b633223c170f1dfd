// Attack: a hard link inside the node root to a file outside it. A hard link is not a symlink:
// nothing on the path leaves the root, and the file inside is the very inode of the one outside,
// so a chmod or chown of it changes the outside file too. Whoever can write the root (a local
// writer) and whoever writes desired state (a mode and owner for that path) would together hand
// any file the agent's user can reach (a host key, /etc/shadow) to another owner or to the world.
// The agent refuses to change the mode or owner of a file with a hard link it did not make
// (PathOutsideRoot, naming the link count), at the plan and again right before fchmod/fchown.
// Changed content is written to a new inode (the name inside the root is replaced), which never
// touches the outside file either.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pauseAttributesForTests } from '../../src/agent/fs/attributes';
import type { Assessment, BoundIntent, Observation, ResourceSpec } from '../../src/domain';
import { kindOf } from '../../src/domain/resources';
import { action, cleanupNodes, expectRefusal, makeNode, sha256, type TestNode } from '../agent/helpers';

afterEach(async () => {
  pauseAttributesForTests(null);
  await cleanupNodes();
});

const asRoot = process.getuid?.() === 0;
const SECRET = 'root:$y$j9T$not-for-anyone:19000:0:99999:7:::\n';

/** What the domain plans for `key` from this observation, as the workflow sends it. */
function planFrom(t: TestNode, key: string, spec: ResourceSpec, obs: Observation) {
  const seen = obs.resources[key];
  const planned = kindOf(spec).plan({ resource_key: key, observed: seen } as Assessment, spec, {} as BoundIntent);
  return action(t.node, key, planned.action, planned.spec, { observed_marker: seen.marker });
}

async function attributes(p: string) {
  const st = await fs.lstat(p);
  return { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
}

/** A 0600 root-owned file outside the root, hard-linked at etc/app/shadow inside it. */
async function linkedIn(): Promise<{ t: TestNode; outsideFile: string; inside: string }> {
  const t = await makeNode();
  const outsideFile = path.join(t.outside, 'shadow');
  await fs.writeFile(outsideFile, SECRET, { mode: 0o600 });
  await fs.chmod(outsideFile, 0o600);
  await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
  const inside = path.join(t.root, 'etc/app/shadow');
  await fs.link(outsideFile, inside);
  return { t, outsideFile, inside };
}

describe.runIf(asRoot)('attack: a hard link into the root to a file outside it', () => {
  const shadow: ResourceSpec = { type: 'file', path: 'etc/app/shadow', content: SECRET, mode: '0644', owner: 'daemon' };

  it('a file resource declaring mode and owner for it: chmod and chown refused, the outside file unchanged', async () => {
    const { t, outsideFile, inside } = await linkedIn();
    const obs = await t.observe({ shadow });
    expect(obs.resources.shadow.value).toEqual({ sha256: sha256(SECRET), mode: '0600', owner: 'root' });
    expect(obs.resources.shadow.detail).toMatchObject({ links: 2 });
    const plan = planFrom(t, 'shadow', shadow, obs);
    expect(plan.action).toBe('file.attributes'); // the content is right: only its mode and owner differ

    const refused = await expectRefusal(t.apply(plan), 'PathOutsideRoot');
    expect(refused.message).toMatch(
      /"etc\/app\/shadow" has 2 hard links, so the same file has another name that Datum did not make, perhaps outside the node root; changing its mode or owner would change it there too, so nothing was changed — fix: /,
    );
    expect(refused.details?.[0]).toMatchObject({ links: 2, backup_links: 0 });
    expect(await attributes(outsideFile)).toEqual({ mode: 0o600, uid: 0, gid: 0 });
    expect(await fs.readFile(outsideFile, 'utf8')).toBe(SECRET);
    expect((await fs.lstat(inside)).ino).toBe((await fs.lstat(outsideFile)).ino);
  });

  it('a link made while Datum holds the file open is caught at the last check before fchmod', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    const inside = path.join(t.root, 'etc/app/shadow');
    await fs.writeFile(inside, SECRET, { mode: 0o600 });
    await fs.chmod(inside, 0o600);
    const plan = planFrom(t, 'shadow', shadow, await t.observe({ shadow }));
    const outsideName = path.join(t.outside, 'also-shadow');
    pauseAttributesForTests(async (stage) => {
      if (stage === 'file opened') await fs.link(inside, outsideName);
    });
    const refused = await expectRefusal(t.apply(plan), 'PathOutsideRoot');
    expect(refused.message).toMatch(/has 2 hard links/);
    expect(await attributes(outsideName)).toEqual({ mode: 0o600, uid: 0, gid: 0 });
  });

  it('changed content is written to a new inode: the outside file keeps its bytes, mode and owner', async () => {
    const { t, outsideFile, inside } = await linkedIn();
    const replaced: ResourceSpec = { ...shadow, content: 'managed by Datum\n' };
    const plan = planFrom(t, 'shadow', replaced, await t.observe({ shadow: replaced }));
    expect(plan.action).toBe('file.write');
    await t.apply(plan);
    expect(await fs.readFile(outsideFile, 'utf8')).toBe(SECRET);
    expect(await attributes(outsideFile)).toEqual({ mode: 0o600, uid: 0, gid: 0 });
    expect(await attributes(inside)).toMatchObject({ mode: 0o644, uid: 1 });
    expect((await fs.lstat(inside)).ino).not.toBe((await fs.lstat(outsideFile)).ino);
  });

  it("Datum's own backup link (a write that died before its rename) is not someone else's: the mode is set", async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    const inside = path.join(t.root, 'etc/app/shadow');
    await fs.writeFile(inside, SECRET, { mode: 0o600 });
    await fs.mkdir(path.join(t.root, '.datum/backup/etc/app'), { recursive: true });
    await fs.link(inside, path.join(t.root, '.datum/backup/etc/app/shadow.2026-11-28T10-00-00-000Z'));
    const plan = planFrom(t, 'shadow', shadow, await t.observe({ shadow }));
    await t.apply(plan);
    expect(await attributes(inside)).toMatchObject({ mode: 0o644, uid: 1 });
  });
});
