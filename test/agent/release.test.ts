import * as tar from 'tar';
import os from 'node:os';
// Release provider: fetch (path or URL), verify the sha256 before unpacking, unpack atomically
// into releases/<version>, switch current atomically; never replace or delete a release.

import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { desiredValue, type ResourceSpec } from '../../src/domain';
import { buildArtifact, cleanupNodes, expectRefusal, makeNode, releaseAction, sha256, tarGz, writeArtifact } from './helpers';

afterEach(cleanupNodes);

const releaseSpec = (version: string, art: { artifact: string; sha256: string }): ResourceSpec => ({
  type: 'release',
  version,
  artifact: art.artifact,
  sha256: art.sha256,
});

describe('release provider', () => {
  it('builds the demo artifact deterministically: same version, same sha256', async () => {
    const t = await makeNode();
    const a = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'a') });
    const b = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'b') });
    const c = await buildArtifact({ version: '7.3', outDir: path.join(t.base, 'b') });
    expect(a.sha256).toBe(b.sha256);
    expect(c.sha256).not.toBe(a.sha256);
    expect(path.basename(a.file)).toBe('app-7.4.tgz');
    expect((await fs.readFile(a.sha256File, 'utf8')).trim()).toBe(a.sha256);
    expect(sha256(await fs.readFile(a.file))).toBe(a.sha256);
  });

  it('installs from an absolute path: verified, unpacked, recorded, current switched; observed as desiredValue()', async () => {
    const t = await makeNode();
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    const spec = releaseSpec('7.4', { artifact: art.file, sha256: art.sha256 });
    expect((await t.observe({ build: spec })).resources.build).toMatchObject({
      value: null,
      marker: 'absent',
      obstruction: null,
    });

    const ev = await t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: art.sha256 }));
    expect(ev.detail).toMatch(
      /^unpacked .*app-7\.4\.tgz \(sha256 [0-9a-f]{12}… verified\) into releases\/7\.4 and switched current from nothing to releases\/7\.4\.$/,
    );
    expect(await fs.readlink(path.join(t.root, 'current'))).toBe('releases/7.4');
    expect((await fs.readdir(path.join(t.root, 'releases/7.4'))).sort()).toEqual([
      '.datum-release.json',
      'build.json',
      'server.js',
    ]);
    expect(JSON.parse(await fs.readFile(path.join(t.root, 'releases/7.4/.datum-release.json'), 'utf8'))).toEqual({
      version: '7.4',
      sha256: art.sha256,
    });
    const st = await fs.lstat(path.join(t.root, 'current'));
    expect(ev.marker_after).toBe(`link:releases/7.4:${st.ctimeMs}`);

    const obs = await t.observe({ build: spec });
    expect(obs.resources.build.value).toEqual(desiredValue('build', { build: spec }));
    expect(obs.resources.build.marker).toBe(ev.marker_after);
    // No temp files left behind.
    expect(await fs.readdir(path.join(t.root, 'releases'))).toEqual(['7.4']);
    expect(await fs.readdir(path.join(t.root, '.datum/tmp'))).toEqual([]);
  });

  it('switches between releases, keeps the old one, and reuses an already unpacked release', async () => {
    const t = await makeNode();
    const out = path.join(t.base, 'artifacts');
    const a73 = await buildArtifact({ version: '7.3', outDir: out });
    const a74 = await buildArtifact({ version: '7.4', outDir: out });
    await t.apply(releaseAction(t, '7.3', { artifact: a73.file, sha256: a73.sha256 }));
    const to74 = await t.apply(releaseAction(t, '7.4', { artifact: a74.file, sha256: a74.sha256 }));
    expect(to74.detail).toContain('switched current from releases/7.3 to releases/7.4');
    expect((await fs.readdir(path.join(t.root, 'releases'))).sort()).toEqual(['7.3', '7.4']);

    // Back to 7.3: already there, so the artifact is not even read.
    await fs.rm(a73.file);
    const back = await t.apply(releaseAction(t, '7.3', { artifact: a73.file, sha256: a73.sha256 }));
    expect(back.detail).toMatch(/^reused releases\/7\.3 \(already unpacked/);
    expect(back.marker_after).not.toBe(to74.marker_after);
    const obs = await t.observe({ build: releaseSpec('7.3', { artifact: a73.file, sha256: a73.sha256 }) });
    expect(obs.resources.build.value).toEqual({ version: '7.3', sha256: a73.sha256 });
  });

  it('refuses an artifact whose sha256 does not verify (ArtifactDigestMismatch) before unpacking anything', async () => {
    const t = await makeNode();
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    const wrong = 'f'.repeat(64);
    const failure = await expectRefusal(
      t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: wrong })),
      'ArtifactDigestMismatch',
    );
    expect(failure.message).toContain(`has sha256 ${art.sha256}, but desired state expects ${wrong}; nothing was unpacked`);
    expect(await fs.readdir(path.join(t.root, 'releases')).catch(() => [])).toEqual([]);
    await expect(fs.lstat(path.join(t.root, 'current'))).rejects.toThrow(/ENOENT/);
  });

  it('refuses a missing artifact (ArtifactUnavailable) and a relative one (InvalidAction)', async () => {
    const t = await makeNode();
    const failure = await expectRefusal(
      t.apply(releaseAction(t, '7.4', { artifact: path.join(t.base, 'nope.tgz'), sha256: 'a'.repeat(64) })),
      'ArtifactUnavailable',
    );
    expect(failure.message).toMatch(/cannot be read \(ENOENT\)/);
    await expectRefusal(
      t.apply(releaseAction(t, '7.4', { artifact: 'artifacts/app-7.4.tgz', sha256: 'a'.repeat(64) })),
      'InvalidAction',
    );
  });

  it('refuses an artifact that is not a tar.gz (ArtifactUnavailable)', async () => {
    const t = await makeNode();
    const art = await writeArtifact(t, 'junk.tgz', Buffer.from('this is not an archive at all, just words'));
    await expectRefusal(t.apply(releaseAction(t, '7.4', art)), 'ArtifactUnavailable');
  });

  it('fetches over http(s), and refuses a 404 as ArtifactUnavailable', async () => {
    const t = await makeNode();
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    const bytes = await fs.readFile(art.file);
    const server = http.createServer((req, res) => {
      if (req.url === '/app-7.4.tgz') res.writeHead(200, { 'content-type': 'application/gzip' }).end(bytes);
      else res.writeHead(404).end();
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const ev = await t.apply(releaseAction(t, '7.4', { artifact: `${base}/app-7.4.tgz`, sha256: art.sha256 }));
      expect(ev.outcome).toBe('applied');
      expect(await fs.readlink(path.join(t.root, 'current'))).toBe('releases/7.4');
      const failure = await expectRefusal(
        t.apply(releaseAction(t, '7.5', { artifact: `${base}/app-7.5.tgz`, sha256: art.sha256 })),
        'ArtifactUnavailable',
      );
      expect(failure.message).toContain('answered HTTP 404');
    } finally {
      server.close();
    }
  });

  it('treats releases/<version> with another digest, or without a record, as an obstruction and never replaces it', async () => {
    const t = await makeNode();
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    const spec = releaseSpec('7.4', { artifact: art.file, sha256: art.sha256 });
    await fs.mkdir(path.join(t.root, 'releases/7.4'), { recursive: true });
    await fs.writeFile(path.join(t.root, 'releases/7.4/hand-made.txt'), 'someone put this here');

    const obs = await t.observe({ build: spec });
    expect(obs.resources.build.obstruction).toMatch(/releases\/7\.4 exists without a readable \.datum-release\.json/);
    await expectRefusal(t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: art.sha256 })), 'DestructiveActionRefusal');

    await fs.writeFile(
      path.join(t.root, 'releases/7.4/.datum-release.json'),
      JSON.stringify({ version: '7.4', sha256: 'e'.repeat(64) }),
    );
    expect((await t.observe({ build: spec })).resources.build.obstruction).toMatch(
      /already holds an artifact with sha256 e{64}, not the desired/,
    );
    const failure = await expectRefusal(
      t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: art.sha256 })),
      'DestructiveActionRefusal',
    );
    expect(failure.message).toContain('Datum never replaces a release');
    expect(await fs.readFile(path.join(t.root, 'releases/7.4/hand-made.txt'), 'utf8')).toBe('someone put this here');
  });

  it('treats a current that is not a symlink as an obstruction', async () => {
    const t = await makeNode();
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    await fs.mkdir(path.join(t.root, 'current'));
    const obs = await t.observe({ build: releaseSpec('7.4', { artifact: art.file, sha256: art.sha256 }) });
    expect(obs.resources.build.obstruction).toBe('"current" is a directory, not a symlink; switching it would destroy it');
    await expectRefusal(t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: art.sha256 })), 'DestructiveActionRefusal');
    expect((await fs.lstat(path.join(t.root, 'current'))).isDirectory()).toBe(true);
  });

  it('unpacks archives with directories, inner relative symlinks and hardlinks that stay inside', async () => {
    const t = await makeNode();
    const art = await writeArtifact(
      t,
      'rich.tgz',
      tarGz([
        { name: './', type: 'dir' },
        { name: 'bin/', type: 'dir' },
        { name: 'bin/run.sh', content: '#!/bin/sh\necho hi\n', mode: 0o4755 },
        { name: 'lib/', type: 'dir' },
        { name: 'lib/util.js', content: 'module.exports = 1;\n' },
        { name: 'lib/link.js', type: 'symlink', linkname: '../bin/run.sh' },
        { name: 'hard.js', type: 'hardlink', linkname: 'lib/util.js' },
      ]),
    );
    await t.apply(releaseAction(t, '1.0', art));
    const dir = path.join(t.root, 'releases/1.0');
    expect(await fs.readlink(path.join(dir, 'lib/link.js'))).toBe('../bin/run.sh');
    expect(await fs.readFile(path.join(dir, 'hard.js'), 'utf8')).toBe('module.exports = 1;\n');
    // No setuid bit from an artifact.
    expect((await fs.stat(path.join(dir, 'bin/run.sh'))).mode & 0o7000).toBe(0);
  });

  it('quotes at most 200 characters of a hostile entry in its refusal, however long the name', async () => {
    const t = await makeNode();
    const staging = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-long-'));
    const target = `/${'a'.repeat(3000)}`;
    await fs.symlink(target, path.join(staging, 'evil'));
    const archive = path.join(staging, '..', `${path.basename(staging)}.tgz`);
    await tar.c({ gzip: true, file: archive, cwd: staging, portable: true }, ['evil']);
    const art = await writeArtifact(t, 'long.tgz', await fs.readFile(archive));
    const failure = await expectRefusal(t.apply(releaseAction(t, '1.0', art)), 'PathOutsideRoot');
    expect(failure.message).toMatch(/archive entry "evil" is a symlink to "\/a{10,}… \(\d+ characters\)/);
    expect(failure.message.length).toBeLessThan(1000);
    await fs.rm(staging, { recursive: true, force: true });
    await fs.rm(archive, { force: true });
  });
});
