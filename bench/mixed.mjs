#!/usr/bin/env node
// The mixed-types row (issue 29): N nodes (default 100), each with 20 resources of every type
// Datum reaches: a release, six files (two with a mode), three directories (one with an owner
// and mode), two flags, five packages from .deb artifacts on the node's own confined dpkg
// database, and three systemd units (a unit file Datum owns, enabled and running) on a private
// user manager. On a real dev server, a real `datum worker` and one real `datum agent` serving
// every node (watch mode), it measures:
//   - the rollout of generation 1 (every node to CONVERGED) and per-node convergence;
//   - the agent's CPU while the fleet is steady (the watch alone: what a quiet fleet costs);
//   - drift detection for a package and a unit changed by hand (dpkg -i of another version into
//     the node's database; systemctl --user stop of a unit), and a file for comparison: the change
//     → the decided_at of the ledger entry that records it, p50/p99 per kind;
//   - observe cost per resource, per type: after the row (the agent stopped, every node converged),
//     observeNode in this process over each node's resources of one type, one node at a time: the
//     wall time and the CPU (this process and the dpkg-query/systemctl it ran) per resource.
// Writes bench/results/<date>-mixed.json and prints a table. Nothing asserts a time.
//
//   node bench/mixed.mjs [--nodes 100] [--changes 10] [--steady 60] [--keep]
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pct } from './fleet.mjs';
import { benchStart, fail, memoryMb } from './provenance.mjs';
import { pollerOn, start, startServer } from './servers.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const dist = (p) => path.join(root, 'dist', 'src', p);
const { stringify } = require('yaml');
const { Client } = require('@temporalio/client');
const contract = require(dist('contract/index.js'));
const { observeNode } = require(dist('agent/activities/index.js'));
const { DesiredStateAuthority } = require(dist('activities/authority.js'));
const { mapLimit } = require(dist('activities/map-limit.js'));
const { buildDeb } = await import(pathToFileURL(path.join(root, 'scripts', 'build-deb.mjs')).href);

