import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loopTaskQueue, reconcileWorkflowId } from '../../src/contract';
import { devServerFlags } from '../../src/worker/dev-server';
import { temporalCliPath } from '../../src/worker/paths';
import { DATUM } from '../helpers/cli';
import { FAST_POLICY } from '../helpers/fleet';
import { Hosts, type HostProcess } from '../helpers/hosts';
import { findServerBinaries, installServer } from '../helpers/postgres';
import { tail } from '../helpers/tools';
import { until as untilHelper } from '../helpers/until';

/** Waits for `probe` to answer (an error counts as not yet), with `context` on timeout. */
const until = <T>(what: string, probe: () => T | Promise<T>, timeoutMs: number, context?: () => string) =>
  untilHelper(probe, { what, timeoutMs, intervalMs: 500, errors: 'retry', ...(context ? { context } : {}) });

/*
 * A fleet across machines (issue 33, item 5), each machine a network namespace with its own
 * address and hostname on one switch:
 *   srv    10.88.0.1  the Temporal server and PostgreSQL (the shared ledger)
 *   c1     10.88.0.2  a controller worker, with its own git checkout of the authority
 *   c2     10.88.0.3  another controller worker, with its own checkout
 *   agent  10.88.0.4  one `datum agent` serving four nodes
 *   op     10.88.0.5  the operator's CLI, with the checkout the operator commits from
 * The loops run in two shards (--loop-shards 2), and both controllers serve both. The test cuts
 * c1 off the switch and asserts that the loops carry on with c2 alone; then it lets the two
 * checkouts disagree and asserts that the controller behind refuses the newer generation instead
 * of acting on the older one, and carries it out once it has pulled.
 */

const NODES = ['N-1', 'N-2', 'N-3', 'N-4'];
const SHARDS = 2;
const ADDRESS = '10.88.0.1:7233';
const GIT = ['git', '-c', 'user.name=operator', '-c', 'user.email=operator@example.com'];

let hosts: Hosts;
let base: string;
let ledgerUrl: string;
const controllers: Record<string, HostProcess> = {};

const checkout = (host: string) => path.join(base, host, 'fleet');
const rootOf = (node: string) => path.join(base, 'agent', 'nodes', node);
const motd = (node: string) => fs.readFile(path.join(rootOf(node), 'etc', 'motd'), 'utf8').catch(() => null);

/** A command on a host that must succeed; its stdout. */
async function must(host: string, argv: string[], env: NodeJS.ProcessEnv = {}, timeoutMs?: number): Promise<string> {
  const r = await hosts.exec(host, argv, env, timeoutMs);
  if (r.code !== 0) throw new Error(`${argv.join(' ')} on ${host} exited ${r.code}:\n${tail(r.stdout)}\n${tail(r.stderr)}`);
  return r.stdout;
}

const datum = (host: string, args: string[], timeoutMs = 240_000) =>
  hosts.exec(host, [process.execPath, DATUM, ...args, '--address', ADDRESS], {}, timeoutMs);
const temporal = (host: string, args: string[]) => must(host, [temporalCliPath(), ...args, '--address', ADDRESS]);

/** The operator writes generation `g` of every node and pushes it to the authority's repository. */
async function commitGeneration(g: number): Promise<void> {
  for (const node of NODES) {
    const doc = {
      node,
      generation: g,
      resources: { motd: { type: 'file', path: 'etc/motd', content: `generation ${g} of ${node}\n` } },
      policy: FAST_POLICY,
    };
    await fs.writeFile(path.join(checkout('op'), 'desired', 'nodes', `${node}.yaml`), stringify(doc));
  }
  await must('op', [...GIT, '-C', checkout('op'), 'add', '-A']);
  await must('op', [...GIT, '-C', checkout('op'), 'commit', '-q', '-m', `generation ${g}`]);
  await must('op', [...GIT, '-C', checkout('op'), 'push', '-q', 'origin', 'HEAD:main']);
}

/** A controller host brings its checkout in step (what its timer does in production: docs/operations.md). */
const pull = (host: string) => must(host, [...GIT, '-C', checkout(host), 'pull', '-q', '--ff-only', 'origin', 'main']);

/** The workflow task completions in a loop's history, by the hostname in the worker identity (<pid>@<host>). */
async function completedBy(workflowId: string): Promise<Record<string, number>> {
  const history = await temporal('op', ['workflow', 'show', '--workflow-id', workflowId, '-o', 'json']);
  const by: Record<string, number> = {};
  for (const m of history.matchAll(/"workflowTaskCompletedEventAttributes":\s*\{[^}]*?"identity":\s*"\d+@([\w-]+)"/g))
    by[m[1]] = (by[m[1]] ?? 0) + 1;
  return by;
}

