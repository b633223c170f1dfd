// `datum nodes` and `datum status` at fleet size: a real dev server, one `datum worker`, one
// `datum agent` serving every virtual node (started as `npm run bench` starts them), a rollout to
// every node, then each command timed as an operator runs it (a fresh process each time, wall
// clock). Issue 12's target: both answer in at most 2 s at 1000 nodes.
//
// What is measured is the read side, so the fleet is light: each node a config file and a flag
// (no release to unpack, no service), already at desired on disk, so its first pass converges
// without acting.
//
//   npm run -s build && node bench/cli-nodes.mjs [--nodes 1000] [--runs 7] [--observe-every 20]
//
// Every --observe-every'th node runs in observe mode on an empty root, so it stays DRIFTED with
// an open OBSERVED_DRIFT condition: `status` then has that many loops to ask for details (the
// others it skips through DatumConditions). Prints a markdown table; exit 1 over the target.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pct } from './fleet.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const dist = (p) => path.join(root, 'dist', 'src', p);
const { Client, Connection } = require('@temporalio/client');
const { temporalCliPath } = require(dist('worker/paths.js'));
const { devServerFlags } = require(dist('worker/dev-server.js'));
const { stopServices } = require(dist('agent/services/index.js'));
const { freePort } = require(dist('agent/services/launch.js'));
const contract = require(dist('contract/index.js'));
const { stringify } = require('yaml');

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000' },
    runs: { type: 'string', default: '7' },
    'observe-every': { type: 'string', default: '20' },
    keep: { type: 'boolean', default: false },
  },
});
const n = Number(values.nodes);
const runs = Number(values.runs);
const observeEvery = Number(values['observe-every']);
const TARGET_MS = 2000;
const DATUM = path.join(root, 'bin', 'datum.js');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const say = (m) => console.error(`cli-nodes: ${m}`);

function start(command, args, logFile) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const chunks = [];
  child.stdout.on('data', (d) => chunks.push(d));
  child.stderr.on('data', (d) => chunks.push(d));
  child.on('exit', () => void writeFile(logFile, Buffer.concat(chunks)).catch(() => undefined));
  return child;
}

function bare() {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, ['-e', '0']);
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, code: r.status, stdout: '', stderr: '' };
}

