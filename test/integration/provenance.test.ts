import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { Fleet } from '../helpers/fleet';

/*
 * desired_provenance as DESIGN.md defines it: `revision` is the git commit that last touched the
 * file when the file is committed and clean, otherwise the sha256 of its bytes; `author` is the
 * commit's author, absent otherwise. On a real git checkout, with the real git, through the
 * authority the controller's readDesired activity reads.
 */

const run = promisify(execFile);
let fleet: Fleet;
const NODE = 'P-1';

async function git(...args: string[]): Promise<string> {
  const { stdout } = await run('git', ['-C', fleet.dir, ...args], {
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 'Alice Author',
      GIT_AUTHOR_EMAIL: 'alice@example.com',
      GIT_COMMITTER_NAME: 'Carol Committer',
      GIT_COMMITTER_EMAIL: 'carol@example.com',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_CONFIG_NOSYSTEM: '1',
    },
  });
  return stdout.trim();
}

async function sha256Of(file: string): Promise<string> {
  const { createHash } = await import('node:crypto');
  return `sha256:${createHash('sha256')
    .update(await fs.readFile(file))
    .digest('hex')}`;
}

async function provenance(authority: DesiredStateAuthority) {
  const read = await authority.read(NODE);
  if (!read.ok) throw new Error(read.error);
  return read.intent.provenance;
}

beforeAll(async () => {
  fleet = await Fleet.create('datum-provenance-');
  await git('init', '-q', '-b', 'main');
});
afterAll(async () => {
  await fleet?.remove();
});

describe('desired_provenance from a real git checkout', () => {
  it('uncommitted: the sha256 of the file; committed and clean: the commit and its author; dirty: the sha256 again', async () => {
    const file = fleet.desiredFile(NODE);
    await fleet.writeDesired(NODE, 1);
    // One authority for the whole test, as a worker keeps one: what it remembers must not hide a commit.
    const authority = new DesiredStateAuthority(fleet.dir);

    // A file git does not track yet.
    const untracked = await provenance(authority);
    expect(untracked).toMatchObject({ source: 'desired/nodes/P-1.yaml', revision: await sha256Of(file), author: null });

    // Added to the index but not committed: still no commit to name.
    await git('add', '-A');
    expect(await provenance(authority)).toMatchObject({ revision: await sha256Of(file), author: null });

    // Committed: the commit that last touched the file, and its author (not the committer).
    await git('commit', '-q', '-m', 'P-1 at generation 1');
    const first = await git('log', '-1', '--format=%H', '--', 'desired/nodes/P-1.yaml');
    expect(await provenance(authority)).toMatchObject({ revision: `git:${first}`, author: 'Alice Author <alice@example.com>' });

    // A later commit that does not touch the file leaves the file's revision where it was.
    await fs.writeFile(path.join(fleet.dir, 'README'), 'other change\n');
    await git('add', 'README');
    await git('commit', '-q', '-m', 'unrelated');
    expect(await provenance(authority)).toMatchObject({ revision: `git:${first}` });

    // Dirty: edited in the checkout after the commit. The commit does not describe these bytes.
    await fleet.writeDesired(NODE, 1, { workers: 9 });
    const dirty = await provenance(authority);
    expect(dirty).toMatchObject({ revision: await sha256Of(file), author: null });
    expect(dirty.revision).not.toBe(untracked.revision);

    // Committed again: the new commit.
    await git('commit', '-q', '-am', 'P-1 with 9 workers');
    const second = await git('log', '-1', '--format=%H', '--', 'desired/nodes/P-1.yaml');
    expect(second).not.toBe(first);
    expect(await provenance(authority)).toMatchObject({ revision: `git:${second}`, author: 'Alice Author <alice@example.com>' });
  });
});
