// Hole 6 (service state files trusted) and the kill -9 gap of hole 9, against real processes:
// a forged state file naming an unrelated process (a `sleep` this test starts, in its own
// process group, even inside the node's releases) or pid 1 is reported and never signalled; an
// agent killed with SIGKILL right after spawning a service leaves exactly one instance, which the
// retry adopts instead of starting a second one (counted from /proc, outside Datum).

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { limits } from '../../src/agent/limits';
import { startTicks } from '../../src/agent/services';
import { desiredValue, type AuthorizedAction, type ResourceSpec } from '../../src/domain';
import {
  action,
  buildArtifact,
  cleanupNodes,
  expectRefusal,
  fileAction,
  makeNode,
  releaseAction,
  tarGz,
  writeArtifact,
  type TestNode,
} from '../agent/helpers';

const strangers: ChildProcess[] = [];
afterEach(async () => {
  for (const p of strangers.splice(0)) p.kill('SIGKILL');
  await cleanupNodes();
});

const CONFIG_PATH = 'etc/app/config.json';

/** A node with the demo app's release installed and its config written; the service not started. */
async function nodeWithApp(): Promise<{ t: TestNode; res: Record<string, ResourceSpec>; start: AuthorizedAction }> {
  const t = await makeNode();
  const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
  const res: Record<string, ResourceSpec> = {
    build: { type: 'release', version: '7.4', artifact: art.file, sha256: art.sha256 },
    config: { type: 'file', path: CONFIG_PATH, content: { workers: 8 } },
    app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
  };
  await t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: art.sha256 }));
  await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }));
  return { t, res, start: action(t.node, 'app', 'service.start', serviceSpec(res), { observed_marker: null }) };
}

function serviceSpec(res: Record<string, ResourceSpec>) {
  const expected = desiredValue('app', res) as { build: string; config_sha256: string };
  return {
    command: ['node', 'server.js'],
    build: expected.build,
    config_path: CONFIG_PATH,
    config_sha256: expected.config_sha256,
  };
}

/** An unrelated process, the leader of its own process group, working in `cwd`. */
async function stranger(cwd: string): Promise<{ pid: number; ticks: string }> {
  const child = spawn('sleep', ['300'], { cwd, detached: true, stdio: 'ignore' });
  strangers.push(child);
  await once(child, 'spawn');
  const ticks = await startTicks(child.pid!);
  return { pid: child.pid!, ticks: ticks! };
}

async function forgeState(t: TestNode, state: Record<string, unknown>): Promise<void> {
  await fs.mkdir(path.join(t.root, '.datum/services'), { recursive: true });
  await fs.writeFile(path.join(t.root, '.datum/services/app.json'), JSON.stringify(state));
}

const forged = (t: TestNode, pid: number, ticks: string, cwd: string) => ({
  key: 'app',
  pid,
  port: 1,
  start_ticks: ticks,
  command: ['sleep', '300'],
  started_at: '2026-01-01T00:00:00.000Z',
  cwd,
  config_path: path.join(t.root, CONFIG_PATH),
  log: '.datum/services/app.log',
  nonce: randomBytes(16).toString('hex'),
});

/** Every process whose working directory is inside the root: the instances of the service. */
async function instancesUnder(root: string): Promise<number[]> {
  const real = await fs.realpath(root);
  const pids: number[] = [];
  for (const name of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cwd = await fs.readlink(`/proc/${name}/cwd`).catch(() => null);
    if (cwd !== null && cwd.startsWith(`${real}/`) && (await startTicks(Number(name))) !== null) pids.push(Number(name));
  }
  return pids.sort();
}

