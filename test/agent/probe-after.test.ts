// The probe a pass's last action hands back (ApplyRequest.probe_after): once the action is carried
// out, the agent observes the node as observe would, so the loop proves the write without another
// round trip. Real files, on a real agent's activities.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fileBytes, type ResourceSpec } from '../../src/domain';
import { cleanupNodes, fileAction, makeNode } from './helpers';

afterEach(cleanupNodes);

const CONFIG_PATH = 'etc/app/config.json';
const resources: Record<string, ResourceSpec> = {
  config: { type: 'file', path: CONFIG_PATH, content: { workers: 4 } },
  maintenance: { type: 'flag', value: false },
};

describe('the probe a pass’s last action hands back (probe_after)', () => {
  it('is the snapshot after the write, read as observe reads it', async () => {
    const t = await makeNode();
    const evidence = await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 4 }), t.acts, {
      probe_after: { node: t.node, resources, generation: 12 },
    });
    expect(evidence.outcome).toBe('applied');
    const probe = evidence.probe!;
    expect(await fs.readFile(path.join(t.root, CONFIG_PATH), 'utf8')).toBe(fileBytes({ workers: 4 }));
    // The written file, as a plain observe reads it now: the same marker for every resource.
    const again = await t.observe(resources);
    expect(probe.resources.config.marker).toBe(again.resources.config.marker);
    expect(probe.resources.maintenance.marker).toBe(again.resources.maintenance.marker);
    expect(Date.parse(probe.observed_at)).toBeGreaterThanOrEqual(Date.parse(evidence.executed_at));
  });

  it('is not taken when the loop did not ask, nor when the action is refused', async () => {
    const t = await makeNode();
    const plain = await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 4 }));
    expect(plain).not.toHaveProperty('probe');
    // A write planned from a marker the file no longer has is refused (another writer moved it):
    // the refusal reaches the loop as before, which then probes for itself.
    const stale = { ...fileAction(t.node, 'config', CONFIG_PATH, { workers: 5 }), observed_marker: 'ino:1,mtime:1' };
    await expect(t.apply(stale, t.acts, { probe_after: { node: t.node, resources, generation: 12 } })).rejects.toThrow(/marker/i);
  });
});
