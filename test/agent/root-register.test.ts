import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { registerRoot, registeredRoots, runtimeDir } from '../../src/agent/fs/registry';

/*
 * The host's register of roots (src/agent/fs/registry.ts) while other agents look at it. Another
 * agent's liveness probe holds a shared lock on an entry for a moment; an agent registering that
 * entry then must wait the probe out, not read it as a live holder. Six agents of `datum dev`
 * starting together refused one another so ("registered by another process"): one dev start in
 * four here, and the CI run of stop 38. Six processes taking roots 30 to 60 ms apart (a script, not
 * kept: about one round in fifteen failed) do not fail the same way reliably enough to be the
 * test; a probe held for 0.4 s does, every time.
 */

const made: string[] = [];

afterEach(async () => {
  for (const d of made.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

async function dirs(n: number): Promise<string[]> {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-register-')));
  made.push(base);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const d = path.join(base, `R-${i}`);
    await fs.mkdir(d);
    out.push(d);
  }
  return out;
}

/** Another process's lock on `file` (flock(1), as a probe or a live agent takes it), held until it is killed; resolves once held. */
async function heldElsewhere(file: string, mode: '--shared' | '--exclusive', seconds: number) {
  // Its own process group: the shell and sleep inherit the locked descriptor, and all of them go.
  const child = spawn('flock', [mode, file, '-c', `echo held; sleep ${seconds}`], {
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { gone, kill: () => process.kill(-child.pid!, 'SIGKILL') };
}

const entryOf = async (dir: string) => {
  const st = await fs.stat(dir);
  return { id: { dev: st.dev, ino: st.ino }, file: path.join(runtimeDir(), 'roots', `${st.dev}-${st.ino}.json`) };
};

describe('registering a root', () => {
  it('waits out a probe that holds its entry for a moment, and then registers', async () => {
    const [root] = await dirs(1);
    const { id, file } = await entryOf(root);
    await fs.mkdir(path.dirname(file), { recursive: true });
    const probe = await heldElsewhere(file, '--shared', 0.4);
    const entry = await registerRoot(id, { root: root, node: 'R-0', pid: process.pid, config: 'c.yaml', since: 'now' });
    expect(entry).not.toBeNull();
    await probe.gone;
    expect((await registeredRoots()).map((r) => r.node)).toContain('R-0');
    await entry!.release();
  });

  it('is refused while another process holds the entry, once the wait for probes is over', async () => {
    const [root] = await dirs(1);
    const { id, file } = await entryOf(root);
    await fs.mkdir(path.dirname(file), { recursive: true });
    const holder = await heldElsewhere(file, '--exclusive', 60);
    try {
      expect(await registerRoot(id, { root: root, node: 'R-0', pid: process.pid, config: 'c.yaml', since: 'now' })).toBeNull();
    } finally {
      holder.kill();
      await holder.gone;
    }
  });
});
