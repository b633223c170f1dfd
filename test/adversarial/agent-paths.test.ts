// Hole 5: Datum's own state protected by spelling only. Each test is an attack by someone who
// can shape desired state or place a symlink on the node, run against the agent's real
// activities on a temp root: a file resource that reaches .datum/, flags/ or releases/ through
// "alias -> .", a flags/ or .datum/ that leads somewhere else, a service log symlinked out of the
// root, and a parent directory swapped for a symlink while the agent is writing.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { afterEach, describe, expect, it } from 'vitest';
import {
  action,
  cleanupNodes,
  expectRefusal,
  fileAction,
  makeNode,
  releaseAction,
  sha256,
  snapshot,
  tarGz,
  writeArtifact,
  type TestNode,
} from '../agent/helpers';

afterEach(cleanupNodes);

/** Every entry under the root's protected areas, and everything outside the root. */
async function guarded(t: TestNode): Promise<Record<string, string>> {
  const all = await snapshot(t.base);
  const keep = (rel: string) =>
    !rel.startsWith(`root${path.sep}`) ||
    ['.datum', 'flags', 'releases', 'current'].some((a) => rel === `root/${a}` || rel.startsWith(`root/${a}/`));
  // The journal and the fence are the agent's own writes on every apply (refused ones included).
  const own = (rel: string) => rel.startsWith('root/.datum/journal') || rel === 'root/.datum/fence.json';
  return Object.fromEntries(Object.entries(all).filter(([rel]) => keep(rel) && !own(rel)));
}

/** A node with a release installed, a flag set and a service record: everything worth reaching. */
async function populated(): Promise<TestNode> {
  const t = await makeNode();
  const art = await writeArtifact(t, 'a.tgz', tarGz([{ name: 'server.js', content: '// v1\n' }]));
  await t.apply(releaseAction(t, '1.0', art));
  await t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: false }));
  await fs.mkdir(path.join(t.root, '.datum/services'), { recursive: true });
  await fs.writeFile(path.join(t.root, '.datum/services/app.json'), '{}\n');
  await fs.symlink('.', path.join(t.root, 'alias'));
  return t;
}

describe('attack: a file resource reaches Datum’s own areas through "alias -> ."', () => {
  it.each([
    ['the fence', 'alias/.datum/fence.json', '.datum'],
    ['a journal entry', 'alias/.datum/journal/forged.json', '.datum'],
    ['a service record', 'alias/.datum/services/app.json', '.datum'],
    ['a backup', 'alias/.datum/backup/x', '.datum'],
    ['an operator-owned flag', 'alias/flags/maintenance.json', 'flags'],
    ['a release', 'alias/releases/1.0/server.js', 'releases'],
    ['the current link', 'alias/current', 'current'],
    ['a release through current', 'alias/current/server.js', 'releases'],
    ['two aliases deep', 'alias/alias/.datum/fence.json', '.datum'],
  ])('cannot rewrite %s (%s)', async (_what, target, area) => {
    const t = await populated();
    const before = await guarded(t);
    const failure = await expectRefusal(t.apply(fileAction(t.node, 'config', target, '{"forged":true}')), 'ProtectedAreaRefusal');
    expect(failure.message).toContain(`inside "${area}"`);
    expect(failure.message).toMatch(/through the symlinks? "alias"/);
    expect(failure.message).toMatch(/— fix: replace the symlink "alias[^"]*" with a real directory/);
    expect(await guarded(t)).toEqual(before);
  });

  it('is not even read on observe: no value from the fence, the refusal in detail', async () => {
    const t = await populated();
    const obs = await t.observe({ config: { type: 'file', path: 'alias/.datum/fence.json', content: 'x' } });
    expect(obs.resources.config).toMatchObject({
      value: null,
      marker: null,
      detail: { refusal: 'ProtectedAreaRefusal', path_error: expect.stringContaining('inside ".datum"') as string },
    });
  });

  it('cannot write into flags/ through a directory symlinked to it (etc -> flags)', async () => {
    const t = await populated();
    await fs.symlink('flags', path.join(t.root, 'etc'));
    const before = await guarded(t);
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'etc/maintenance.json', 'true')),
      'ProtectedAreaRefusal',
    );
    expect(failure.message).toContain('leads through the symlink "etc" to "flags/maintenance.json", inside "flags"');
    expect(await guarded(t)).toEqual(before);
  });
});