describe('attack: a forged service state file', () => {
  it.each([
    ['outside the root', (t: TestNode) => t.outside, /works in .*outside, not in a release of this node/],
    ['inside the release, with its real command', (t: TestNode) => path.join(t.root, 'releases/7.4'), /does not carry the nonce/],
  ])('naming an unrelated process working %s: nothing is signalled, the observation says why', async (_where, cwdOf, why) => {
    const { t, res } = await nodeWithApp();
    const victim = await stranger(cwdOf(t));
    await forgeState(t, forged(t, victim.pid, victim.ticks, cwdOf(t)));

    const obs = await t.observe(res);
    expect(obs.resources.app).toMatchObject({ value: null, marker: null, detail: { claimed_pid: victim.pid } });
    expect(obs.resources.app.obstruction).toMatch(
      /^the state file \.datum\/services\/app\.json of service "app" names a process Datum cannot prove it started: pid \d+ /,
    );
    expect(obs.resources.app.obstruction).toMatch(why);
    expect(obs.resources.app.obstruction).toMatch(/nothing was signalled — fix: check that process by hand, then remove/);

    for (const kind of ['service.restart', 'service.start']) {
      const a = action(t.node, 'app', kind, serviceSpec(res), { observed_marker: null });
      const failure = await expectRefusal(t.apply(a), 'ServiceIdentityUnverified');
      expect(failure.message).toMatch(why);
    }
    // Still alive, the same process, and no instance of the service was started beside it.
    expect(await startTicks(victim.pid)).toBe(victim.ticks);
    expect(await instancesUnder(t.root)).toEqual(cwdOf(t).startsWith(t.root) ? [victim.pid] : []);
  });

  it('naming pid 1: never signalled, reported as not a service', async () => {
    const { t, res, start } = await nodeWithApp();
    // The forger can read pid 1's real start time; that alone must not make it "ours".
    await forgeState(t, { ...forged(t, 1, (await startTicks(1))!, t.root), command: ['init'] });
    const obs = await t.observe(res);
    expect(obs.resources.app.obstruction).toContain('pid 1 is the init process, never a service Datum started');
    const failure = await expectRefusal(t.apply(start), 'ServiceIdentityUnverified');
    expect(failure.message).toContain('nothing was signalled');
  });

  it.each([
    ['pid 0', { pid: 0 }],
    ['a negative pid (a process group)', { pid: -1 }],
    ['another service’s state', { key: 'other' }],
  ])('with %s: reported as not a state file Datum wrote, and refused', async (_what, over) => {
    const { t, res, start } = await nodeWithApp();
    await forgeState(t, { ...forged(t, 2, '1', t.root), ...over });
    const obs = await t.observe(res);
    expect(obs.resources.app.obstruction).toMatch(
      /names a process Datum cannot prove it started: the file is not a state file Datum wrote/,
    );
    await expectRefusal(t.apply(start), 'ServiceIdentityUnverified');
    expect(await instancesUnder(t.root)).toEqual([]);
  });
});

