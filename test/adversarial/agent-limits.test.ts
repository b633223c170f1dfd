// Hole 9 on the agent: unbounded growth. Each attack sends or leaves something too large (a file,
// a flag, an artifact by path or by a server that lies about its length, a tar bomb by size or by
// entry count, a file grown past what a backup may hold, a journal flooded with entries) and the
// agent refuses it as SizeLimitExceeded, naming the cap and the fix, before anything is written.
// Backups and the journal are pruned to their documented bounds. Caps in the gigabytes are
// lowered for a test through `limits` (src/agent/limits.ts), the constants themselves stay.

import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_FILE_CONTENT_BYTES, MAX_FLAG_BYTES, limits } from '../../src/agent/limits';
import { pruneJournal } from '../../src/agent/node/retention';
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

const defaults = { ...limits };
afterEach(async () => {
  Object.assign(limits, defaults);
  await cleanupNodes();
});

/** Every file and link in the root but the agent's own records (fence, journal, …: written by any apply). */
async function rootState(t: TestNode): Promise<Record<string, string>> {
  const all = await snapshot(t.root);
  const own = (rel: string) => rel.startsWith('.datum/') && !/^\.datum\/(backup|tmp)\//.test(rel);
  return Object.fromEntries(Object.entries(all).filter(([rel, what]) => !own(rel) && what !== 'dir'));
}

async function expectCapped(t: TestNode, attempt: () => Promise<unknown>, cap: RegExp) {
  const before = await rootState(t);
  const failure = await expectRefusal(attempt(), 'SizeLimitExceeded');
  expect(failure.message).toMatch(cap);
  expect(failure.message).toContain(' — fix: ');
  expect(await rootState(t)).toEqual(before);
  return failure;
}

describe('attack: content larger than the agent keeps', () => {
  it('a file resource over MAX_FILE_CONTENT_BYTES (4 MiB) is refused, nothing written', async () => {
    const t = await makeNode();
    const huge = 'x'.repeat(MAX_FILE_CONTENT_BYTES + 1);
    await expectCapped(
      t,
      () => t.apply(fileAction(t.node, 'config', 'etc/huge.txt', huge)),
      /carries 4\.0 MiB of content, more than the 4 MiB a file resource may hold \(MAX_FILE_CONTENT_BYTES\)/,
    );
  });

  it('a flag over MAX_FLAG_BYTES (64 KiB) is refused', async () => {
    const t = await makeNode();
    const value = { blob: 'y'.repeat(MAX_FLAG_BYTES) };
    await expectCapped(
      t,
      () => t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value })),
      /more than the 64 KiB a flag may hold \(MAX_FLAG_BYTES\)/,
    );
  });

  it('a file another writer grew past MAX_BACKUP_BYTES is not replaced without a copy', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'small'));
    limits.backupBytes = 1000;
    await fs.writeFile(path.join(t.root, 'etc/app.conf'), 'z'.repeat(2000));
    const failure = await expectCapped(
      t,
      () => t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'small')),
      /"etc\/app\.conf" now holds 2 KiB, more than the 1000 bytes the agent keeps as a backup \(MAX_BACKUP_BYTES\); replacing it would lose it without a copy/,
    );
    expect(failure.message).toContain('fix: move "etc/app.conf" away by hand');
  });
});

