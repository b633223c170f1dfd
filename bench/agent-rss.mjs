#!/usr/bin/env node
// The resident memory of a single-node `datum agent` process (issue 11's target: ≤ 80 MB), and
// what it is made of. On a dev server with one `datum worker`, it starts the agent for one node
// of the bench's fleet, rolls that node out (a release, a config file, a flag and a service: every
// provider runs), waits for it to settle, and reads the agent's RSS and V8 heap. Variants, each
// in a fresh agent process on the same server:
//   - cli:        `node bin/datum.js agent` as shipped;
//   - agent-only: the agent's own modules only (runAgents from dist/src/agent/worker.js), which
//                 is what the CLI would load if it imported each command when it runs;
//   - semi-space: `datum agent` under --max-semi-space-size=1 (V8's young generation, 16 MB
//                 a semi-space by default on 64-bit, is most of an idle agent's heap headroom);
//   - agent-only+semi-space, and the same with --lite-mode (V8 without its optimizing
//                 compiler: less code memory, slower code; an agent mostly waits);
//   - bundle:     the packaged agent's one program (`npm run package`: datum-agent.js, bundled
//                 and staged here as the packages install it, src/packaging/layout.ts), run plainly;
//   - unit:       the same as datum-agent@.service runs it: its ExecStart (the package's node and
//                 its flags) and its Environment= lines, in the staged tree.
// Each variant also reports the packages it loaded (require.cache, by package) and their count;
// the bundle loads one module, so its rows also count the source files bundled into it.
//
//   node bench/agent-rss.mjs [--variants cli,agent-only,semi-space,bundle,unit] [--settle 20]
import { mkdtemp, readFile, rm, mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { writeFleet } from './fleet.mjs';
import { start, startServer } from './servers.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const contract = require(path.join(root, 'dist', 'src', 'contract', 'index.js'));
const { Client } = require('@temporalio/client');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const VARIANTS = {
  cli: (datum, config, address) => [datum, 'agent', '--address', address, '--config', config],
  'agent-only': (datum, config, address) => [path.join(root, 'bench', 'agent-only.js'), address, config],
  'semi-space': (datum, config, address) => ['--max-semi-space-size=1', datum, 'agent', '--address', address, '--config', config],
  'agent-only+semi-space': (datum, config, address) => [
    '--max-semi-space-size=1',
    path.join(root, 'bench', 'agent-only.js'),
    address,
    config,
  ],
  'agent-only+semi-space+lite': (datum, config, address) => [
    '--max-semi-space-size=1',
    '--lite-mode',
    path.join(root, 'bench', 'agent-only.js'),
    address,
    config,
  ],
  bundle: (datum, config, address) => [packaged.program, '--address', address, '--config', config],
  unit: (datum, config, address) => [...packaged.unitArgs(config), '--address', address],
};

/** The packaged agent, staged by stagePackaged when a bundle variant runs. */
const packaged = { program: '', runtime: '', inputs: 0, unitArgs: (config) => [config], unitEnv: {} };

/** Bundles the agent and lays it out as the packages install it, under `dir`. */
async function stagePackaged(dir) {
  const { bundleAgent } = require(path.join(root, 'dist', 'src', 'packaging', 'bundle.js'));
  const { stagePackage, AGENT_PROGRAM, AGENT_RUNTIME } = require(path.join(root, 'dist', 'src', 'packaging', 'layout.js'));
  const { nodeRuntime } = require(path.join(root, 'dist', 'src', 'packaging', 'runtime.js'));
  await mkdir(path.join(dir, 'bundle'), { recursive: true });
  const bundle = await bundleAgent(path.join(dir, 'bundle', 'datum-agent.js'), AGENT_RUNTIME);
  const version = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')).version;
  await stagePackage(path.join(dir, 'root'), bundle, await nodeRuntime(), version);
  packaged.program = path.join(dir, 'root', AGENT_PROGRAM);
  packaged.inputs = bundle.inputs.length;
  // The unit's command line, its node the package's, rooted in the staged tree, on this bench's agent.yaml.
  const unit = await readFile(path.join(dir, 'root', 'usr/lib/systemd/system/datum-agent@.service'), 'utf8');
  const [runtime, ...exec] = /^ExecStart=(.*)$/m.exec(unit)[1].split(/\s+/);
  packaged.runtime = path.join(dir, 'root', runtime);
  packaged.unitArgs = (config) =>
    exec.map((a, i) => (exec[i - 1] === '--config' ? config : a.startsWith('/') ? path.join(dir, 'root', a) : a));
  for (const [, key, value] of unit.matchAll(/^Environment=(\w+)=(.*)$/gm)) packaged.unitEnv[key] = value;
}

const { values } = parseArgs({
  options: { variants: { type: 'string', default: Object.keys(VARIANTS).join(',') }, settle: { type: 'string', default: '20' } },
});
const variants = values.variants.split(',');
for (const v of variants)
  if (!VARIANTS[v]) throw new Error(`--variants: unknown ${v}; choose from ${Object.keys(VARIANTS).join(', ')}`);

async function status(pid) {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (key) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? 0);
  return {
    rss_mb: Math.round(kb('VmRSS') / 1024),
    rss_anon_mb: Math.round(kb('RssAnon') / 1024),
    rss_file_mb: Math.round(kb('RssFile') / 1024),
  };
}

/** The report the preload (bench/memory-report.js) writes on SIGUSR2: heap figures and loaded modules. */
async function inside(pid, file) {
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 50; i++) {
    const text = await readFile(file, 'utf8').catch(() => null);
    if (text) return JSON.parse(text);
    await sleep(100);
  }
  return null;
}

