// Issue 33: every pass of every loop read its node's desired-state file and parsed and validated
// it again (YAML, then the schema), though most passes find it unchanged. The authority now parses
// a file once per content (its sha256) and binds only the provenance anew; a changed file, even
// one of the same size written in the same second, is read as it is now.

import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuthorityRead } from '../../src/contract';
import { DesiredStateAuthority } from '../../src/activities/authority';

const made: string[] = [];
afterEach(async () => {
  for (const dir of made.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

async function fleetWith(
  value: unknown,
): Promise<{ authority: DesiredStateAuthority; write: (v: unknown, type?: string) => Promise<void> }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-authority-'));
  made.push(dir);
  await fs.mkdir(path.join(dir, 'desired', 'nodes'), { recursive: true });
  const file = path.join(dir, 'desired', 'nodes', 'N-1.yaml');
  const write = (v: unknown, type = 'flag') =>
    fs.writeFile(file, JSON.stringify({ node: 'N-1', generation: 1, resources: { maintenance: { type, value: v } } }));
  await write(value);
  return { authority: new DesiredStateAuthority(dir), write };
}

function intentOf(read: AuthorityRead) {
  if (!read.ok) throw new Error(read.error);
  return read.intent;
}

describe('the authority read (issue 33)', () => {
  it('parses an unchanged file once, and binds each read’s own time', async () => {
    const { authority } = await fleetWith(false);
    const first = intentOf(await authority.read('N-1', new Date('2026-12-05T10:00:00Z')));
    const again = intentOf(await authority.read('N-1', new Date('2026-12-05T10:01:00Z')));
    expect(authority.parses).toBe(1);
    expect(again.digest).toBe(first.digest);
    expect(again.resources).toEqual(first.resources);
    expect(again.provenance.loaded_at).toBe('2026-12-05T10:01:00.000Z');
    expect(first.provenance.loaded_at).toBe('2026-12-05T10:00:00.000Z');
  });

  it('reads a changed file as it is now, even one of the same size written at once after', async () => {
    const { authority, write } = await fleetWith(1);
    const before = intentOf(await authority.read('N-1'));
    const file = path.join(authority.fleetDir, 'desired', 'nodes', 'N-1.yaml');
    const { size } = await fs.stat(file);
    await write(2);
    expect((await fs.stat(file)).size).toBe(size);
    const after = intentOf(await authority.read('N-1'));
    expect(after.resources.maintenance).toMatchObject({ type: 'flag', value: 2 });
    expect(after.digest).not.toBe(before.digest);
    expect(authority.parses).toBe(2);
  });

  it('says what is wrong with an invalid file on every read, and takes the file again once corrected', async () => {
    const { authority, write } = await fleetWith(false);
    intentOf(await authority.read('N-1'));
    await write(false, 'switch');
    for (let i = 0; i < 2; i++) {
      const read = await authority.read('N-1');
      expect(read.ok).toBe(false);
      if (!read.ok) expect(read.error).toMatch(/maintenance/);
    }
    await write(false);
    expect(intentOf(await authority.read('N-1')).resources.maintenance).toMatchObject({ value: false });
  });
});