/** One run of the real CLI as a fresh process: wall-clock ms, exit code, stdout. */
function timed(args, env) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, [DATUM, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Per node a config file and a flag; enforce nodes already at desired on disk, observe nodes empty (DRIFTED). */
async function writeLightFleet(dir, nodes, observe) {
  await Promise.all(['desired/nodes', 'agents', 'nodes'].map((d) => mkdir(path.join(dir, d), { recursive: true })));
  const content = { workers: 8 };
  const bytes = `${JSON.stringify(content, null, 2)}\n`;
  const policy = { resync_interval: '10m', node_timeout: '120s', observation_ttl: '300s', watch: false };
  const write = async (node) => {
    const root = path.join(dir, 'nodes', node);
    const resources = { config: { type: 'file', path: 'etc/app/config.json', content }, feature: { type: 'flag', value: true } };
    await writeFile(path.join(dir, 'desired/nodes', `${node}.yaml`), stringify({ node, generation: 1, resources, policy }));
    const mode = observe.has(node) ? 'observe' : 'enforce';
    await writeFile(path.join(dir, 'agents', `${node}.yaml`), stringify({ node, root, reconciliation: { mode } }));
    await mkdir(path.join(root, 'etc/app'), { recursive: true });
    if (mode === 'observe') return;
    await mkdir(path.join(root, 'flags'), { recursive: true });
    await writeFile(path.join(root, 'etc/app/config.json'), bytes);
    await writeFile(path.join(root, 'flags/feature.json'), 'true\n');
  };
  for (let i = 0; i < nodes.length; i += 64) await Promise.all(nodes.slice(i, i + 64).map(write));
}

const dir = await mkdtemp(path.join(os.tmpdir(), `datum-cli-nodes-${n}-`));
const logs = path.join(dir, 'logs');
await mkdir(logs);
const procs = [];
try {
  const nodes = Array.from({ length: n }, (_, i) => `C-${String(i + 1).padStart(4, '0')}`);
  const observed = nodes.filter((_, i) => i % observeEvery === observeEvery - 1);
  await writeLightFleet(dir, nodes, new Set(observed));

  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const serverArgs = ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port)];
  serverArgs.push('--db-filename', path.join(dir, 'temporal.sqlite'), '--log-level', 'error', ...devServerFlags());
  procs.push(start(temporalCliPath(), serverArgs, path.join(logs, 'temporal.log')));
  let connection;
  for (let i = 0; ; i++) {
    try {
      connection = await Connection.connect({ address });
      await connection.workflowService.getSystemInfo({});
      break;
    } catch (e) {
      if (i > 100) throw e;
      await sleep(300);
    }
  }
  const client = new Client({ connection });
  procs.push(
    start(
      process.execPath,
      [DATUM, 'worker', '--fleet', dir, '--data', dir, '--address', address],
      path.join(logs, 'worker.log'),
    ),
  );
  const agentArgs = [
    DATUM,
    'agent',
    '--address',
    address,
    ...nodes.flatMap((node) => ['--config', path.join(dir, 'agents', `${node}.yaml`)]),
  ];
  procs.push(start(process.execPath, agentArgs, path.join(logs, 'agent.log')));

  say(`${n} nodes (${observed.length} in observe mode); rollout …`);
  const t0 = Date.now();
  const rollout = await client.workflow.start(contract.WORKFLOW_TYPES.rollout, {
    taskQueue: contract.CONTROL_TASK_QUEUE,
    workflowId: contract.rolloutWorkflowId(1, nodes),
    args: [{ generation: 1, nodes }],
  });
  for (let errors = 0; ;) {
    // A loaded dev server answers some calls with transient errors (its SQLite is busy): retry those.
    const described = await rollout.describe().catch((e) => {
      if (++errors > 60) throw e;
      say(`describe failed (${e.message}); again`);
      return null;
    });
    if (!described) {
      await sleep(5000);
      continue;
    }
    const { status } = described;
    if (status.name !== 'RUNNING') {
      if (status.name !== 'COMPLETED') throw new Error(`the rollout ended ${status.name}`);
      break;
    }
    await sleep(5000);
  }
  say(`rollout ${(Date.now() - t0) / 1000} s; waiting for visibility to show every node …`);
  const env = { TEMPORAL_ADDRESS: address };
  for (let i = 0; ; i++) {
    const r = timed(['nodes', '-o', 'json'], env);
    const listed = r.code === 0 ? JSON.parse(r.stdout).nodes : [];
    if (listed.length === n && listed.every((x) => x.status)) break;
    if (i > 200) throw new Error(`visibility shows ${listed.length} of ${n} nodes with a status`);
    await sleep(1000);
  }

  // The fixed costs, in the same run on the same machine: a bare Node start, the CLI's start, and a
  // visibility list that matches nothing (start, the client's modules, the connection, one call).
  const cases = {
    'node -e 0 (baseline)': null,
    'datum --version (baseline)': ['--version'],
    'datum nodes --generation 999 (empty list)': ['nodes', '--generation', '999'],
    'datum nodes': ['nodes'],
    'datum nodes -o json': ['nodes', '-o', 'json'],
    'datum nodes --status DRIFTED': ['nodes', '--status', 'DRIFTED'],
    'datum status': ['status'],
  };
  const rows = [];
  for (const [name, args] of Object.entries(cases)) {
    const times = [];
    let last;
    for (let i = 0; i < runs; i++) {
      last = args === null ? bare() : timed(args, env);
      if (last.code !== 0 && !(name === 'datum status' && last.code === 1))
        throw new Error(`${name} exited ${last.code}: ${last.stderr}`);
      times.push(last.ms);
    }
    const lines = last.stdout ? last.stdout.trim().split('\n').length : 0;
    rows.push({ name, p50_ms: pct(times, 50), max_ms: Math.max(...times), lines });
  }
  console.log(
    `\n\`datum nodes\` / \`datum status\` at ${n} nodes (${observed.length} with an open condition), ${runs} runs each, a fresh process per run:\n`,
  );
  console.log('| command | p50 ms | max ms | output lines |');
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| \`${r.name}\` | ${r.p50_ms.toFixed(0)} | ${r.max_ms.toFixed(0)} | ${r.lines} |`);
  const load = os.loadavg()[0];
  console.log(`\nLoad average at the end: ${load.toFixed(1)} on ${os.cpus().length} CPUs.`);
  const over = rows.filter((r) => !r.name.includes('baseline') && r.p50_ms > TARGET_MS);
  await writeFile(
    path.join(root, 'bench', 'results', `cli-nodes-${new Date().toISOString().slice(0, 10)}.json`),
    `${JSON.stringify({ nodes: n, with_conditions: observed.length, runs, target_ms: TARGET_MS, rows, machine: { cpus: os.cpus().length, node: process.version, load_average: load } }, null, 2)}\n`,
  );
  if (over.length) {
    console.error(`over the ${TARGET_MS} ms target: ${over.map((r) => r.name).join(', ')}`);
    process.exitCode = 1;
  }
} catch (error) {
  say(`failed: ${error.stack ?? error}; logs in ${logs}`);
  values.keep = true;
  process.exitCode = 1;
} finally {
  for (const p of procs.reverse()) p.kill('SIGTERM');
  await sleep(2000);
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
  await Promise.all(
    (await import('node:fs/promises').then((fs) => fs.readdir(path.join(dir, 'nodes')).catch(() => []))).map((x) =>
      stopServices(path.join(dir, 'nodes', x)).catch(() => undefined),
    ),
  );
  if (!values.keep) await rm(dir, { recursive: true, force: true, maxRetries: 5 }).catch((e) => say(`left ${dir}: ${e.message}`));
  else say(`kept ${dir}`);
}
