import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { listFleetAgents } from '../../src/agent/config';

describe('listFleetAgents', () => {
  let dir: string | null = null;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = null;
  });

  it('lists FLEET/agents/<node>.yaml sorted by node, and nothing else', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'datum-fleet-'));
    await mkdir(path.join(dir, 'agents'));
    for (const f of ['N-25.yaml', 'N-24.yaml', 'README.md', 'N-26.yaml.bak'])
      await writeFile(path.join(dir, 'agents', f), 'node: x\n');
    expect(await listFleetAgents(dir)).toEqual([
      { node: 'N-24', file: path.join(dir, 'agents', 'N-24.yaml') },
      { node: 'N-25', file: path.join(dir, 'agents', 'N-25.yaml') },
    ]);
  });

  it('is empty for a fleet without agents/', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'datum-fleet-'));
    expect(await listFleetAgents(dir)).toEqual([]);
  });
});
