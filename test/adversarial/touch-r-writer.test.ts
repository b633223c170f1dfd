// Issue 18, hole 10a: a writer that preserves mtime, inode and size was invisible to the marker.
// It rewrites the file in place with bytes of the same length and then sets the mtime back
// (`touch -r`), as some config tools and backup restores do. The marker was mtime + inode +
// size, all unchanged: an apply planned before the change went ahead and overwrote it, and the
// loop never saw another writer. Now the marker carries ctime (which no writer can set back)
// and the bytes' digest: the change moves it, and the apply is refused as MARKER_MOVED.

import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupNodes, expectRefusal, fileAction, makeNode } from '../agent/helpers';

afterEach(cleanupNodes);

describe('attack: a writer that rewrites in place and restores mtime (touch -r)', () => {
  it('moves the marker, so the apply planned before it is refused as MARKER_MOVED and its bytes stay', async () => {
    const t = await makeNode();
    const file = path.join(t.root, 'etc/app.conf');
    await t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'workers=8\n'));
    const spec = { config: { type: 'file' as const, path: 'etc/app.conf', content: 'workers=9\n' } };
    const planned = (await t.observe(spec)).resources.config.marker;
    const before = await fs.stat(file);

    // A real separate process: same length, in place, then the old mtime back.
    const ref = path.join(t.base, 'ref');
    execFileSync('sh', ['-c', 'touch -r "$1" "$2" && printf "workers=3\\n" 1<> "$1" && touch -r "$2" "$1"', 'sh', file, ref]);
    const after = await fs.stat(file);
    expect([after.ino, after.size, after.mtimeMs]).toEqual([before.ino, before.size, before.mtimeMs]);

    expect((await t.observe(spec)).resources.config.marker).not.toBe(planned);
    const refused = await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'workers=9\n', { observed_marker: planned })),
      'MarkerMoved',
    );
    expect(refused.message).toContain('MARKER_MOVED');
    expect(await fs.readFile(file, 'utf8')).toBe('workers=3\n');
  });
});