/** Packages by number of modules loaded, with the share of their source bytes. */
function byPackage(modules) {
  const packages = {};
  for (const m of modules) {
    const at = m.file.lastIndexOf('node_modules/');
    const name =
      at < 0
        ? m.file.includes('/dist/src/')
          ? 'datum (dist/src)'
          : m.file.includes('/usr/lib/datum-agent/')
            ? 'datum-agent (package)'
            : 'other'
        : m.file
            .slice(at + 13)
            .split('/')
            .slice(0, m.file.slice(at + 13).startsWith('@') ? 2 : 1)
            .join('/');
    packages[name] ??= { modules: 0, kb: 0 };
    packages[name].modules++;
    packages[name].kb += m.bytes / 1024;
  }
  return Object.entries(packages)
    .sort((a, b) => b[1].kb - a[1].kb)
    .map(([name, p]) => ({ name, modules: p.modules, source_kb: Math.round(p.kb) }));
}

async function measure(variant, dir, logs, address, client, node, generation) {
  const config = path.join(dir, 'agents', `${node}.yaml`);
  const report = path.join(logs, `${variant}-inside.json`);
  const args = VARIANTS[variant](path.join(root, 'bin', 'datum.js'), config, address);
  const env = {
    ...process.env,
    ...(variant === 'unit' ? packaged.unitEnv : {}),
    NODE_OPTIONS: `--require ${path.join(root, 'bench', 'memory-report.js')}`,
    DATUM_BENCH_REPORT: report,
  };
  const agent = start(`agent-${variant}`, variant === 'unit' ? packaged.runtime : process.execPath, args, logs, env);
  try {
    const t0 = Date.now();
    for (;;) {
      const r = await client.connection.workflowService.describeTaskQueue({
        namespace: 'default',
        taskQueue: { name: contract.agentTaskQueue(node) },
        taskQueueType: 2,
      });
      if (r.pollers.some((p) => p.identity?.includes(`@${agent.pid}`))) break;
      if (Date.now() - t0 > 60_000) throw new Error(`the ${variant} agent did not poll within 60 s; see ${logs}`);
      await sleep(250);
    }
    const idle = await status(agent.pid);
    // A recheck makes the loop observe through this agent (every provider runs again).
    const handle = client.workflow.getHandle(contract.reconcileWorkflowId(node, generation));
    await handle.signal(contract.recheckSignal, {});
    await sleep(Number(values.settle) * 1000);
    const settled = await status(agent.pid);
    const heap = await inside(agent.pid, report);
    return {
      variant,
      idle_rss_mb: idle.rss_mb,
      ...settled,
      heap_used_mb: heap ? Math.round(heap.memory.heapUsed / 2 ** 20) : null,
      heap_total_mb: heap ? Math.round(heap.memory.heapTotal / 2 ** 20) : null,
      external_mb: heap ? Math.round((heap.memory.external + heap.memory.arrayBuffers) / 2 ** 20) : null,
      modules: heap?.modules.length ?? null,
      ...(packaged.inputs && ['bundle', 'unit'].includes(variant) ? { bundled_source_files: packaged.inputs } : {}),
      packages: heap ? byPackage(heap.modules).slice(0, 12) : [],
    };
  } finally {
    agent.kill('SIGTERM');
    await Promise.race([agent.exited, sleep(10_000)]);
    if (agent.exitCode === null) agent.kill('SIGKILL');
  }
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'datum-agent-rss-'));
const logs = path.join(dir, 'logs');
await mkdir(logs);
if (variants.some((v) => ['bundle', 'unit'].includes(v))) await stagePackaged(path.join(dir, 'package'));
const server = await startServer('dev', dir, logs, {});
const node = 'R-0001';
await writeFleet(dir, [node], {
  policy: { resync_interval: '10m', node_timeout: '60s', observation_ttl: '120s', conflict_window: '0s', watch: true },
  services: 1,
});
const worker = start(
  'worker',
  process.execPath,
  [path.join(root, 'bin', 'datum.js'), 'worker', '--fleet', dir, '--data', dir, '--address', server.address],
  logs,
);
const rows = [];
try {
  const client = new Client({ connection: server.connection });
  // The first agent serves the rollout; each variant then serves the running loop in turn.
  const first = start(
    'agent-rollout',
    process.execPath,
    [
      path.join(root, 'bin', 'datum.js'),
      'agent',
      '--address',
      server.address,
      '--config',
      path.join(dir, 'agents', `${node}.yaml`),
    ],
    logs,
  );
  const result = await client.workflow.execute(contract.WORKFLOW_TYPES.rollout, {
    taskQueue: contract.CONTROL_TASK_QUEUE,
    workflowId: contract.rolloutWorkflowId(1, [node]),
    args: [{ generation: 1, nodes: [node] }],
  });
  if (result.nodes[0]?.status !== 'CONVERGED') throw new Error(`the rollout left ${node} ${JSON.stringify(result.nodes[0])}`);
  first.kill('SIGTERM');
  await first.exited;
  for (const variant of variants) {
    rows.push(await measure(variant, dir, logs, server.address, client, node, 1));
    console.error(`agent-rss: ${variant}: ${rows.at(-1).rss_mb} MB RSS (${rows.at(-1).modules} modules)`);
  }
} finally {
  worker.kill('SIGTERM');
  await Promise.race([worker.exited, sleep(10_000)]);
  const { stopServices } = require(path.join(root, 'dist', 'src', 'agent', 'services', 'index.js'));
  await stopServices(path.join(dir, 'nodes', node)).catch(() => undefined);
  await server.stop();
  await rm(dir, { recursive: true, force: true });
}
console.log(JSON.stringify({ date: new Date().toISOString(), node: process.version, rows }, null, 2));