describe('attack: an artifact too large to download or unpack', () => {
  it('by path, over MAX_ARTIFACT_BYTES: refused before it is copied', async () => {
    const t = await makeNode();
    limits.artifactBytes = 1000;
    const art = await writeArtifact(t, 'big.tgz', tarGz([{ name: 'noise', content: randomBytes(3000).toString('base64') }]));
    await expectCapped(
      t,
      () => t.apply(releaseAction(t, '1', art)),
      /more than the 1000 bytes the agent downloads \(MAX_ARTIFACT_BYTES\)/,
    );
    expect(await fs.readdir(path.join(t.root, '.datum/tmp')).catch(() => [])).toEqual([]);
  });

  it('by a server that sends no Content-Length: cut off while it streams', async () => {
    const t = await makeNode();
    limits.artifactBytes = 1000;
    const body = tarGz([{ name: 'noise', content: randomBytes(3000).toString('base64') }]);
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/gzip' }); // chunked: no length announced
      res.write(body.subarray(0, 500));
      res.end(body.subarray(500));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/big.tgz`;
      await expectCapped(
        t,
        () => t.apply(releaseAction(t, '1', { artifact: url, sha256: sha256(body) })),
        /artifact http:\/\/127\.0\.0\.1:\d+\/big\.tgz is more than the 1000 bytes the agent downloads/,
      );
    } finally {
      server.close();
    }
  });

  it('a tar bomb by size, over MAX_UNPACKED_BYTES: refused before one entry is unpacked', async () => {
    const t = await makeNode();
    limits.unpackedBytes = 1000;
    const art = await writeArtifact(
      t,
      'bomb.tgz',
      tarGz([
        { name: 'a', content: '0'.repeat(600) },
        { name: 'b', content: '0'.repeat(600) },
      ]),
    );
    await expectCapped(
      t,
      () => t.apply(releaseAction(t, '1', art)),
      /would unpack to more than 1000 bytes \(MAX_UNPACKED_BYTES\)/,
    );
  });

  it('a tar bomb by entry count, over MAX_ARCHIVE_ENTRIES', async () => {
    const t = await makeNode();
    limits.archiveEntries = 3;
    const art = await writeArtifact(t, 'many.tgz', tarGz(['a', 'b', 'c', 'd', 'e'].map((name) => ({ name, content: '' }))));
    await expectCapped(t, () => t.apply(releaseAction(t, '1', art)), /has more than 3 entries \(MAX_ARCHIVE_ENTRIES\)/);
  });
});

describe('growth: backups and the journal are pruned', () => {
  it('keeps BACKUPS_KEPT_PER_TARGET (5) backups of a file: the oldest (what was there before Datum) and the newest', async () => {
    const t = await makeNode();
    for (let i = 0; i < 9; i++) {
      await t.apply(fileAction(t.node, 'config', 'etc/app.conf', `v${i}`));
      await new Promise((r) => setTimeout(r, 3)); // distinct millisecond stamps
    }
    const dir = path.join(t.root, '.datum/backup/etc');
    const kept = (await fs.readdir(dir)).sort();
    expect(kept).toHaveLength(5);
    const contents = await Promise.all(kept.map((n) => fs.readFile(path.join(dir, n), 'utf8')));
    // v8 is the file itself; v0 is the first backup, the one copy of what Datum first replaced.
    expect(contents).toEqual(['v0', 'v4', 'v5', 'v6', 'v7']);
  });

  it('ages journal entries out after JOURNAL_RETAIN_MS and never touches the fence', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'one'));
    const journal = path.join(t.root, '.datum/journal');
    const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600_000);
    for (let i = 0; i < 20; i++) {
      const file = path.join(journal, `${'0'.repeat(62)}${String(i).padStart(2, '0')}.json`);
      await fs.writeFile(file, '{}');
      await fs.utimes(file, twoDaysAgo, twoDaysAgo);
    }
    const fence = await fs.readFile(path.join(t.root, '.datum/fence.json'), 'utf8');
    // The scan an apply runs on a root's first apply and every 100th after.
    expect(await pruneJournal(await fs.realpath(t.root), new Date())).toBe(1);
    const left = await fs.readdir(journal);
    expect(left.filter((n) => n.startsWith('0'.repeat(62)))).toEqual([]);
    expect(left).toHaveLength(1); // the real entry of the apply above, a few ms old
    expect(await fs.readFile(path.join(t.root, '.datum/fence.json'), 'utf8')).toBe(fence);
  });

  it('refuses new actions while the journal is full of entries a retry may still need (MAX_JOURNAL_ENTRIES)', async () => {
    const t = await makeNode();
    limits.journalEntries = 5;
    const journal = path.join(t.root, '.datum/journal');
    await fs.mkdir(journal, { recursive: true });
    for (let i = 0; i < 5; i++) await fs.writeFile(path.join(journal, `${String(i).repeat(64)}.json`), '{}');
    const failure = await expectRefusal(t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'x')), 'SizeLimitExceeded');
    expect(failure.message).toMatch(
      /the agent's journal \(\.datum\/journal\) holds 5 entries younger than 60 min, the most it keeps \(MAX_JOURNAL_ENTRIES\).* — fix: /,
    );
    await expect(fs.lstat(path.join(t.root, 'etc/app.conf'))).rejects.toThrow(/ENOENT/);
    // Once they are past JOURNAL_MIN_AGE_MS, the oldest make room and the action goes ahead.
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    for (const n of await fs.readdir(journal)) await fs.utimes(path.join(journal, n), twoHoursAgo, twoHoursAgo);
    await t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'x'));
    expect((await fs.readdir(journal)).length).toBeLessThanOrEqual(5);
  });
});