describe('attack: the agent is killed with SIGKILL between spawning a service and recording it', () => {
  /** The agent's apply in a child process of its own (the built agent in dist/), killed at `point`. */
  async function applyInChild(t: TestNode, a: AuthorizedAction, point: string): Promise<NodeJS.Signals | number | null> {
    const agent = path.resolve(__dirname, '../../dist/src/agent/activities/index.js');
    const script = `require(${JSON.stringify(agent)}).applyAction(process.argv[1], JSON.parse(process.argv[2])).then(() => process.exit(0), (e) => { console.error(e); process.exit(3); });`;
    const child = spawn(process.execPath, ['-e', script, t.configPath, JSON.stringify({ node: t.node, action: a })], {
      env: { ...process.env, DATUM_TEST_CRASH_AT: point },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    return signal ?? code;
  }

  it('leaves one instance, which the retry adopts instead of starting a second', async () => {
    const { t, res, start } = await nodeWithApp();
    expect(await applyInChild(t, start, 'service.spawned')).toBe('SIGKILL');
    const orphans = await instancesUnder(t.root);
    expect(orphans).toHaveLength(1); // spawned, and recorded nowhere but in the intent
    await expect(fs.lstat(path.join(t.root, '.datum/services/app.json'))).rejects.toThrow(/ENOENT/);

    // Temporal retries the same apply (the first attempt never answered).
    const retried = await t.apply(start);
    expect(retried.outcome).toBe('applied');
    expect(retried.detail).toMatch(
      new RegExp(`^adopted pid ${orphans[0]} on port \\d+, started by an attempt the agent did not live to record`),
    );
    expect(await instancesUnder(t.root)).toEqual(orphans);
    const obs = await t.observe(res);
    expect(obs.resources.app).toMatchObject({ value: desiredValue('app', res), detail: { running: true, pid: orphans[0] } });
    expect(await fs.readdir(path.join(t.root, '.datum/services'))).not.toContain('app.intent.json');
  }, 60_000);
});

describe('service logs', () => {
  it(`are rotated past the cap when observed (MAX_SERVICE_LOG_BYTES), keeping the newest bytes`, async () => {
    const { t, res, start } = await nodeWithApp();
    await t.apply(start);
    const log = path.join(t.root, '.datum/services/app.log');
    const saved = limits.serviceLogBytes;
    limits.serviceLogBytes = 1000;
    try {
      await fs.appendFile(log, `${'x'.repeat(5000)}THE END\n`);
      await t.observe(res);
    } finally {
      limits.serviceLogBytes = saved;
    }
    expect((await fs.stat(log)).size).toBe(0);
    const rotated = await fs.readFile(`${log}.1`, 'utf8');
    expect(rotated).toHaveLength(1000);
    expect(rotated.endsWith('THE END\n')).toBe(true);
  });
});

describe('attack: the service log hard-linked to a file outside the root', () => {
  /** A file outside the root, and the service log made a second name for it. */
  async function linkedVictim(t: TestNode, content: string): Promise<string> {
    const victim = path.join(t.outside, 'victim.txt');
    await fs.mkdir(t.outside, { recursive: true });
    await fs.writeFile(victim, content);
    await fs.mkdir(path.join(t.root, '.datum/services'), { recursive: true });
    await fs.rm(path.join(t.root, '.datum/services/app.log'), { force: true });
    await fs.link(victim, path.join(t.root, '.datum/services/app.log'));
    return victim;
  }

  it('before the start: the service logs to a fresh file of its own, the victim is not appended to', async () => {
    const { t, res, start } = await nodeWithApp();
    const victim = await linkedVictim(t, 'the victim\n');
    await t.apply(start);
    await t.observe(res);
    expect(await fs.readFile(victim, 'utf8')).toBe('the victim\n');
    const log = await fs.stat(path.join(t.root, '.datum/services/app.log'));
    expect(log.nlink).toBe(1);
    expect(log.ino).not.toBe((await fs.stat(victim)).ino);
    expect(await fs.readFile(path.join(t.root, '.datum/services/app.log'), 'utf8')).toMatch(/--- datum .*: starting/);
  });

  it('before a rotation: the victim is neither truncated nor copied into the root', async () => {
    const { t, res, start } = await nodeWithApp();
    await t.apply(start);
    const victim = await linkedVictim(t, `${'secret '.repeat(400)}\n`);
    const saved = limits.serviceLogBytes;
    limits.serviceLogBytes = 1000;
    try {
      await t.observe(res);
    } finally {
      limits.serviceLogBytes = saved;
    }
    expect(await fs.readFile(victim, 'utf8')).toBe(`${'secret '.repeat(400)}\n`);
    await expect(fs.readFile(path.join(t.root, '.datum/services/app.log.1'), 'utf8')).rejects.toThrow(/ENOENT/);
    await expect(fs.stat(path.join(t.root, '.datum/services/app.log'))).rejects.toThrow(/ENOENT/);
  });
});

describe('identity of a service started through a "#!" script', () => {
  it('is still proved (the interpreter in front of the command), so a restart stops it', async () => {
    const t = await makeNode();
    const server = `require('node:http').createServer((q, s) => s.end(JSON.stringify({ build: 'sh', config_sha256: null }))).listen(Number(process.env.PORT), '127.0.0.1');`;
    const art = await writeArtifact(
      t,
      'sh.tgz',
      tarGz([
        { name: 's.js', content: server },
        { name: 'run.sh', content: '#!/bin/sh\nnode s.js\n', mode: 0o755 },
      ]),
    );
    await t.apply(releaseAction(t, 'sh', art));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, 'x'));
    const spec = { command: ['./run.sh'], build: 'sh', config_path: CONFIG_PATH, config_sha256: null };
    const first = await t.apply(action(t.node, 'app', 'service.start', spec, { observed_marker: null }));
    const pid = Number(/^pid:(\d+):/.exec(first.marker_after ?? '')?.[1]);
    expect((await fs.readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0')[0]).toBe('/bin/sh');
    const second = await t.apply(action(t.node, 'app', 'service.restart', spec));
    expect(second.detail).toMatch(new RegExp(`^stopped pid ${pid} with SIGTERM, then started pid \\d+`));
    expect(await startTicks(pid)).toBeNull();
  }, 30_000);
});