async function startPostgres(): Promise<void> {
  const bin = findServerBinaries() ?? (await installServer());
  const dir = path.join(base, 'pg');
  await fs.mkdir(dir);
  const password = randomBytes(12).toString('hex');
  await fs.writeFile(path.join(dir, 'pwfile'), `${password}\n`);
  // PostgreSQL refuses root: it runs as the postgres user the Debian package makes.
  spawnSync('chown', ['-R', 'postgres:postgres', dir]);
  const data = path.join(dir, 'data');
  await must('srv', [
    'runuser',
    '-u',
    'postgres',
    '--',
    path.join(bin, 'initdb'),
    '-D',
    data,
    '-U',
    'datum',
    `--pwfile=${path.join(dir, 'pwfile')}`,
    '--auth-host=scram-sha-256',
    '--auth-local=trust',
    '--no-sync',
  ]);
  await fs.appendFile(path.join(data, 'pg_hba.conf'), 'host all all 10.88.0.0/24 scram-sha-256\n');
  const server = hosts.start('srv', [
    'runuser',
    '-u',
    'postgres',
    '--',
    path.join(bin, 'postgres'),
    '-D',
    data,
    '-h',
    '10.88.0.1',
    '-p',
    '5432',
    '-k',
    dir,
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
  ]);
  await until(
    'PostgreSQL on srv',
    async () => (await hosts.exec('c1', [path.join(bin, 'pg_isready'), '-h', '10.88.0.1', '-p', '5432'])).code === 0,
    60_000,
    () => server.output(),
  );
  ledgerUrl = `postgres://datum:${password}@10.88.0.1:5432/postgres`;
}

async function startController(host: string): Promise<void> {
  const worker = hosts.start(
    host,
    [
      process.execPath,
      DATUM,
      'worker',
      '--fleet',
      checkout(host),
      '--data',
      path.join(base, host, 'data'),
      '--address',
      ADDRESS,
      '--loop-shards',
      String(SHARDS),
    ],
    { DATUM_LEDGER_URL: ledgerUrl },
  );
  controllers[host] = worker;
  await until(
    `the controller on ${host}`,
    () => /datum worker: task queue/.test(worker.output()),
    90_000,
    () => worker.output(),
  );
}

beforeAll(async () => {
  hosts = await Hosts.create(['srv', 'c1', 'c2', 'agent', 'op']);
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-hosts-')));
  await fs.chmod(base, 0o755); // the postgres user must reach its directory
  await startPostgres();
  // --ip 0.0.0.0, every address of srv's own namespace: with --ip 10.88.0.1 the dev server binds
  // its history and matching services there too but dials them on 127.0.0.1 (connection refused).
  const server = hosts.start('srv', [
    temporalCliPath(),
    'server',
    'start-dev',
    '--headless',
    '--ip',
    '0.0.0.0',
    '--port',
    '7233',
    '--http-port',
    '7243',
    '--db-filename',
    path.join(base, 'temporal.db'),
    '--log-level',
    'error',
    ...devServerFlags(),
  ]);
  await until(
    'the Temporal server on srv',
    async () => (await hosts.exec('op', [temporalCliPath(), 'operator', 'cluster', 'health', '--address', ADDRESS])).code === 0,
    90_000,
    () => server.output(),
  );
  // The authority: one repository, a checkout per controller host, and the operator's.
  const repo = path.join(base, 'authority.git');
  await must('op', [...GIT, 'init', '-q', '--bare', '--initial-branch=main', repo]);
  for (const host of ['op', 'c1', 'c2']) {
    await fs.mkdir(path.join(base, host), { recursive: true });
    await must(host, [...GIT, 'clone', '-q', repo, checkout(host)]);
  }
  await fs.mkdir(path.join(checkout('op'), 'desired', 'nodes'), { recursive: true });
  await commitGeneration(1);
  for (const host of ['c1', 'c2']) await pull(host);
  // One agent on its own host for the four nodes.
  const configs: string[] = [];
  for (const node of NODES) {
    await fs.mkdir(rootOf(node), { recursive: true });
    const file = path.join(base, 'agent', `${node}.yaml`);
    await fs.writeFile(file, stringify({ node, root: rootOf(node), reconciliation: { mode: 'enforce', resources: {} } }));
    configs.push(file);
  }
  const agent = hosts.start(
    'agent',
    [process.execPath, DATUM, 'agent', ...configs.flatMap((c) => ['--config', c]), '--address', ADDRESS],
    { DATUM_RUNTIME_DIR: path.join(base, 'agent', 'run') },
  );
  await until(
    'the agent on its host',
    () => /datum agent: serving /.test(agent.output()),
    60_000,
    () => agent.output(),
  );
  await Promise.all([startController('c1'), startController('c2')]);
}, 600_000);

