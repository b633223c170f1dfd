import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { registerRoot, registeredRoots, runtimeDir, unregisterRoot } from '../../src/agent/fs/registry';
import { takeRoot, type RootLease } from '../../src/agent/node/root-lease';
import { lockedByAnyone } from '../../src/agent/fs/locks';

/*
 * The host's register of roots (src/agent/fs/registry.ts) while other agents look at it. Another
 * agent's liveness probe holds a shared lock on an entry for a moment; an agent registering that
 * entry then must wait the probe out, not read it as a live holder. Six agents of `datum dev`
 * starting together refused one another so ("registered by another process"): one dev start in
 * four here, and the CI run of stop 38. Six processes taking roots 30 to 60 ms apart (a script, not
 * kept: about one round in fifteen failed) do not fail the same way reliably enough to be the
 * test; a probe held for 0.4 s does, every time. And an agent taking a root probes only the
 * entries that could be nested in it: it probed every sibling before, N² flock(1) processes for an
 * agent of N nodes (one of 1000 nodes had not started after 5 minutes).
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
  let alive = true;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void gone.then(() => (alive = false));
  return { gone, alive: () => alive, kill: () => process.kill(-child.pid!, 'SIGKILL') };
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
    expect((await registeredRoots(() => true)).map((r) => r.node)).toContain('R-0');
    await unregisterRoot(entry!);
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

  it("probes no other agent's sibling root: taking a root beside ten runs flock(1) twice, for its own lock and its own entry", async () => {
    const roots = await dirs(11);
    // Ten roots registered by other agents: their entries, each held by another process.
    const others = [];
    for (const [i, r] of roots.slice(0, 10).entries()) {
      const { file } = await entryOf(r);
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(file, JSON.stringify({ root: r, node: `R-${i}`, pid: 1, config: 'agent.yaml', since: 'now' }));
      others.push(await heldElsewhere(file, '--exclusive', 60));
    }
    // flock(1) on PATH first: a shim that counts its runs, then runs the real one.
    const shim = path.join(path.dirname(roots[0]), 'bin');
    await fs.mkdir(shim);
    const log = path.join(shim, 'runs');
    await fs.writeFile(path.join(shim, 'flock'), `#!/bin/sh\necho "$*" >> ${log}\nexec /usr/bin/flock "$@"\n`, { mode: 0o755 });
    const pathBefore = process.env.PATH;
    let lease: RootLease | undefined;
    try {
      process.env.PATH = `${shim}:${pathBefore}`;
      lease = await takeRoot(roots[10], 'R-10', 'agent.yaml');
      expect((await fs.readFile(log, 'utf8')).trim().split('\n')).toHaveLength(2);
    } finally {
      process.env.PATH = pathBefore;
      await lease?.release();
      for (const o of others) o.kill();
      await Promise.all(others.map((o) => o.gone));
    }
  });
});

describe('probing an entry', () => {
  it('tells a live holder from none with no program on PATH but flock(1) (a unit or a package sets its own PATH)', async () => {
    const [root] = await dirs(1);
    const file = path.join(root, 'entry.json');
    await fs.writeFile(file, '{}\n');
    const emptyPath = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-nopath-')));
    made.push(emptyPath);
    const holder = await heldElsewhere(file, '--exclusive', 30);
    const saved = process.env.PATH;
    // flock(1) is still found where util-linux puts it; `true`, `sh` and the rest are not on this PATH.
    process.env.PATH = emptyPath;
    try {
      expect(await lockedByAnyone(file)).toBe(true);
      holder.kill();
      await holder.gone;
      expect(await lockedByAnyone(file)).toBe(false);
      // An entry gone between the listing and the probe is held by no one.
      expect(await lockedByAnyone(path.join(root, 'gone.json'))).toBe(false);
    } finally {
      process.env.PATH = saved;
      // Gone already when the test got as far as killing it itself.
      if (holder.alive()) holder.kill();
    }
  });
});
