// Issue 18, hole 8 (the agent's side), its spelling half: a path segment longer than the
// filesystem allows made every observe of the node fail with ENAMETOOLONG, so the node was
// NODE_UNREACHABLE for good. A segment over NAME_MAX is now judged by its spelling before the
// filesystem is asked (src/domain/rootPath.ts, the same rule desired-state validation applies:
// name-too-long-desired.test.ts), and refused as that resource's finding; the node's other
// resources are observed and written as usual. This never reaches the filesystem, so it cannot
// guard the errno branch (src/agent/providers/types.ts observeGuarded) that turns a real
// filesystem error of one resource into its finding: errno-one-resource.test.ts does, with an
// error no spelling check can see.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupNodes, fileAction, makeNode } from '../agent/helpers';

afterEach(cleanupNodes);

describe('attack: a file path with a segment longer than the filesystem allows', () => {
  it('is refused by its spelling as that resource’s finding, naming the fix; the node’s other resources are observed and repaired', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc')); // the long segment is then looked up, not a missing parent
    const long = `etc/${'n'.repeat(300)}/app.conf`;
    const resources = {
      huge: { type: 'file' as const, path: long, content: 'x' },
      config: { type: 'file' as const, path: 'etc/app.conf', content: 'ok\n' },
      maintenance: { type: 'flag' as const, value: false },
    };
    const obs = await t.observe(resources);
    expect(obs.resources.huge).toMatchObject({ value: null, marker: null, detail: { refusal: 'InvalidAction' } });
    expect(obs.resources.huge.obstruction).toMatch(
      /has a directory name of 300 bytes .*more than the 255 bytes a filesystem takes for one name — fix: shorten the path/,
    );
    expect(obs.resources.config).toMatchObject({ value: null, marker: 'absent', obstruction: null });
    expect(obs.config_error).toBeNull();
    expect(obs.resources.maintenance).toMatchObject({ marker: 'absent', obstruction: null });

    const written = await t.apply(fileAction(t.node, 'config', 'etc/app.conf', 'ok\n'));
    expect(written.outcome).toBe('applied');
    expect(await fs.readFile(path.join(t.root, 'etc/app.conf'), 'utf8')).toBe('ok\n');
  });
});
