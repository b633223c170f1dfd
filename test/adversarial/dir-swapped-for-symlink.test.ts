// Attack: a managed directory is swapped for a symlink to a directory outside the node root while
// Datum sets its mode. A chmod by path would follow the symlink and open the outside directory to
// the world; a descriptor opened before the swap follows the directory wherever it is moved, out of
// the root included. The agent opens the directory through its parent without following a link,
// and checks right before fchmod/fchown that the descriptor's directory is still the one at its
// place in the root: the change is refused (PathOutsideRoot), and the outside directory keeps its
// mode and owner. The swaps happen at the agent's own test seam, at the moments a race would have
// to hit: a racing process would hit those microseconds too rarely to show anything either way.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pauseAttributesForTests, type AttributeStage } from '../../src/agent/fs/attributes';
import type { ResourceSpec } from '../../src/domain';
import { action, cleanupNodes, expectRefusal, makeNode, type TestNode } from '../agent/helpers';

afterEach(async () => {
  pauseAttributesForTests(null);
  await cleanupNodes();
});

const asRoot = process.getuid?.() === 0;
const data: ResourceSpec = { type: 'directory', path: 'srv/data', mode: '0777', owner: 'daemon' };

/** mode and owner of a directory, never following a link. */
async function attributes(p: string): Promise<{ mode: number; uid: number }> {
  const st = await fs.lstat(p);
  return { mode: st.mode & 0o7777, uid: st.uid };
}

/** A node whose srv/data is a 0700 directory, and the directory outside the root a symlink will lead to. */
async function prepared(): Promise<{ t: TestNode; outside: string; managed: string }> {
  const t = await makeNode();
  const managed = path.join(t.root, 'srv/data');
  await fs.mkdir(managed, { recursive: true, mode: 0o700 });
  await fs.chmod(managed, 0o700);
  const outside = path.join(t.outside, 'private');
  await fs.mkdir(outside, { mode: 0o700 });
  await fs.chmod(outside, 0o700);
  await fs.writeFile(path.join(outside, 'id_ed25519'), 'not for everyone\n');
  return { t, outside, managed };
}

/** Applies the repair the plan would send (marker as observed) with a swap at `stage`. */
async function repairWithSwapAt(t: TestNode, stage: AttributeStage, swap: () => Promise<void>) {
  const seen = (await t.observe({ data })).resources.data;
  expect(seen.value).toEqual({ mode: '0700', owner: 'root' });
  let swapped = false;
  pauseAttributesForTests(async (at) => {
    if (at !== stage || swapped) return;
    swapped = true;
    await swap();
  });
  const attempt = t.apply(
    action(
      t.node,
      'data',
      'directory.ensure',
      { path: 'srv/data', mode: '0777', owner: 'daemon' },
      { observed_marker: seen.marker },
    ),
  );
  const refused = await expectRefusal(attempt, 'PathOutsideRoot');
  expect(swapped, `the swap happened at "${stage}"`).toBe(true);
  return refused;
}

describe.runIf(asRoot)('attack: a directory swapped for a symlink out of the root while its mode is set', () => {
  it('moved out of the root after Datum opened it, a symlink to it left in its place: nothing out there is changed', async () => {
    const { t, managed } = await prepared();
    const away = path.join(t.outside, 'moved-out');
    const refused = await repairWithSwapAt(t, 'directory opened', async () => {
      await fs.rename(managed, away);
      await fs.symlink(away, managed);
    });
    expect(refused.message).toMatch(
      /"srv\/data" is no longer the directory Datum checked .* nothing was written — fix: find out who replaces "srv\/data"/,
    );
    // The descriptor held that very directory, now outside the root: it kept its mode and owner.
    expect(await attributes(away)).toEqual({ mode: 0o700, uid: 0 });
  });

  it('replaced by a symlink to another outside directory after Datum opened it: neither directory is changed', async () => {
    const { t, outside, managed } = await prepared();
    const aside = path.join(t.root, 'srv/data.aside');
    await repairWithSwapAt(t, 'directory opened', async () => {
      await fs.rename(managed, aside);
      await fs.symlink(outside, managed);
    });
    expect(await attributes(outside)).toEqual({ mode: 0o700, uid: 0 });
    expect(await attributes(aside)).toEqual({ mode: 0o700, uid: 0 });
  });

  it('swapped between Datum finding it and opening it: the open does not follow the symlink', async () => {
    const { t, outside, managed } = await prepared();
    await repairWithSwapAt(t, 'directory found', async () => {
      await fs.rename(managed, path.join(t.root, 'srv/data.aside'));
      await fs.symlink(outside, managed);
    });
    expect(await attributes(outside)).toEqual({ mode: 0o700, uid: 0 });
  });
});
