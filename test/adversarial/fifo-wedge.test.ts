// Issue 18, hole 7: a FIFO planted in a node's root wedged the agent for every node it serves.
// A read of a .datum/*.json record or of a release record that is a FIFO blocked one of libuv's
// four pool threads in open(2) for good; four observes of the node took every thread, and the
// agent process (which may serve many nodes) answered no node any more. Here one process serves
// two nodes, as `datum agent` does with several agent.yaml files: node A is full of FIFOs where
// Datum expects regular files and is observed again and again; node B must still be observed
// and written, and A's observation names each FIFO instead of hanging on it.

import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ObserveRequest } from '../../src/contract';
import { cleanupNodes, fileAction, makeNode, runActivity, type TestNode } from '../agent/helpers';

/** Where Datum expects one of its own regular files, or a resource's. */
const PLANTED = [
  '.datum/fence.json',
  '.datum/claims.json',
  '.datum/decisions.json',
  '.datum/services/app.json',
  'releases/7.4/.datum-release.json',
  'flags/maintenance.json',
  'etc/app.conf',
];

const RESOURCES: ObserveRequest['resources'] = {
  build: { type: 'release', version: '7.4', artifact: '/nowhere/app-7.4.tgz', sha256: 'ab'.repeat(32) },
  app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
  maintenance: { type: 'flag', value: false },
  config: { type: 'file', path: 'etc/app.conf', content: 'x' },
};

let fifos: string[] = [];

afterEach(async () => {
  // Should a reader still be blocked (the fix reverted), a writer that opens each FIFO once lets it go.
  if (fifos.length > 0) {
    // O_NONBLOCK: with no reader blocked there, the open fails at once (ENXIO) instead of waiting for one.
    const script = `const fs = require('node:fs');
      for (const f of process.argv.slice(1)) for (let i = 0; i < 16; i++)
        try { fs.closeSync(fs.openSync(f, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)); } catch {}`;
    const child = spawn(process.execPath, ['-e', script, ...fifos], { stdio: 'ignore' });
    await once(child, 'exit');
    for (const f of fifos) await fs.rm(f, { force: true });
  }
  fifos = [];
  await cleanupNodes();
});

async function plant(t: TestNode): Promise<void> {
  for (const rel of PLANTED) {
    const at = path.join(t.root, rel);
    await fs.mkdir(path.dirname(at), { recursive: true });
    execFileSync('mkfifo', [at]);
    fifos.push(at);
  }
}

const observeGen = (t: TestNode) =>
  runActivity((r: ObserveRequest) => t.acts.observe(r), { node: t.node, resources: RESOURCES, generation: 12 });

describe('attack: FIFOs planted where the agent reads its records', () => {
  it('never block: node A is observed with each FIFO named, and node B of the same process is still observed and written', async () => {
    const a = await makeNode({ node: 'N-A' });
    const b = await makeNode({ node: 'N-B' });
    await plant(a);

    // More observes of A than libuv has threads (4): before, each left a thread blocked for good.
    const seen = await Promise.all(Array.from({ length: 8 }, () => observeGen(a)));
    for (const obs of seen) {
      expect(obs.resources.config.obstruction).toContain('"etc/app.conf" is a FIFO, not a regular file');
      expect(obs.resources.maintenance.obstruction).toContain('"flags/maintenance.json" is a FIFO, not a regular file');
      expect(obs.resources.app.obstruction).toMatch(/services\/app\.json" is a FIFO, not a regular file.* — fix: remove /);
      expect(obs.resources.build.obstruction).toMatch(/releases\/7\.4 exists without a readable \.datum-release\.json/);
    }
    // A write on A is refused (its records cannot be read), naming the FIFO, and waits on nothing.
    const refused = await a.apply(fileAction(a.node, 'other', 'etc/other.conf', 'x')).catch((err: Error) => err);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toMatch(/\.datum\/(claims|decisions|fence)\.json is a FIFO, not a regular file/);

    // Node B, served by the same process, is observed and written as if A were not there.
    const written = await b.apply(fileAction(b.node, 'config', 'etc/app.conf', 'hello\n'));
    expect(written.outcome).toBe('applied');
    const obs = await observeGen(b);
    expect(obs.resources.config).toMatchObject({ value: expect.any(String) as string, obstruction: null });
    expect(await fs.readFile(path.join(b.root, 'etc/app.conf'), 'utf8')).toBe('hello\n');
  }, 60_000);

  it('agent.yaml swapped for a FIFO is an invalid config, not a wedge', async () => {
    const t = await makeNode();
    await fs.rm(t.configPath);
    execFileSync('mkfifo', [t.configPath]);
    fifos.push(t.configPath);
    const obs = await observeGen(t);
    expect(obs.config_error).toMatch(/is a FIFO, not a regular file/);
  }, 60_000);
});