const USAGE = 'usage: node bench/mixed.mjs [--nodes 100] [--changes 10] [--steady 60] [--keep] [--beside-others]';
const { values, whole, measured, others } = await benchStart(USAGE, {
  nodes: { type: 'string', default: '100' },
  changes: { type: 'string', default: '10' },
  steady: { type: 'string', default: '60' },
  keep: { type: 'boolean', default: false },
});
const n = whole('nodes', 1);
const changesPerKind = whole('changes', 0);
const steadySeconds = whole('steady', 5);
const say = (m) => console.error(`bench (mixed, ${n} nodes): ${m}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (x, digits = 2) => (x === null || Number.isNaN(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);

// What the row needs from the host, said before anything starts.
if (process.getuid?.() !== 0)
  fail('the mixed row installs with dpkg --root and starts a private systemd manager: run it as root');
for (const program of ['dpkg', 'systemctl', 'systemd-run']) {
  if (spawnSync(program, ['--version']).status !== 0)
    fail(`${program} does not run here: the mixed row needs dpkg and systemd installed`);
}

/** The private user manager of the unit tests (test/agent/systemd-manager.ts), compiled for this script by esbuild. */
async function privateManager(dir) {
  const esbuild = require('esbuild');
  const source = await readFile(path.join(root, 'test', 'agent', 'systemd-manager.ts'), 'utf8');
  const file = path.join(dir, 'systemd-manager.mjs');
  await writeFile(file, esbuild.transformSync(source, { loader: 'ts', format: 'esm', platform: 'node' }).code);
  const { userManager } = await import(pathToFileURL(file).href);
  const manager = await userManager({ privateOnly: true });
  if ('skip' in manager) throw new Error(`no private systemd manager: ${manager.skip}`);
  return manager;
}

const PACKAGES = ['p1', 'p2', 'p3', 'p4', 'p5'].map((p) => `bench-${p}`);
const UNITS = ['u1', 'u2', 'u3'];
const unitName = (node, u) => `bench-${node.toLowerCase()}-${u}.service`;
const UNIT_TEXT =
  '[Unit]\nDescription=Datum mixed bench\n\n[Service]\nType=exec\nExecStart=/bin/sleep infinity\n\n[Install]\nWantedBy=default.target\n';
const sha256 = async (file) =>
  createHash('sha256')
    .update(await readFile(file))
    .digest('hex');

/** The five bench packages at 1.0-1 (what desired state names) and 1.1-1 (what a person installs by hand). */
async function buildPackages(dir) {
  const debs = {};
  for (const name of PACKAGES)
    for (const version of ['1.0-1', '1.1-1']) {
      const built = await buildDeb({
        name,
        version,
        outDir: dir,
        compress: false,
        files: { [`usr/share/${name}/note.txt`]: { content: `${name} ${version}\n` } },
      });
      debs[`${name}@${version}`] = { file: built.file, sha256: built.sha256 };
    }
  return debs;
}

/** Twenty resources per node, their desired state at generation 1 and their agent.yaml (watch mode). */
async function writeFleet(dir, nodes, debs, unitDir) {
  await Promise.all(['desired/nodes', 'agents', 'nodes'].map((d) => mkdir(path.join(dir, d), { recursive: true })));
  const artifact = path.join(root, 'examples', 'fleet', 'artifacts', 'app-7.3.tgz');
  const appSha = await sha256(artifact);
  const policy = { resync_interval: '10m', node_timeout: '60s', observation_ttl: '120s', conflict_window: '0s', watch: true };
  for (const node of nodes) {
    const files = Object.fromEntries(
      [1, 2, 3, 4, 5].map((i) => [
        `f${i}`,
        { type: 'file', path: `etc/bench/f${i}.conf`, content: `value=${i}\n`, ...(i <= 2 ? { mode: '0640' } : {}) },
      ]),
    );
    const resources = {
      build: { type: 'release', version: '7.3', artifact, sha256: appSha },
      config: { type: 'file', path: 'etc/app/config.json', content: { workers: 8 } },
      ...files,
      d1: { type: 'directory', path: 'srv/data', mode: '0750', owner: 'daemon', group: 'daemon' },
      d2: { type: 'directory', path: 'srv/cache' },
      d3: { type: 'directory', path: 'var/spool/bench', mode: '0700' },
      feature: { type: 'flag', value: true },
      canary: { type: 'flag', value: 'off' },
      ...Object.fromEntries(
        PACKAGES.map((name) => [
          name.replace('bench-', 'pkg_'),
          { type: 'package', name, version: '1.0-1', artifact: debs[`${name}@1.0-1`].file, sha256: debs[`${name}@1.0-1`].sha256 },
        ]),
      ),
      ...Object.fromEntries(
        UNITS.map((u) => [u, { type: 'unit', name: unitName(node, u), content: UNIT_TEXT, enabled: true, active: true }]),
      ),
    };
    const dpkgRoot = path.join(dir, 'nodes', `${node}.dpkg`);
    await mkdir(path.join(dpkgRoot, 'var/lib/dpkg'), { recursive: true });
    await mkdir(path.join(dpkgRoot, 'var/log'), { recursive: true });
    await writeFile(path.join(dir, 'desired/nodes', `${node}.yaml`), stringify({ node, generation: 1, resources, policy }));
    const agent = {
      node,
      root: path.join(dir, 'nodes', node),
      reconciliation: { mode: 'enforce' },
      packages: { root: dpkgRoot },
      units: { manager: 'user', directory: unitDir },
      allow: { packages: [{ name: 'bench-*', from: ['artifact'] }], units: [`bench-${node.toLowerCase()}-*.service`] },
    };
    await writeFile(path.join(dir, 'agents', `${node}.yaml`), stringify(agent));
  }
}

/** utime+stime of a process, and of its reaped children (the dpkg-query and systemctl it ran), in seconds. */
async function cpuOf(pid, withChildren) {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]) + (withChildren ? Number(fields[13]) + Number(fields[14]) : 0);
  return ticks / 100;
}

/** The type of each resource key in a node's desired state. */
const typeOf = (resources) => Object.fromEntries(Object.entries(resources).map(([k, r]) => [k, r.type]));

/**
 * Observe cost per resource, per type: observeNode over each node's resources of one type, one
 * node at a time, in this process (the agent has stopped): wall ms and CPU ms (this process and
 * the programs it ran) per resource.
 */
async function observeCost(dir, nodes) {
  const authority = new DesiredStateAuthority(dir);
  const specs = {};
  for (const node of nodes) {
    const read = await authority.read(node);
    if (!read.ok) throw new Error(read.error);
    specs[node] = Object.fromEntries(
      Object.entries(read.intent.resources).map(([k, r]) => [
        k,
        read.intent.locations[k] ? { ...r, artifact: read.intent.locations[k] } : r,
      ]),
    );
  }
  const types = [...new Set(Object.values(typeOf(specs[nodes[0]])))];
  const cost = {};
  for (const type of [...types, 'all']) {
    let count = 0;
    const cpu0 = await cpuOf(process.pid, true);
    const t0 = performance.now();
    for (const node of nodes) {
      const resources = Object.fromEntries(Object.entries(specs[node]).filter(([, r]) => type === 'all' || r.type === type));
      count += Object.keys(resources).length;
      const seen = await observeNode(path.join(dir, 'agents', `${node}.yaml`), { node, resources });
      const bad = Object.entries(seen.resources).filter(([, r]) => r.observation_error || r.obstruction);
      if (bad.length > 0) throw new Error(`observe of ${node} (${type}): ${JSON.stringify(bad[0])}`);
    }
    const wallMs = performance.now() - t0;
    const cpuMs = ((await cpuOf(process.pid, true)) - cpu0) * 1000;
    cost[type] = {
      resources: count,
      wall_ms_per_resource: round(wallMs / count, 3),
      cpu_ms_per_resource: round(cpuMs / count, 3),
    };
  }
  return cost;
}

async function row(dir) {
  const logs = path.join(dir, 'logs');
  await mkdir(logs);
  const procs = [];
  let server = null;
  let manager = null;
  const load0 = os.loadavg()[0];
  try {
    const nodes = Array.from({ length: n }, (_, i) => `M-${String(i + 1).padStart(4, '0')}`);
    manager = await privateManager(dir);
    const unitDir = path.join(manager.dirs.config, 'systemd', 'user');
    await mkdir(unitDir, { recursive: true });
    say(`private user manager up (${manager.how}); building the bench packages …`);
    const debs = await buildPackages(path.join(dir, 'debs'));
    await writeFleet(dir, nodes, debs, unitDir);
    // The agent's registry of roots in this row's directory: one root, one agent, within the row.
    const env = { ...process.env, DATUM_RUNTIME_DIR: path.join(dir, 'run') };
    process.env.DATUM_RUNTIME_DIR = env.DATUM_RUNTIME_DIR;
    server = await startServer('dev', dir, logs, { say });
    const { address, connection } = server;
    const client = new Client({ connection });
    const datum = path.join(root, 'bin', 'datum.js');
    const worker = start(
      'worker',
      process.execPath,
      [datum, 'worker', '--fleet', dir, '--data', dir, '--address', address],
      logs,
      env,
    );
    const agentArgs = [
      datum,
      'agent',
      '--address',
      address,
      ...nodes.flatMap((node) => ['--config', path.join(dir, 'agents', `${node}.yaml`)]),
    ];
    const agent = start('agent', process.execPath, agentArgs, logs, env);
    procs.push(worker, agent);
    await pollerOn(connection, contract.CONTROL_TASK_QUEUE, 1, 'the controller');
    await pollerOn(connection, contract.agentTaskQueue(nodes[n - 1]), 2, 'the agent');
    say('controller and agent polling; rollout …');

    const agentCpu0 = await cpuOf(agent.pid, true);
    const t0 = Date.now();
    const result = await client.workflow.execute(contract.WORKFLOW_TYPES.rollout, {
      taskQueue: contract.CONTROL_TASK_QUEUE,
      workflowId: contract.rolloutWorkflowId(1, nodes),
      args: [{ generation: 1, nodes }],
    });
    const rolloutMs = Date.now() - t0;
    const agentRolloutCpu = (await cpuOf(agent.pid, true)) - agentCpu0;
    const statuses = {};
    for (const x of result.nodes) {
      const s = `${x.status ?? x.outcome}${x.reason ? `/${x.reason}` : ''}`;
      statuses[s] = (statuses[s] ?? 0) + 1;
    }
    const converged = result.nodes.filter((x) => x.status === 'CONVERGED').length;
    say(`rollout ${rolloutMs / 1000} s: ${JSON.stringify(statuses)}; steady watch for ${steadySeconds} s …`);
    const handles = nodes.map((node) => client.workflow.getHandle(contract.reconcileWorkflowId(node, 1)));
    const perNode = await mapLimit(handles, 16, async (h) => {
      const done = (await h.query(contract.ledgerQuery)).find((e) => e.convergence_status === 'CONVERGED');
      return done ? Date.parse(done.decided_at) - t0 : null;
    });

    // The fleet at rest: what the watch costs the agent when nothing changes.
    await sleep(5000);
    const s0 = await cpuOf(agent.pid, true);
    await sleep(steadySeconds * 1000);
    const steadyCores = ((await cpuOf(agent.pid, true)) - s0) / steadySeconds;
    // After the idle phase: the agent's memory once its garbage collector has had time to settle.
    const settled = await memoryMb(agent.pid);
    say(`agent at rest: ${round(steadyCores)} cores; drift detection …`);

    const pick = () => [...nodes.keys()].sort(() => Math.random() - 0.5).slice(0, Math.min(changesPerKind, n));
    const changes = [
      ...pick().map((i) => ({ i, kind: 'package' })),
      ...pick().map((i) => ({ i, kind: 'unit' })),
      ...pick().map((i) => ({ i, kind: 'file' })),
    ];
    const detect = async ({ i, kind }) => {
      await sleep(Math.random() * 30_000);
      const node = nodes[i];
      let at;
      if (kind === 'package') {
        const dpkgRoot = path.join(dir, 'nodes', `${node}.dpkg`);
        at = Date.now();
        const ran = spawnSync(
          'dpkg',
          [`--root=${dpkgRoot}`, `--log=${path.join(dpkgRoot, 'var/log/dpkg.log')}`, '-i', debs['bench-p1@1.1-1'].file],
          { encoding: 'utf8' },
        );
        if (ran.status !== 0) throw new Error(`dpkg -i by hand on ${node} failed: ${ran.stderr}`);
      } else if (kind === 'unit') {
        at = Date.now();
        const ran = spawnSync('systemctl', ['--user', 'stop', '--', unitName(node, 'u2')], { encoding: 'utf8' });
        if (ran.status !== 0) throw new Error(`systemctl --user stop on ${node} failed: ${ran.stderr}`);
      } else {
        at = Date.now();
        await writeFile(path.join(dir, 'nodes', node, 'etc/bench/f3.conf'), `value=${1000 + i}\n`);
      }
      for (;;) {
        const entry = (await handles[i].query(contract.ledgerQuery)).find((e) => Date.parse(e.decided_at) >= at);
        if (entry)
          return {
            kind,
            ms: Date.parse(entry.decided_at) - at,
            observed_ms: entry.observed_at ? Date.parse(entry.observed_at) - at : null,
          };
        if (Date.now() - at > 120_000) return { kind, ms: null, node };
        await sleep(200);
      }
    };
    const detections = await Promise.all(changes.map(detect));
    const secs = (kind) => detections.filter((d) => d.kind === kind && d.ms !== null).map((d) => d.ms / 1000);
    // Every repair done: the fleet is converged again before the agent stops.
    await sleep(5000);
    const agentMemory = await memoryMb(agent.pid);
    for (const p of procs) p.kill('SIGTERM');
    await Promise.race([Promise.all(procs.map((p) => p.exited)), sleep(10_000)]);
    say('agent stopped; observe cost per resource …');
    const observe = await observeCost(dir, nodes);
    return {
      date: new Date().toISOString(),
      command: `node bench/mixed.mjs ${process.argv.slice(2).join(' ')}`.trim(),
      ...measured,
      beside_others: others.length,
      machine: { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model ?? null, node: process.version },
      load_avg_1m: round((load0 + os.loadavg()[0]) / 2, 1),
      nodes: n,
      resources_per_node: 20,
      mix: { release: 1, file: 6, directory: 3, flag: 2, package: 5, unit: 3 },
      converged,
      rollout_statuses: statuses,
      rollout_s: rolloutMs / 1000,
      convergence_p50_s: pct(perNode, 50) / 1000,
      convergence_p99_s: pct(perNode, 99) / 1000,
      agent_rollout_cpu_s: round(agentRolloutCpu, 1),
      agent_steady_cores: round(steadyCores, 3),
      agent_rss_mb: agentMemory.rss,
      agent_peak_mb: agentMemory.peak,
      agent_settled_mb: settled.rss,
      detection: Object.fromEntries(
        ['package', 'unit', 'file'].map((kind) => [
          kind,
          {
            p50_s: pct(secs(kind), 50),
            p99_s: pct(secs(kind), 99),
            detected: `${secs(kind).length}/${detections.filter((d) => d.kind === kind).length}`,
          },
        ]),
      ),
      missed: detections.filter((d) => d.ms === null).map((d) => `${d.kind} ${d.node}`),
      observe_cost: observe,
    };
  } finally {
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    if (server) await server.stop();
    if (manager) await manager.stop();
  }
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'datum-bench-mixed-'));
let result;
try {
  result = await row(dir);
} catch (error) {
  say(`the row failed: ${error.stack ?? error}`);
  process.exitCode = 1;
} finally {
  // A dpkg the killed agent ran may still be writing under the row's directory for a moment.
  if (!values.keep)
    await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 500 }).catch((e) =>
      say(`left ${dir}: ${e.message}`),
    );
  else say(`kept ${dir}`);
}
if (!result) process.exit();
const out = path.join(root, 'bench', 'results', `${result.date.slice(0, 10)}-mixed.json`);
await mkdir(path.dirname(out), { recursive: true });
// Rows of the same day accumulate: a row replaces the earlier one of its size.
const earlier = await readFile(out, 'utf8').then(JSON.parse, () => ({ rows: [] }));
const rows = [...(earlier.rows ?? []).filter((r) => r.nodes !== result.nodes), result].sort((a, b) => a.nodes - b.nodes);
await writeFile(out, `${JSON.stringify({ rows }, null, 2)}\n`);
const d = result.detection;
console.log(
  [
    `| nodes × resources | rollout s | conv p99 s | agent cores at rest | detect p99 s: package / unit / file |`,
    `|---|---|---|---|---|`,
    `| ${n} × 20 | ${result.rollout_s} | ${result.convergence_p99_s} | ${result.agent_steady_cores} | ${d.package.p99_s} / ${d.unit.p99_s} / ${d.file.p99_s} |`,
    '',
    `| type | observe wall ms/resource | observe CPU ms/resource |`,
    `|---|---|---|`,
    ...Object.entries(result.observe_cost).map(([t, c]) => `| ${t} | ${c.wall_ms_per_resource} | ${c.cpu_ms_per_resource} |`),
  ].join('\n'),
);
say(`written ${path.relative(root, out)}`);
