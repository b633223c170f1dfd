// Issue 18, hole 2: a release unpack can land outside the root. A separate process waits for the
// agent's staging directory to appear under releases/ and, while the unpack runs, replaces
// releases/ with a symlink out of the root: once by moving the real directory out and linking to
// it, once by moving it aside inside the root and linking somewhere else outside. Before, the
// unpack went on by path through the symlink, the release was renamed into place out there, and
// `current` was switched to it. Now the unpack goes through held descriptors, and releases/ is
// verified by device and inode before the release is renamed into place and before `current`
// is switched: the install is refused, and `current` never leads out of the root.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupNodes, expectRefusal, makeNode, releaseAction, tarGz, writeArtifact, type RawEntry } from '../agent/helpers';

afterEach(cleanupNodes);

/** Enough entries that the unpack runs long after its staging directory appears. */
function bigArchive(): Buffer {
  const entries: RawEntry[] = [{ name: 'server.js', content: '// the release\n' }];
  for (let d = 0; d < 6; d++) {
    entries.push({ name: `lib${d}/`, type: 'dir' });
    for (let f = 0; f < 100; f++) entries.push({ name: `lib${d}/m${f}.js`, content: `module.exports = ${d * 100 + f};\n` });
  }
  return tarGz(entries);
}

/**
 * Waits (polling, a real separate process) for a staging entry under <root>/releases, then
 * moves releases/ to `away` and puts a symlink to `linkTo` in its place. Prints "swapped".
 */
function swapper(root: string, away: string, linkTo: string): ChildProcess {
  const script = `
    const fs = require('node:fs');
    const [root, away, linkTo] = process.argv.slice(1);
    const releases = root + '/releases';
    for (;;) {
      let names = [];
      try { names = fs.readdirSync(releases); } catch {}
      if (names.some((n) => n.includes('datum-tmp'))) break;
    }
    fs.renameSync(releases, away);
    fs.symlinkSync(linkTo, releases);
    process.stdout.write('swapped');`;
  return spawn(process.execPath, ['-e', script, root, away, linkTo], { stdio: ['ignore', 'pipe', 'inherit'] });
}

async function swappedWhileInstalling(move: 'out of the root' | 'aside in the root') {
  const t = await makeNode();
  await fs.mkdir(path.join(t.root, 'releases'));
  const art = await writeArtifact(t, 'big.tgz', bigArchive());
  const stolen = path.join(t.outside, 'stolen');
  const elsewhere = path.join(t.outside, 'elsewhere');
  await fs.mkdir(elsewhere);
  const away = move === 'out of the root' ? stolen : path.join(t.root, 'releases.aside');
  const child = swapper(t.root, away, move === 'out of the root' ? stolen : elsewhere);
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const result = await t.apply(releaseAction(t, '7.4', art)).then(
    (ev) => ({ ok: true as const, ev }),
    (err: unknown) => ({ ok: false as const, err: err as Error }),
  );
  if (child.exitCode === null) await once(child, 'exit');
  expect(out, 'the swap happened while the unpack ran').toBe('swapped');
  return { t, result, stolen, elsewhere, away };
}

/** Where `current` leads, if it is there. */
async function currentLeads(root: string): Promise<string | null> {
  return await fs.realpath(path.join(root, 'current')).catch(() => null);
}

describe('attack: releases/ swapped for a symlink out of the root while a release unpacks', () => {
  it('moved out of the root and linked to: the install is refused, nothing is installed out there, current is not switched', async () => {
    const { t, result, stolen } = await swappedWhileInstalling('out of the root');
    const refused = await expectRefusal(result.ok ? Promise.resolve(result.ev) : Promise.reject(result.err), 'PathOutsideRoot');
    expect(refused.message).toMatch(/"releases" is no longer the directory Datum checked .* the release was not installed/);
    expect(refused.message).toContain('— fix: ');
    expect(await currentLeads(t.root)).toBeNull();
    // The directory that was moved out holds what it held (nothing): no release, no staging left.
    expect(await fs.readdir(stolen)).toEqual([]);
  });

  it('moved aside in the root and linked elsewhere outside: the install is refused, nothing lands outside', async () => {
    const { t, result, elsewhere, away } = await swappedWhileInstalling('aside in the root');
    await expectRefusal(result.ok ? Promise.resolve(result.ev) : Promise.reject(result.err), 'PathOutsideRoot');
    expect(await currentLeads(t.root)).toBeNull();
    expect(await fs.readdir(elsewhere)).toEqual([]);
    // Our own staging directory, in the directory it was made in, is cleaned up too.
    expect(await fs.readdir(away)).toEqual([]);
  });
});
