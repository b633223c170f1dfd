// Attack: a desired-state author asks for a setuid (or setgid) file. With an agent running as root
// and `owner: root`, mode 4755 on a file whose content the author also writes would hand every
// local user a root shell. Desired-state validation refuses the mode, naming the field and the
// fix; and the same action sent straight to the agent (a forged workflow, a namespace credential
// holder) is refused by the agent itself, whose rule is the same one: nothing is written, and an
// existing file never gains the bit.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidDesiredState } from '../../src/domain';
import { parseDesiredStateText } from '../../src/schemas/documents';
import { action, cleanupNodes, expectRefusal, makeNode, sha256 } from '../agent/helpers';

afterEach(cleanupNodes);

const SHELL = '#!/bin/sh\nexec /bin/sh -p\n';
const PROVENANCE = { revision: 'rev', author: null, loaded_at: '2026-12-01T00:00:00.000Z' };

const desired = (resource: string) => `node: N-24
generation: 7
resources:
${resource}
`;

function rejection(text: string): InvalidDesiredState {
  try {
    parseDesiredStateText(text, 'desired/nodes/N-24.yaml', PROVENANCE, 'N-24');
  } catch (err) {
    if (err instanceof InvalidDesiredState) return err;
    throw err;
  }
  throw new Error('the desired state was accepted');
}

describe('attack: a setuid file through desired state', () => {
  it.each([
    ['4755', 'setuid'],
    ['2755', 'setgid'],
    ['6755', 'setuid and setgid'],
  ])('mode "%s" on a file is invalid desired state (%s), naming the field and the fix', (mode, bits) => {
    const err = rejection(
      desired(`  shell: { type: file, path: bin/rootshell, owner: root, mode: "${mode}", content: ${JSON.stringify(SHELL)} }`),
    );
    expect(err.problems).toContainEqual({
      field: 'resources.shell.mode',
      problem: expect.stringMatching(
        new RegExp(`^mode "${mode}" sets the ${bits} bits? on a file: a setuid or setgid file runs`),
      ) as string,
      fix: expect.stringMatching(/^declare the permission bits only, such as "0755"/) as string,
    });
  });

  it('a mode written as a YAML number is refused rather than read as decimal', () => {
    const err = rejection(desired(`  shell: { type: file, path: bin/tool, mode: 04755, content: "x" }`));
    expect(err.problems[0]).toMatchObject({
      field: 'resources.shell.mode',
      problem: 'mode must be a quoted string of octal digits',
    });
  });

  it('a directory may be setgid or sticky, not setuid', () => {
    expect(() =>
      parseDesiredStateText(desired('  team: { type: directory, path: srv/team, mode: "3775" }'), 'd.yaml', PROVENANCE, 'N-24'),
    ).not.toThrow();
    expect(rejection(desired('  team: { type: directory, path: srv/team, mode: "4775" }')).problems[0]).toMatchObject({
      field: 'resources.team.mode',
      problem: 'mode "4775" sets the setuid bit on a directory: setuid means nothing on a Linux directory',
    });
  });
});

describe.runIf(process.getuid?.() === 0)('attack: a setuid file sent to the agent as a forged action', () => {
  it('file.write with mode 4755 is refused by the agent (InvalidAction), and no file is written', async () => {
    const t = await makeNode();
    const forged = action(t.node, 'shell', 'file.write', {
      path: 'bin/rootshell',
      content: SHELL,
      sha256: sha256(SHELL),
      owner: 'root',
      mode: '4755',
    });
    const refused = await expectRefusal(t.apply(forged), 'InvalidAction');
    expect(refused.message).toMatch(
      /^file\.write of "shell" on node N-24 refused: file\.write of "shell" asks mode "4755" sets the setuid bit on a file: .* — fix: declare the permission bits only/,
    );
    await expect(fs.lstat(path.join(t.root, 'bin/rootshell'))).rejects.toThrow(/ENOENT/);
  });

  it('file.attributes with mode 4755 on a file Datum already wrote is refused, and the file never gains the bit', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'bin'));
    const file = path.join(t.root, 'bin/tool');
    await fs.writeFile(file, SHELL, { mode: 0o755 });
    await fs.chmod(file, 0o755);
    const forged = action(t.node, 'tool', 'file.attributes', { path: 'bin/tool', sha256: sha256(SHELL), mode: '4755' });
    await expectRefusal(t.apply(forged), 'InvalidAction');
    expect((await fs.lstat(file)).mode & 0o7777).toBe(0o755);
  });

  it('directory.ensure with setuid is refused too', async () => {
    const t = await makeNode();
    const forged = action(t.node, 'd', 'directory.ensure', { path: 'srv/d', mode: '4755' });
    await expectRefusal(t.apply(forged), 'InvalidAction');
    await expect(fs.lstat(path.join(t.root, 'srv/d'))).rejects.toThrow(/ENOENT/);
  });
});
