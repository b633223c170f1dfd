// Issue 18, the filesystem holes suspected from the code, each confirmed on real files (the test
// fails on the code before the fix) and closed:
//   - a second name for .datum that is not a symlink (a bind mount here; a case-insensitive
//     filesystem's ".DATUM" is the same thing) let a file resource rewrite the fence;
//   - backup pruning deleted the only copy of what was there before Datum first wrote a file;
//   - `current` re-pointed at any directory of the root made a service start from there;
//   - a replaced file lost its owner and group (the agent runs as root; the file was the app's).

import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { limits } from '../../src/agent/limits';
import { action, cleanupNodes, expectRefusal, fileAction, makeNode, releaseAction, tarGz, writeArtifact } from '../agent/helpers';

const mounts: string[] = [];

afterEach(async () => {
  for (const m of mounts.splice(0)) execFileSync('umount', [m]);
  await cleanupNodes();
});

/** Whether this process may bind-mount (root with CAP_SYS_ADMIN); the test says so when it may not. */
function canMount(): boolean {
  try {
    execFileSync('mount', ['--version'], { stdio: 'ignore' });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
}

describe('attack: a second name for .datum that is not a symlink', () => {
  it.runIf(canMount())('a file resource through it is refused as ProtectedAreaRefusal; the fence is not replaced', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'v1\n'));
    const fence = path.join(t.root, '.datum/fence.json');
    await fs.mkdir(path.join(t.root, 'state'));
    execFileSync('mount', ['--bind', path.join(t.root, '.datum'), path.join(t.root, 'state')]);
    mounts.push(path.join(t.root, 'state'));

    const refused = await expectRefusal(
      t.apply(fileAction(t.node, 'forged', 'state/fence.json', '{"node":null}')),
      'ProtectedAreaRefusal',
    );
    expect(refused.message).toContain('inside ".datum"');
    // The agent's own record (it notes the refused action's generation), never the forged bytes.
    expect(JSON.parse(await fs.readFile(fence, 'utf8'))).toMatchObject({ node: { generation: 12 } });
    await expect(fs.readdir(path.join(t.root, '.datum/backup'))).rejects.toThrow(/ENOENT/); // nothing was replaced
    const obs = await t.observe({ forged: { type: 'file', path: 'state/fence.json', content: 'x' } });
    expect(obs.resources.forged).toMatchObject({ value: null, detail: { refusal: 'ProtectedAreaRefusal' } });
  });
});

describe('attack: backup pruning deletes the only copy of the original', () => {
  it('the first backup (what was there before Datum) is kept however many writes follow', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc'));
    await fs.writeFile(path.join(t.root, 'etc/app.conf'), 'the operator’s original\n');
    for (let i = 0; i < limits.backupsKept + 4; i++) await t.apply(fileAction(t.node, 'config', 'etc/app.conf', `datum ${i}\n`));
    const dir = path.join(t.root, '.datum/backup/etc');
    const kept = (await fs.readdir(dir)).sort();
    const contents = await Promise.all(kept.map((n) => fs.readFile(path.join(dir, n), 'utf8')));
    expect(contents).toContain('the operator’s original\n');
    expect(kept.length).toBe(limits.backupsKept);
  });
});

describe('attack: current re-pointed at another directory of the root', () => {
  it('a service is not started from there', async () => {
    const t = await makeNode();
    const server = `require('node:http').createServer((q, s) => s.end('{}')).listen(Number(process.env.PORT), '127.0.0.1');`;
    await t.apply(releaseAction(t, '1.0', await writeArtifact(t, 's.tgz', tarGz([{ name: 's.js', content: server }]))));
    await t.apply(fileAction(t.node, 'config', 'etc/config.json', '{}'));
    // A local writer plants its own program in the root and points current at it.
    await fs.mkdir(path.join(t.root, 'data'));
    await fs.writeFile(
      path.join(t.root, 'data/s.js'),
      `require('node:fs').writeFileSync(${JSON.stringify(path.join(t.outside, 'ran'))}, 'x');`,
    );
    await fs.rm(path.join(t.root, 'current'));
    await fs.symlink('data', path.join(t.root, 'current'));

    const spec = { command: ['node', 's.js'], build: null, config_path: 'etc/config.json', config_sha256: null };
    const failed = await t.apply(action(t.node, 'app', 'service.start', spec)).catch((err: Error) => err);
    expect(failed).toBeInstanceOf(Error);
    expect((failed as Error).message).toMatch(
      /current points at data, not at a release under releases\/.* — fix: let Datum switch current/,
    );
    await new Promise((r) => setTimeout(r, 500));
    await expect(fs.lstat(path.join(t.outside, 'ran'))).rejects.toThrow(/ENOENT/);
  });
});

describe('attack: a replaced file loses its owner and group', () => {
  it.runIf(process.getuid?.() === 0)('the new file has the replaced one’s owner, group and mode', async () => {
    const t = await makeNode();
    const file = path.join(t.root, 'etc/app.conf');
    await fs.mkdir(path.dirname(file));
    await fs.writeFile(file, 'theirs\n');
    await fs.chown(file, 1234, 5678);
    await fs.chmod(file, 0o640);
    await t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'ours\n'));
    const st = await fs.stat(file);
    expect({ uid: st.uid, gid: st.gid, mode: st.mode & 0o777 }).toEqual({ uid: 1234, gid: 5678, mode: 0o640 });
    expect(await fs.readFile(file, 'utf8')).toBe('ours\n');
  });
});
