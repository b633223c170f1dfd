// The agent upgrade that added ctime and a digest to a file's marker (issue 18, hole 10a), on real
// files: loops carry the markers an older agent reported, fence.json keeps the marker of the
// older agent's last write, and the watch compares against the loop's baseline. None of them
// may read the new spelling as a change; a real change is still one.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { WatchRequest } from '../../src/contract';
import { cleanupNodes, expectRefusal, fileAction, makeNode, runActivity, type TestNode } from './helpers';

afterEach(cleanupNodes);

const CONFIG = 'etc/app.conf';
const spec = { config: { type: 'file' as const, path: CONFIG, content: 'x' } };

/** The marker an agent before this one reported for the file now: mtime + inode + size. */
async function legacyMarker(t: TestNode): Promise<string> {
  const st = await fs.stat(path.join(t.root, CONFIG));
  return `file:${st.mtimeMs}:${st.ino}:${st.size}`;
}

/** fence.json as an older agent left it: its last write's marker in the short spelling. */
async function legacyFence(t: TestNode): Promise<void> {
  const file = path.join(t.root, '.datum/fence.json');
  const fence = JSON.parse(await fs.readFile(file, 'utf8')) as { written_targets: Record<string, { marker: string }> };
  fence.written_targets[`file:${CONFIG}`].marker = await legacyMarker(t);
  await fs.writeFile(file, JSON.stringify(fence));
}

describe('after the agent upgrade that added ctime and a digest to file markers', () => {
  it('an apply planned from an older agent’s snapshot goes ahead: the short marker is the same file', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', CONFIG, 'v1\n'));
    const planned = await legacyMarker(t);
    expect((await t.observe(spec)).resources.config.marker).toMatch(
      new RegExp(`^${planned.replace(/\./g, '\\.')}:\\d+(\\.\\d+)?:[0-9a-f]{16}$`),
    );
    const ev = await t.apply(fileAction(t.node, 'config', CONFIG, 'v2\n', { observed_marker: planned }));
    expect(ev.outcome).toBe('applied');
  });

  it('but a real change since that snapshot is still MARKER_MOVED', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', CONFIG, 'v1\n'));
    const planned = await legacyMarker(t);
    await fs.writeFile(path.join(t.root, CONFIG), 'theirs, longer\n');
    await expectRefusal(t.apply(fileAction(t.node, 'config', CONFIG, 'v2\n', { observed_marker: planned })), 'MarkerMoved');
  });

  it('the older agent’s own last write, kept in fence.json in the short spelling, is still Datum’s own', async () => {
    const t = await makeNode();
    const before = (await t.observe(spec)).resources.config.marker; // absent: what an out-of-date plan saw
    await t.apply(fileAction(t.node, 'config', CONFIG, 'v1\n'));
    await legacyFence(t);
    // Planned before that write: out of date, not contested (no conflict).
    await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG, 'v2\n', { observed_marker: before, action_seq: 9001 })),
      'StaleSnapshotRefusal',
    );
  });

  it('the watch reads no change against a baseline an older agent reported', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', CONFIG, 'v1\n'));
    const baseline = { config: await legacyMarker(t) };
    const result = await runActivity((r: WatchRequest) => t.acts.watch(r), {
      node: t.node,
      resources: spec,
      window_ms: 300,
      baseline,
    });
    expect(result).toMatchObject({ changed: [], reason: 'window elapsed' });
  });
});