describe('attack: an area of the root leads into another one', () => {
  it('a flag write cannot land in .datum when flags -> .datum', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, '.datum'));
    await fs.symlink('.datum', path.join(t.root, 'flags'));
    const failure = await expectRefusal(
      t.apply(action(t.node, 'forged', 'flag.write', { name: 'forged', value: { resources: {} } })),
      'ProtectedAreaRefusal',
    );
    expect(failure.message).toContain('inside ".datum"');
    await expect(fs.lstat(path.join(t.root, '.datum/forged.json'))).rejects.toThrow(/ENOENT/);
    // Observed as an obstruction that names it.
    const obs = await t.observe({ forged: { type: 'flag', value: true } });
    expect(obs.resources.forged.obstruction).toContain('inside ".datum"');
  });

  it('a release cannot be unpacked into flags/ when releases -> flags', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'flags'));
    await fs.symlink('flags', path.join(t.root, 'releases'));
    const art = await writeArtifact(t, 'a.tgz', tarGz([{ name: 'maintenance.json', content: 'true' }]));
    const failure = await expectRefusal(t.apply(releaseAction(t, '1.0', art)), 'ProtectedAreaRefusal');
    expect(failure.message).toContain('inside "flags"');
    expect(await fs.readdir(path.join(t.root, 'flags'))).toEqual([]);
  });

  it('the agent keeps no state in a .datum that leads elsewhere in the root (.datum -> etc)', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc'));
    await fs.symlink('etc', path.join(t.root, '.datum'));
    const failure = await expectRefusal(t.apply(fileAction(t.node, 'config', 'app.json', 'x')), 'ProtectedAreaRefusal');
    expect(failure.message).toMatch(/outside "\.datum", where Datum keeps it — fix: make "\.datum" a real directory/);
    expect(await fs.readdir(path.join(t.root, 'etc'))).toEqual([]);
    await fs.rm(path.join(t.root, '.datum')); // so the clean-up can stop services
  });
});

describe('attack: a service log symlinked out of the root', () => {
  it('is never followed: the start is refused and the outside file is untouched', async () => {
    const t = await makeNode();
    const server = `require('node:http').createServer((q, s) => s.end('{}')).listen(Number(process.env.PORT), '127.0.0.1');`;
    await t.apply(releaseAction(t, 's', await writeArtifact(t, 's.tgz', tarGz([{ name: 's.js', content: server }]))));
    await t.apply(fileAction(t.node, 'config', 'etc/config.json', 'x'));
    await fs.mkdir(path.join(t.root, '.datum/services'), { recursive: true });
    await fs.symlink(path.join(t.outside, 'precious.txt'), path.join(t.root, '.datum/services/app.log'));
    const spec = { command: ['node', 's.js'], build: null, config_path: 'etc/config.json', config_sha256: null };
    const failure = await expectRefusal(t.apply(action(t.node, 'app', 'service.start', spec)), 'PathOutsideRoot');
    expect(failure.message).toMatch(
      /the service log \.datum\/services\/app\.log is a symlink, and Datum never writes through one/,
    );
    expect(await fs.readFile(path.join(t.outside, 'precious.txt'), 'utf8')).toBe('do not touch\n');
    // Nothing was started, and no intent was left behind for a later retry to adopt.
    expect((await fs.readdir(path.join(t.root, '.datum/services'))).sort()).toEqual(['app.log']);
  });
});