afterAll(async () => {
  hosts?.remove();
  if (base) await fs.rm(base, { recursive: true, force: true });
}, 60_000);

const logs = () =>
  Object.entries(controllers)
    .map(([h, p]) => `--- ${h}\n${tail(p.output(), 40)}`)
    .join('\n');

describe('a fleet across hosts', () => {
  it('rolls out from the operator host; each loop runs on its shard queue, which both controller hosts poll', async () => {
    const rollout = await datum('op', ['rollout', 'start', '--generation', '1', '--all', '--wait', '--fleet', checkout('op')]);
    expect(rollout.code, `${rollout.stdout}\n${rollout.stderr}\n${logs()}`).toBe(0);
    for (const node of NODES) expect(await motd(node)).toBe(`generation 1 of ${node}\n`);
    const queues = new Set<string>();
    for (const node of NODES) {
      const described = await temporal('op', [
        'workflow',
        'describe',
        '--workflow-id',
        reconcileWorkflowId(node, 1),
        '-o',
        'json',
      ]);
      const queue = /"taskQueue":\s*\{\s*"name":\s*"([^"]+)"/.exec(described)?.[1];
      expect(queue, node).toBe(loopTaskQueue(node, SHARDS));
      queues.add(queue!);
    }
    // The four nodes land in both shards (N-1, N-2: 1 and 0 by FNV-1a), so both queues are exercised.
    expect([...queues].sort()).toEqual(['datum-control-loops-0', 'datum-control-loops-1']);
    for (const queue of queues) {
      const pollers = await temporal('op', ['task-queue', 'describe', '--task-queue', queue, '-o', 'json']);
      expect(pollers, queue).toMatch(/"identity":\s*"\d+@c1"/);
      expect(pollers, queue).toMatch(/"identity":\s*"\d+@c2"/);
    }
  }, 300_000);

  it('a controller host cut off: every loop carries on with the other, which rolls out the next generation alone', async () => {
    await hosts.cut('c1');
    const cutAt = Date.now();
    const before = new Map<string, Record<string, number>>();
    for (const node of NODES) before.set(node, await completedBy(reconcileWorkflowId(node, 1)));
    // Each loop keeps passing (its resync is 1 s): its next passes complete on c2, none on c1, which cannot reach the server.
    for (const node of NODES) {
      const was = before.get(node)!;
      const now = await until(
        `a pass of ${node} completed by c2 after c1 was cut off`,
        async () => {
          const by = await completedBy(reconcileWorkflowId(node, 1));
          return (by.c2 ?? 0) > (was.c2 ?? 0) ? by : null;
        },
        240_000,
        logs,
      );
      expect(now.c1 ?? 0, node).toBe(was.c1 ?? 0);
    }
    process.stderr.write(`every loop passed on c2 within ${Date.now() - cutAt} ms of c1 being cut off\n`);
    await commitGeneration(2);
    for (const host of ['c1', 'c2']) await pull(host);
    const rollout = await datum('op', ['rollout', 'start', '--generation', '2', '--all', '--wait', '--fleet', checkout('op')]);
    expect(rollout.code, `${rollout.stdout}\n${rollout.stderr}\n${logs()}`).toBe(0);
    for (const node of NODES) expect(await motd(node)).toBe(`generation 2 of ${node}\n`);
    for (const node of NODES) expect((await completedBy(reconcileWorkflowId(node, 2))).c1 ?? 0, node).toBe(0);
  }, 420_000);

  it('two controller hosts disagree on the authority: the one behind refuses the newer generation, and carries it out once it pulls', async () => {
    // Generation 3 reaches c1's checkout (c1 still cut off) but not c2's, the one serving.
    await commitGeneration(3);
    await pull('c1');
    const refused = await datum('op', ['rollout', 'start', '--generation', '3', '--all', '--wait', '--fleet', checkout('op')]);
    expect(refused.code, `${refused.stdout}\n${refused.stderr}`).toBe(1);
    expect(refused.stdout + refused.stderr).toMatch(/the authority for N-1 is at generation 2, not 3/);
    for (const node of NODES) expect(await motd(node)).toBe(`generation 2 of ${node}\n`);
    // c2 pulls: the same rollout now goes through, on c2 alone.
    await pull('c2');
    const rollout = await datum('op', ['rollout', 'start', '--generation', '3', '--all', '--wait', '--fleet', checkout('op')]);
    expect(rollout.code, `${rollout.stdout}\n${rollout.stderr}\n${logs()}`).toBe(0);
    for (const node of NODES) expect(await motd(node)).toBe(`generation 3 of ${node}\n`);
    const by = await completedBy(reconcileWorkflowId('N-3', 3));
    expect(by.c1 ?? 0).toBe(0);
    expect(by.c2).toBeGreaterThan(0);
  }, 420_000);
});