describe('attack: a parent directory swapped for a symlink while the agent writes', () => {
  /**
   * A separate process (real concurrency, not interleaved promises) that keeps replacing
   * <root>/etc with a symlink to `target` and putting it back, as fast as it can.
   */
  function swapper(root: string, targets: string[]): ChildProcess {
    const script = `
      const fs = require('node:fs');
      const [root, ...targets] = process.argv.slice(1);
      const etc = root + '/etc', real = root + '/etc.real';
      // Each state lasts a random 0–2 ms, about as long as one write takes, so swaps land at
      // every step of a write: before the check, between the check and the write, during it.
      const hold = () => { const until = Date.now() + Math.random() * 2; while (Date.now() < until); };
      let i = 0;
      for (;;) {
        try { fs.renameSync(etc, real); fs.symlinkSync(targets[i++ % targets.length], etc); } catch {}
        hold();
        try { fs.unlinkSync(etc); fs.renameSync(real, etc); } catch {}
        hold();
      }`;
    return spawn(process.execPath, ['-e', script, root, ...targets], { stdio: 'ignore' });
  }

  const WRITES = 150;

  /**
   * What one observe of etc/app.conf answered during the swaps: the outside file's bytes, the
   * agent's own (a write of this test), a refusal of the path, or a throw (named by its code).
   */
  async function observed(t: TestNode, secret: string): Promise<string> {
    try {
      const r = (await t.observe({ config: { type: 'file', path: 'etc/app.conf', content: 'x' } })).resources.config;
      if (r.value === sha256(secret)) return 'outside';
      if ('refusal' in r.detail || r.obstruction) return 'refused';
      return r.value === null ? 'absent' : 'own';
    } catch (err) {
      return `threw ${(err as NodeJS.ErrnoException).code ?? (err as Error).name}`;
    }
  }

  it('never lands a write outside the directory it checked, nor reads from outside it', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc'));
    await fs.mkdir(path.join(t.root, '.datum'));
    await fs.mkdir(path.join(t.root, 'flags'));
    // What a redirected read would find: observe must never report it as the file's value.
    const secret = 'outside secret\n';
    await fs.writeFile(path.join(t.outside, 'app.conf'), secret);
    const before = await snapshot(t.outside);
    const child = swapper(t.root, ['.datum', 'flags', t.outside]);
    const outcomes: Record<string, number> = {};
    const looks: Record<string, number> = {};
    const started = Date.now();
    try {
      for (let i = 0; i < WRITES; i++) {
        try {
          await t.apply(fileAction(t.node, 'config', 'etc/app.conf', `write ${i}\n`));
          outcomes.applied = (outcomes.applied ?? 0) + 1;
        } catch (err) {
          // A refusal, or a plain error when the swap pulled a directory away mid-step: either way
          // the write did not happen, which is all this test allows besides a write in place.
          const kind = err instanceof ApplicationFailure ? (err.type ?? 'untyped') : `${(err as NodeJS.ErrnoException).code}`;
          outcomes[kind] = (outcomes[kind] ?? 0) + 1;
        }
        const seen = await observed(t, secret);
        looks[seen] = (looks[seen] ?? 0) + 1;
      }
    } finally {
      // Its loop never yields to a signal handler: SIGKILL, then put etc back as it was.
      child.kill('SIGKILL');
      await once(child, 'exit');
      // Killed between its two steps, it may have left etc renamed away and no link in its place.
      const etc = await fs.lstat(path.join(t.root, 'etc')).catch(() => null);
      if (etc?.isSymbolicLink()) await fs.unlink(path.join(t.root, 'etc'));
      await fs.rename(path.join(t.root, 'etc.real'), path.join(t.root, 'etc')).catch(() => undefined);
    }
    // The race was really run: some writes went through, some met the swap and were refused.
    expect(outcomes.applied, JSON.stringify(outcomes)).toBeGreaterThan(0);
    expect(WRITES - (outcomes.applied ?? 0), JSON.stringify(outcomes)).toBeGreaterThan(0);

    // Not one byte outside the root, and no trace of app.conf in .datum (but its backups) or flags.
    // etc.real is the checked directory itself, renamed by the swapper while the agent held it.
    expect(await snapshot(t.outside)).toEqual(before);
    // Every observe is counted by what it answered: one that threw read nothing, but proves
    // nothing either, so most must have answered (150 of 150 here, none threw), some with the
    // file's own bytes (etc in place) and some refusing the swapped-in link; none with the
    // outside file's.
    const seen = JSON.stringify(looks);
    expect(looks.outside ?? 0, seen).toBe(0);
    const answered = (looks.own ?? 0) + (looks.refused ?? 0) + (looks.absent ?? 0);
    expect(answered, seen).toBeGreaterThanOrEqual(WRITES * 0.8);
    expect(looks.own ?? 0, seen).toBeGreaterThan(0);
    expect(looks.refused ?? 0, seen).toBeGreaterThan(0);
    const strays = Object.keys(await snapshot(t.root)).filter(
      (rel) => /(^|\/)\.?app\.conf/.test(rel) && !/^(etc|etc\.real|\.datum\/backup\/etc)\//.test(rel),
    );
    expect(strays).toEqual([]);
    console.log('swap race outcomes', outcomes, 'observes', looks, `${Date.now() - started} ms`);
  }, 120_000);
});
