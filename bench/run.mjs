#!/usr/bin/env node
// Fleet benchmark (issues 5 and 11). For each fleet size, on each server (--server dev,cluster:
// the dev server on SQLite, and the production-shaped cluster of `npm run cluster`, Temporal on
// PostgreSQL), it runs real controllers (`datum worker`, --workers of them) and one real
// `datum agent` process serving N virtual nodes, each with its own task queue, root and
// agent.yaml, and measures in the same run:
//   - the floor (a plain in-process loop over the providers) and the engine's ceiling (no-op
//     workflows running the same activities), so Datum's rollout is reported as ratios;
//   - a full rollout, per-node convergence p50/p99, a full verification pass, history events;
//   - drift-detection latency for out-of-band edits to managed files and kills of services;
//   - RSS, and CPU seconds per process and phase (plus the server's own metrics).
// Then a 24 h simulated soak on the time-skipping server (bench/soak.mjs).
// Writes bench/results/<date>.json, <date>.md and <date>.svg, and prints the table.
//
//   npm run bench -- --nodes 100,300,1000 [--modes watch,poll] [--server dev,cluster] [--workers 1,2]
//                    [--shards 16] [--changes 200] [--services 10] [--soak 24] [--profile] [--keep]
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { benchFleet, pct } from './fleet.mjs';
import { summarizeProfiles } from './profile.mjs';
import { soak } from './soak.mjs';
import { SERVERS, childrenOf, pollerOn, start, startServer, treeCpuSeconds } from './servers.mjs';
import { benchStart, fail, memoryMb } from './provenance.mjs';
import { combineRuns, controlPlaneCpuRatio, markdown, replaceRows, round, writeDay } from './rows.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const dist = (p) => path.join(root, 'dist', 'src', p);
const { Client } = require('@temporalio/client');
const temporalProto = require('@temporalio/proto');
const { readServiceState, stopServices } = require(dist('agent/services/index.js'));
const contract = require(dist('contract/index.js'));
const { observeNode, applyAction } = require(dist('agent/activities/index.js'));
const { agentGate } = require(dist('agent/gate.js'));
const { DesiredStateAuthority } = require(dist('activities/authority.js'));
const { mapLimit } = require(dist('activities/map-limit.js'));
const domain = require(dist('domain/index.js'));

const USAGE =
  'usage: npm run bench -- [--nodes 100,300,1000] [--modes watch,poll] [--server dev,cluster] [--workers 1,2] [--shards 16] [--changes 200] [--services 10] [--soak 24] [--settle 30] [--repeat 3] [--pin-agent 1] [--worker-memory node|packaged] [--resync-pass] [--profile] [--keep] [--beside-others]';
const {
  values,
  whole: wholeOption,
  measured,
  others,
} = await benchStart(USAGE, {
  nodes: { type: 'string', default: '100' },
  modes: { type: 'string', default: 'watch,poll' },
  server: { type: 'string', default: 'dev' },
  workers: { type: 'string', default: '1' },
  shards: { type: 'string', default: '16' },
  changes: { type: 'string', default: '200' },
  services: { type: 'string', default: '10' },
  soak: { type: 'string', default: '24' },
  profile: { type: 'boolean', default: false },
  keep: { type: 'boolean', default: false },
  settle: { type: 'string', default: '30' },
  repeat: { type: 'string', default: '3' },
  'pin-agent': { type: 'string' },
  'worker-memory': { type: 'string', default: 'node' },
  'resync-pass': { type: 'boolean', default: false },
});
const modes = values.modes.split(',');
if (modes.some((m) => m !== 'watch' && m !== 'poll'))
  fail(`--modes ${values.modes} must list watch and/or poll, such as --modes watch,poll`);
const servers = values.server.split(',');
if (servers.length === 0 || servers.some((x) => !SERVERS.includes(x)))
  fail(`--server ${values.server} must list dev, dev-plain and/or cluster, such as --server dev,cluster`);
const workerCounts = values.workers.split(',').map(Number);
if (workerCounts.some((w) => !Number.isInteger(w) || w < 1))
  fail(`--workers ${values.workers} must list controller worker counts, such as --workers 1,2`);
const settleSeconds = Number(values.settle);
if (!Number.isInteger(settleSeconds) || settleSeconds < 0)
  fail(`--settle ${values.settle} must be whole seconds of idle before the settled memory sample, such as --settle 30`);
const repeat = Number(values.repeat);
if (!Number.isInteger(repeat) || repeat < 1)
  fail(`--repeat ${values.repeat} must be how many times each row runs, such as --repeat 3`);
const sizes = values.nodes.split(',').map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 1))
  fail(`--nodes ${values.nodes} must be a comma-separated list of node counts, such as --nodes 100,300`);
const fileChanges = wholeOption('changes', 0);
const serviceNodes = wholeOption('services', 0);
const soakHours = wholeOption('soak', 0);
const shards = wholeOption('shards', 1);
const placement = placementFor(values['pin-agent']);
const workerMemory = await workerMemoryFor(values['worker-memory']);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** `fn` run at most once: a second call (the row's finally after an interrupt) waits for the first. */
const once = (fn) => {
  let running = null;
  return () => (running ??= fn());
};
const REFUSED_POLL = /concurrent poller limit exceeded/gi;

/**
 * How the controller's memory is set: `node`, Node's and glibc's defaults (and the cache the
 * worker derives from its heap); `packaged`, what datum-worker.service sets, read from the unit
 * itself so the two cannot drift: its malloc and cache variables, its --max-old-space-size, and
 * the workflow bundle built ahead of time (DATUM_WORKFLOW_BUNDLE), which the bench builds from
 * dist/ as the package does (scripts/bundle-workflows.mjs) so the worker does not run webpack at
 * start.
 */
async function workerMemoryFor(kind) {
  if (kind === 'node') return { describe: 'node defaults', env: {}, nodeArgs: [] };
  if (kind !== 'packaged')
    fail(`--worker-memory ${kind} must be node (the defaults) or packaged (datum-worker.service's settings)`);
  const unitPath = path.join(root, 'deploy', 'systemd', 'datum-worker.service');
  const unit = await readFile(unitPath, 'utf8');
  const env = {};
  for (const [, name, value] of unit.matchAll(/^Environment=(MALLOC_[A-Z_]+|DATUM_MAX_CACHED_WORKFLOWS)=(\S+)$/gm))
    env[name] = value;
  const heap = /^ExecStart=\S*node\s+(--max-old-space-size=\d+)/m.exec(unit)?.[1];
  const prebuilt = /^Environment=DATUM_WORKFLOW_BUNDLE=\S+$/m.test(unit);
  if (!heap || !env.MALLOC_ARENA_MAX || !env.DATUM_MAX_CACHED_WORKFLOWS || !prebuilt)
    fail(
      `${unitPath} no longer sets what --worker-memory packaged reads (MALLOC_ARENA_MAX, DATUM_MAX_CACHED_WORKFLOWS, DATUM_WORKFLOW_BUNDLE, node --max-old-space-size): update workerMemoryFor in bench/run.mjs`,
    );
  const settings = [heap, ...Object.entries(env).map(([k, v]) => `${k}=${v}`), 'DATUM_WORKFLOW_BUNDLE (built ahead)'];
  const { writeWorkflowBundles } = await import(path.join(root, 'dist', 'src', 'worker', 'bundle.js'));
  const bundleDir = await mkdtemp(path.join(os.tmpdir(), 'datum-bench-bundle-'));
  // Gone with the bench, however it ends: the workers read it only as they start.
  process.once('exit', () => rmSync(bundleDir, { recursive: true, force: true }));
  const bundle = path.join(bundleDir, 'workflow-bundle.js');
  await writeWorkflowBundles(bundle);
  env.DATUM_WORKFLOW_BUNDLE = bundle;
  return { describe: `datum-worker.service's: ${settings.join(' ')}`, env, nodeArgs: [heap] };
}

/** Memory (MB) of the row's processes: the controller workers' largest, the agent's and the server's. */
async function memoryOf(workers, agent, server) {
  const ws = await Promise.all(workers.map((w) => memoryMb(w.pid)));
  const most = (key) => (ws.some((w) => w[key] === null) ? null : Math.max(...ws.map((w) => w[key])));
  return {
    worker: { rss: most('rss'), peak: most('peak') },
    agent: await memoryMb(agent.pid),
    server: await memoryMb(server.pids.server),
  };
}
async function cpuSeconds(pid) {
  try {
    const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    // The server is a single Go binary; the Node processes' services are not their children.
    return ticks / 100;
  } catch {
    return null;
  }
}
/**
 * CPU seconds of each role, to take a phase's deltas from: `roles` maps a role to its pids
 * (several controller workers add up); PostgreSQL counts its backends too.
 */
const cpuOf = async (roles) =>
  Object.fromEntries(
    await Promise.all(
      Object.entries(roles).map(async ([k, pids]) => {
        const each = await Promise.all(pids.map((pid) => (k === 'postgres' ? treeCpuSeconds(pid) : cpuSeconds(pid))));
        return [k, each.reduce((a, b) => a + (b ?? 0), 0)];
      }),
    ),
  );
const cpuDelta = (a, b, wallMs) =>
  Object.fromEntries(
    Object.keys(a).map((k) => [k, { cpu_s: round(b[k] - a[k], 1), cores: round((b[k] - a[k]) / (wallMs / 1000), 2) }]),
  );

/**
 * Where the row's processes run (issue 33: the agent on a core of its own, so the server's and the
 * controller's figures are what production, with its agents on other hosts, sees). Unset, the
 * kernel places every process. `--pin-agent 1` runs the agent (and the ceiling's) on CPU 1 and
 * everything else, the bench included, on the other CPUs: with taskset(1) in front of a process
 * the bench starts, and `taskset -a -p` on a server it started by other means.
 */
function placementFor(spec) {
  if (spec === undefined) return { describe: 'unpinned', wrap: (_role, command, args) => [command, args], pin: () => undefined };
  const all = os.cpus().map((_, i) => i);
  const agentCpus = [
    ...new Set(
      spec.split(',').flatMap((part) => {
        const [a, b = a] = part.split('-').map((x) => (/^\d+$/.test(x) ? Number(x) : NaN));
        return a <= b ? Array.from({ length: b - a + 1 }, (_, i) => a + i) : [NaN];
      }),
    ),
  ];
  if (agentCpus.some((c) => !all.includes(c)))
    fail(`--pin-agent ${spec} must list CPUs of this machine (0 to ${all.length - 1}), such as --pin-agent ${all.length - 1}`);
  const rest = all.filter((c) => !agentCpus.includes(c));
  if (rest.length === 0)
    fail(
      `--pin-agent ${spec} leaves no CPU for the server and the controllers: list fewer, such as --pin-agent ${all.length - 1}`,
    );
  const lists = { agent: agentCpus.join(','), rest: rest.join(',') };
  const pin = (pid, role) => {
    const r = spawnSync('taskset', ['-a', '-p', '-c', lists[role], String(pid)], { encoding: 'utf8' });
    if (r.status !== 0)
      throw new Error(
        `taskset could not pin process ${pid} to CPU ${lists[role]}: ${(r.stderr || r.error?.message || '').trim()}`,
      );
  };
  pin(process.pid, 'rest');
  return {
    describe: `agent on CPU ${lists.agent}; server, controllers and bench on CPU ${lists.rest}`,
    wrap: (role, command, args) => ['taskset', ['-c', lists[role], command, ...args]],
    pin,
  };
}

/** Pins the server's process and, for PostgreSQL, its postmaster and the backends it has forked (new ones inherit). */
async function pinServer(server) {
  for (const pid of Object.values(server.pids).filter(Boolean)) {
    placement.pin(pid, 'rest');
    for (const child of await childrenOf(pid)) {
      try {
        placement.pin(child.pid, 'rest');
      } catch {
        // A backend that exited meanwhile.
      }
    }
  }
}

/** The preload that reports a process's heap on SIGUSR2 (bench/memory-report.js), and where. */
const reporting = (logs, name) => ({
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${path.join(root, 'bench', 'memory-report.js')}`.trim(),
  DATUM_BENCH_REPORT: path.join(logs, `${name}-memory.json`),
});
/**
 * What a process's RSS is made of (MB): the main thread's V8 heap (used, total), each worker
 * thread's V8 heap (the SDK runs workflows in worker threads), and what lives outside every V8
 * heap (the SDK's Rust core, native buffers, code), from the process's own report.
 */
async function memoryInside(pid, logs, name) {
  const file = path.join(logs, `${name}-memory.json`);
  // The RSS just before the report: the report itself reads less (docs/performance.md, "What the
  // controller's memory at rest is made of"), so a row shows both.
  const before = await memoryMb(pid);
  try {
    process.kill(pid, 'SIGUSR2');
  } catch {
    return null;
  }
  const waitMs = process.env.DATUM_BENCH_HEAP_SNAPSHOT ? 180_000 : 10_000;
  for (let i = 0; i < waitMs / 100; i++) {
    const text = await readFile(file, 'utf8').catch(() => null);
    if (text) {
      const { memory, threads = [], resident = null } = JSON.parse(text);
      const mb = (b) => Math.round(b / 2 ** 20);
      const threadPhysical = threads.reduce((sum, t) => sum + t.heap.total_physical_size, 0);
      return {
        rss_before_report: before.rss,
        rss: mb(memory.rss),
        heap_used: mb(memory.heapUsed),
        heap_total: mb(memory.heapTotal),
        external: mb(memory.external),
        anonymous: resident ? Math.round(resident.anonymous_kb / 1024) : null,
        threads: threads.map((t) => ({
          thread: t.threadId,
          heap_used: mb(t.heap.used_heap_size),
          heap_physical: mb(t.heap.total_physical_size),
          malloced: mb(t.heap.malloced_memory),
          contexts: t.heap.number_of_native_contexts,
          snapshot: t.snapshot,
        })),
        outside_v8: mb(memory.rss - memory.heapTotal - threadPhysical),
      };
    }
    await sleep(100);
  }
  return null;
}

/**
 * The Temporal server's CPU profile over `seconds` (Go's pprof, which the bench's cluster serves),
 * saved to `file`, and its top functions by their own time (`go tool pprof -top`).
 */
async function serverCpuProfile(port, seconds, file) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/debug/pprof/profile?seconds=${seconds}`);
    if (!response.ok) return { error: `pprof answered ${response.status}` };
    await writeFile(file, Buffer.from(await response.arrayBuffer()));
    const top = spawnSync('go', ['tool', 'pprof', '-top', '-nodecount=40', file], { encoding: 'utf8' });
    if (top.status !== 0) return { file, error: top.stderr.trim() };
    return { file, seconds, top: top.stdout.trim().split('\n') };
  } catch (error) {
    return { error: String(error.message ?? error) };
  }
}

/**
 * Samples what Temporal's PostgreSQL backends are doing (pg_stat_activity, every 500 ms) until
 * stop(): the mean number of backends per state and wait event. Backends idle in a transaction
 * and waiting for the client are the server holding a transaction while it does something else;
 * active ones are PostgreSQL at work (IO/WALSync: waiting for the disk).
 */
function sampleBackends(env) {
  const { Client } = require('pg');
  const client = new Client({
    host: env.PGHOST,
    port: Number(env.PGPORT),
    user: env.PGUSER,
    password: env.PGPASSWORD,
    database: env.PGDATABASE,
  });
  const totals = {};
  let samples = 0;
  let stopped = false;
  const loop = (async () => {
    await client.connect();
    while (!stopped) {
      const { rows } = await client.query(
        `SELECT coalesce(state, '-') || ' ' || coalesce(wait_event_type || '/' || wait_event, '-') AS what, count(*)::int AS n
           FROM pg_stat_activity WHERE datname LIKE 'temporal%' AND pid <> pg_backend_pid() GROUP BY 1`,
      );
      samples++;
      for (const { what, n } of rows) totals[what] = (totals[what] ?? 0) + n;
      await sleep(500);
    }
  })().catch((error) => ({ error: String(error.message ?? error) }));
  return {
    async stop() {
      stopped = true;
      const failed = await loop;
      await client.end().catch(() => undefined);
      if (failed?.error) return failed;
      const mean = Object.entries(totals)
        .map(([what, n]) => [what, round(n / Math.max(samples, 1), 2)])
        .sort((a, b) => b[1] - a[1]);
      return { samples, mean_backends: Object.fromEntries(mean) };
    },
  };
}

/** The server's Prometheus counters that explain where its time goes (dev and cluster name them alike). */
async function serverMetrics(port) {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const sums = {};
    for (const line of text.split('\n')) {
      const m = /^(persistence_latency|service_latency)_(sum|count)\{([^}]*)\} ([0-9.e+-]+)$/.exec(line);
      if (!m) continue;
      // A client's request is timed by the frontend and again by the service it forwards to
      // (history, matching): count it where it enters, once.
      if (m[1] === 'service_latency' && !m[3].includes('service_name="frontend"')) continue;
      const op = /operation="([^"]*)"/.exec(m[3])?.[1] ?? '?';
      const key = `${m[1]}:${op}`;
      sums[key] ??= { sum: 0, count: 0 };
      sums[key][m[2]] += Number(m[4]);
    }
    return sums;
  } catch {
    return {};
  }
}
function metricsDelta(a, b, top = 6) {
  const rows = Object.entries(b).map(([k, v]) => ({
    key: k,
    seconds: v.sum - (a[k]?.sum ?? 0),
    count: v.count - (a[k]?.count ?? 0),
  }));
  const pick = (prefix) =>
    rows
      .filter((r) => r.key.startsWith(prefix) && r.count > 0)
      .sort((x, y) => y.seconds - x.seconds)
      .slice(0, top)
      .map((r) => ({ operation: r.key.split(':')[1], seconds: round(r.seconds, 1), count: r.count }));
  const total = (prefix) =>
    round(
      rows.filter((r) => r.key.startsWith(prefix)).reduce((s, r) => s + r.seconds, 0),
      1,
    );
  const count = (key) => rows.find((r) => r.key === key)?.count ?? 0;
  return {
    // Each heartbeat the server takes is a write of the workflow's mutable state.
    heartbeats: count('service_latency:RecordActivityTaskHeartbeat'),
    state_writes: count('persistence_latency:UpdateWorkflowExecution'),
    persistence_s: total('persistence_latency'),
    persistence_top: pick('persistence_latency'),
    service_top: pick('service_latency'),
  };
}

async function stopAllServices(dir) {
  const nodes = await readdir(path.join(dir, 'nodes')).catch(() => []);
  await mapLimit(nodes, 16, (x) => stopServices(path.join(dir, 'nodes', x)).catch(() => undefined));
}

/**
 * The floor: the same observations and applies, by a plain in-process loop calling the agent's
 * providers directly, every node at once (the concurrency a rollout gives), no Temporal. They
 * pass the agent's own gate (src/agent/gate.ts) as the agent's do: ungated, 3000 nodes' held
 * descriptors at once ran out of file descriptors (EMFILE).
 */
async function floorRollout(n, services) {
  const dir = await mkdtemp(path.join(os.tmpdir(), `datum-floor-${n}-`));
  const tearDown = once(() => stopAllServices(dir));
  interruptible.add(tearDown);
  try {
    const nodes = await benchFleet(dir, n, false, services);
    const authority = new DesiredStateAuthority(dir);
    const t0 = Date.now();
    let applies = 0;
    await Promise.all(
      nodes.map(async (node) => {
        const read = await authority.read(node);
        if (!read.ok) throw new Error(read.error);
        const intent = read.intent;
        const resources = Object.fromEntries(
          Object.entries(intent.resources).map(([k, r]) => [
            k,
            r.type === 'release' ? { ...r, artifact: intent.locations[k] } : r,
          ]),
        );
        const configPath = path.join(dir, 'agents', `${node}.yaml`);
        const pre = await agentGate.run('observe', () => observeNode(configPath, { node, resources }));
        const view = { ok: true, generation: intent.generation, digest: intent.digest };
        const first = domain.decide({
          intent,
          authority: view,
          observation: pre,
          history: domain.emptyHistory(),
          now: new Date().toISOString(),
        });
        for (const action of first.decision.authorized_actions) {
          await agentGate.run('apply', () => applyAction(configPath, { node, action }));
          applies++;
        }
        const post = await agentGate.run('observe', () => observeNode(configPath, { node, resources }));
        const final = domain.decide({
          intent,
          authority: view,
          observation: post,
          history: first.history,
          now: new Date().toISOString(),
          acted: { planned: first.decision.planned_actions, actions: first.decision.authorized_actions, evidence: [], pre },
        });
        if (final.decision.convergence_status !== 'CONVERGED')
          throw new Error(`floor: ${node} did not converge: ${final.decision.reason} ${final.decision.reason_detail}`);
      }),
    );
    return { ms: Date.now() - t0, applies };
  } finally {
    await tearDown();
    interruptible.delete(tearDown);
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The shaped ceiling (issue 33): what the engine does for a rollout of Datum's shape when nothing
 * else costs anything. Its own controller process (bench/ceiling-controller.js, the controller
 * worker's tuning) runs a rollout that starts one loop per node, all in flight, with a Datum loop's
 * events (bench/ceiling-workflows.js); its own no-op agent process (bench/ceiling-agent.js, the
 * node worker's tuning) serves one queue per node. It ends when every loop has told the rollout it
 * settled. CPU seconds are read per process; then its loops are terminated and its processes
 * stopped, and the server is left to go idle before Datum's rollout.
 */
async function shapedCeiling({ address, client, serverPids, nodes, mode, dir, logs, placement, say }) {
  const taskQueue = 'bench-ceiling';
  const prefix = 'bench-ceiling-node-';
  const queuesFile = path.join(dir, 'ceiling-queues.json');
  await writeFile(queuesFile, JSON.stringify(nodes.map((node) => `${prefix}${node}`)));
  // Each a process of its own, named for its log and placed as its role is.
  const own = (name, role, args) =>
    start(
      `ceiling-${name}`,
      ...placement.wrap(role, process.execPath, [path.join(root, 'bench', `ceiling-${name}.js`), '--address', address, ...args]),
      logs,
      { ...process.env, ...reporting(logs, `ceiling-${name}`) },
    );
  const controller = own('controller', 'rest', ['--task-queue', taskQueue]);
  const agent = own('agent', 'agent', ['--queues', queuesFile]);
  const procs = [controller, agent];
  try {
    const connection = client.connection;
    await pollerOn(connection, taskQueue, 1, 'the ceiling controller');
    await pollerOn(connection, `${prefix}${nodes[nodes.length - 1]}`, 2, 'the ceiling agent');
    const watched = { ...serverPids, controller: [controller.pid], agent: [agent.pid] };
    const cpu0 = await cpuOf(watched);
    const t0 = Date.now();
    const { settled, unreached } = await client.workflow.execute('shapedRollout', {
      taskQueue,
      workflowId: `bench-ceiling-rollout-${t0}`,
      args: [
        {
          nodes,
          applies: 3,
          watch: mode === 'watch',
          // The bench fleet's resync_interval (bench/fleet.mjs), so loops settled early run their
          // steady passes while the rollout goes on, as Datum's do.
          resync_ms: mode === 'watch' ? 600_000 : 30_000,
          node_queue_prefix: prefix,
          // Datum's rollout starts its loops in batches of 25, 8 batches at a time (src/workflows/rollout.ts).
          batch: 25,
          lanes: 8,
        },
      ],
    });
    const ms = Date.now() - t0;
    const cpu = cpuDelta(cpu0, await cpuOf(watched), ms);
    if (settled !== nodes.length) throw new Error(`the shaped ceiling heard ${settled} of ${nodes.length} loops settle`);
    // A ceiling whose loops did not all reach their nodes did less than a rollout: the row says so.
    if (unreached > 0) say(`the shaped ceiling: ${unreached} of ${nodes.length} loops settled without reaching their node`);
    const memory = { controller: await memoryMb(controller.pid), agent: await memoryMb(agent.pid) };
    // Its loops' events to settling, to set beside Datum's events to first convergence: the shape matches.
    const events = await mapLimit(nodes, 32, async (node) =>
      patiently(() => client.workflow.getHandle(`bench-ceiling/${node}`).describe()).then((d) => d.historyLength),
    );
    await mapLimit(nodes, 32, (node) =>
      client.workflow
        .getHandle(`bench-ceiling/${node}`)
        .terminate('the shaped ceiling is measured')
        .catch(() => undefined),
    );
    return { ms, cpu, memory, events_p50: pct(events, 50), unreached };
  } finally {
    for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
    await Promise.race([Promise.all(procs.map((p) => p.exited)), sleep(10_000)]);
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
  }
}

/** CPU seconds per node of a phase: every role's together, from cpuDelta's figures. */
const cpuPerNode = (cpu, n) => round(Object.values(cpu).reduce((sum, r) => sum + (r.cpu_s ?? 0), 0) / n, 3);

/**
 * Retries a read the server may time out while it is saturated (a query waits for the worker,
 * which at 1000 nodes can be busy for longer than the query's deadline). The bench measures from
 * timestamps the workflows record, so a late answer does not skew a figure.
 */
async function patiently(read, tries = 6) {
  for (let i = 1; ; i++) {
    try {
      return await read();
    } catch (error) {
      if (i >= tries) throw error;
      await sleep(1000 * i);
    }
  }
}
const ask = (handle, query) => patiently(() => handle.query(query), 12);

/** A loop's history events from `sinceMs` on: offset, type and the activity or task queue it names. */
/**
 * Why a rollout ended when it did: the node whose first CONVERGED came last (or never), its
 * loop's decisions by offset from the rollout's start, and the rollout's last ten events.
 */
async function rolloutTail(client, rolloutId, t0, nodes, ledgers, perNode) {
  const never = perNode.indexOf(null);
  const last = never >= 0 ? never : perNode.indexOf(Math.max(...perNode));
  const decisions = (ledgers[last] ?? []).map((e) => ({
    offset_s: (Date.parse(e.decided_at) - t0) / 1000,
    status: e.convergence_status,
    reason: e.reason,
  }));
  const events = await eventsSince(client.workflow.getHandle(rolloutId), t0);
  return { last_node: nodes[last] ?? null, decisions, rollout_events: events.slice(-10).map(eventLine) };
}

async function eventsSince(handle, sinceMs) {
  const history = await patiently(() => handle.fetchHistory());
  const out = [];
  for (const e of history.events ?? []) {
    const at = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);
    if (at < sinceMs) continue;
    const type = temporalProto.temporal.api.enums.v1.EventType[e.eventType] ?? e.eventType;
    const timeout = e.workflowTaskTimedOutEventAttributes?.timeoutType;
    const what =
      e.activityTaskScheduledEventAttributes?.activityType?.name ??
      workflowTaskScheduled(e.workflowTaskScheduledEventAttributes) ??
      e.workflowExecutionSignaledEventAttributes?.signalName ??
      timerFor(e.timerStartedEventAttributes) ??
      (timeout === undefined ? '' : String(temporalProto.temporal.api.enums.v1.TimeoutType[timeout] ?? timeout));
    out.push({ offset_s: (at - sinceMs) / 1000, type, what });
  }
  return out;
}

/** A timer's duration and what the workflow said it waits for (its summary is in the user metadata). */
function timerFor(attributes) {
  if (!attributes) return undefined;
  const d = attributes.startToFireTimeout;
  return `${d ? Number(d.seconds ?? 0) + (d.nanos ?? 0) / 1e9 : '?'} s`;
}

/**
 * A workflow task's queue, and past its first attempt the attempt and its start-to-close timeout.
 * A task retried on the normal queue (attempt 2 on) is transient: the server writes its events
 * only once an attempt completes, and from attempt 4 on it lengthens each attempt's timeout
 * (history.workflowTaskRetryMaxInterval: 5 s doubling, up to 10 minutes more). A long gap before
 * such a task started can be the attempts it took rather than a wait in the queue; these two
 * fields tell which.
 */
function workflowTaskScheduled(attributes) {
  if (!attributes) return undefined;
  const queue = attributes.taskQueue?.name ?? '';
  const attempt = Number(attributes.attempt ?? 1);
  if (attempt <= 1) return queue;
  const timeout = attributes.startToCloseTimeout;
  const timeoutS = timeout ? Number(timeout.seconds ?? 0) + (timeout.nanos ?? 0) / 1e9 : null;
  return `${queue} attempt ${attempt}${timeoutS === null ? '' : ` start-to-close ${timeoutS} s`}`;
}

const eventLine = (e) => `+${e.offset_s.toFixed(3)} s ${e.type} ${e.what}`.trim();

/** CPU cores above their baseline below which a row's processes count as idle. */
const IDLE_CORES = 0.15;
/** The share of a verification pass's node passes that may end after its CPU window and still leave a figure. */
const PASSES_AFTER_WINDOW = 0.01;

/** Every role's figure together: CPU seconds from cpuOf, or cores from coresOver. */
const together = (byRole) => Object.values(byRole).reduce((a, b) => a + b, 0);

/** Each watched role's CPU cores over `ms`: what it burns with nothing asked of it. */
async function coresOver(watched, ms) {
  const before = await cpuOf(watched);
  await sleep(ms);
  const after = await cpuOf(watched);
  return Object.fromEntries(Object.keys(before).map((k) => [k, round((after[k] - before[k]) / (ms / 1000), 3)]));
}

/**
 * Until the watched processes have been idle for 3 s in a row (read from /proc, so the bench
 * itself puts no load on the server), or 15 min: true when they went idle. Idle is within
 * IDLE_CORES of `baseline`, the cores they burned before the phase began: a fleet of 1000 loops
 * in steady state (their resync passes, the watches' heartbeats) burns more than 0.15 cores by
 * itself, and measured against zero the wait never ended.
 */
async function untilIdle(watched, baseline = 0, limitMs = 900_000) {
  const start = Date.now();
  let [last, quiet] = [together(await cpuOf(watched)), 0];
  while (Date.now() - start < limitMs) {
    await sleep(1000);
    const now = together(await cpuOf(watched));
    quiet = now - last < baseline + IDLE_CORES ? quiet + 1 : 0;
    last = now;
    if (quiet >= 3) return true;
  }
  return false;
}

/**
 * When a loop's pass after `sinceMs` recorded its decision: the workflow task that completed
 * after the pass's first observe came back. Null when no observe came back.
 */
async function passEnd(handle, sinceMs) {
  const events = await eventsSince(handle, sinceMs);
  const observed = events.findIndex((e) => e.type === 'EVENT_TYPE_ACTIVITY_TASK_COMPLETED');
  const done = observed < 0 ? undefined : events.slice(observed).find((e) => e.type === 'EVENT_TYPE_WORKFLOW_TASK_COMPLETED');
  return done ? sinceMs + done.offset_s * 1000 : null;
}

/**
 * What the verification pass added to every loop's history, by event type: the mean per node,
 * how many nodes had a workflow task time out, and of which kind (a sticky task that waited out
 * its schedule-to-start timeout adds EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT and a task scheduled again).
 */
async function steadyPassEventTypes(handles, sinceMs) {
  const totals = {};
  const timeoutKinds = {};
  let timedOutNodes = 0;
  await mapLimit(handles, 32, async (h) => {
    const events = await eventsSince(h, sinceMs);
    for (const e of events) totals[e.type] = (totals[e.type] ?? 0) + 1;
    const timedOut = events.filter((e) => e.type === 'EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT');
    for (const e of timedOut) timeoutKinds[e.what] = (timeoutKinds[e.what] ?? 0) + 1;
    if (timedOut.length > 0) timedOutNodes++;
  });
  const perNode = Object.fromEntries(
    Object.entries(totals)
      .sort((a, b) => b[1] - a[1])
      .map(([type, count]) => [type.replace('EVENT_TYPE_', ''), round(count / handles.length)]),
  );
  return { per_node: perNode, nodes_with_timed_out_workflow_task: timedOutNodes, workflow_task_timeouts: timeoutKinds };
}

/**
 * The steady pass as a fleet runs it (issue 33: at most 9 history events): each loop's next resync
 * after the drift phase, with nothing asked of it. The verification pass above is a fleet-wide
 * recheck, a signal and an observe of its own; a resync under patch watch-ends-at-resync is the
 * watch ending there with its snapshot. Waits until every loop has recorded one more pass, for at
 * most the fleet's resync_interval (`resyncMs`, bench/fleet.mjs) and two minutes, and reads each
 * loop's events over that wait against its passes (the state query's passes.done), and each
 * role's CPU over it per pass: all the fleet burns at rest, its heartbeats and the bench's own
 * queries included, set against the passes it ran.
 */
async function resyncPassFigures(handles, resyncMs, cpu, say) {
  const sinceMs = Date.now();
  const cpu0 = await cpu();
  const count = () =>
    mapLimit(handles, 32, async (h) => ({
      events: (await patiently(() => h.describe())).historyLength,
      passes: (await ask(h, contract.stateQuery)).passes?.done ?? 0,
    }));
  const start = await count();
  say(`waiting for every loop's next resync (at most ${resyncMs / 1000 + 120} s) …`);
  let end = start;
  for (;;) {
    // A state query is a round trip through the controller: twice a minute keeps them few.
    await sleep(30_000);
    end = await count();
    const resynced = end.filter((e, i) => e.passes > start[i].passes).length;
    if (resynced === handles.length || Date.now() - sinceMs > resyncMs + 120_000) break;
  }
  const perPass = end.flatMap((e, i) => {
    const passes = e.passes - start[i].passes;
    return passes > 0 ? [round((e.events - start[i].events) / passes)] : [];
  });
  const cpu1 = await cpu();
  const phaseS = round((Date.now() - sinceMs) / 1000, 0);
  const passes = end.reduce((sum, e, i) => sum + (e.passes - start[i].passes), 0);
  const types = await steadyPassEventTypes(handles, sinceMs);
  say(
    `resync: ${perPass.length} of ${handles.length} loops passed; events a pass p50 ${pct(perPass, 50)}, by type per node ${JSON.stringify(types.per_node)}`,
  );
  return {
    resync_passes: `${perPass.length}/${handles.length}`,
    events_per_resync_pass_p50: pct(perPass, 50),
    events_per_resync_pass_max: perPass.length > 0 ? Math.max(...perPass) : null,
    resync_pass_event_types: types,
    resync_phase_s: phaseS,
    resync_cpu_ms_per_pass: Object.fromEntries(
      Object.keys(cpu0).map((k) => [k, passes > 0 ? round(((cpu1[k] - cpu0[k]) / passes) * 1000, 1) : null]),
    ),
  };
}

async function runSize(n, mode, serverKind, workerCount) {
  const dir = await mkdtemp(path.join(os.tmpdir(), `datum-bench-${serverKind}-${n}-${mode}-`));
  const logs = path.join(dir, 'logs');
  await mkdir(logs);
  const procs = [];
  const say = (m) => console.error(`bench: ${serverKind}, ${n} nodes, ${mode}, ${workerCount} worker(s): ${m}`);
  let server = null;
  // Other work on the machine competes with every process measured: the row says how much there was.
  const load0 = os.loadavg()[0];
  // What the row measured so far: a later phase that fails keeps the finished phases' figures.
  const partial = { server: serverKind, workers: workerCount, nodes: n, mode };
  const tearDown = once(async () => {
    for (const p of [...procs].reverse()) if (p.exitCode === null) p.kill('SIGTERM');
    // A profiled process writes its profile on exit, which takes a moment for a big one.
    await Promise.race([Promise.all(procs.map((p) => p.exited)), sleep(values.profile ? 60_000 : 5000)]);
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    await stopAllServices(dir);
    if (server) await server.stop();
    else if (serverKind === 'cluster') await clusterLeftIn(dir);
  });
  interruptible.add(tearDown);
  try {
    const services = Math.min(serviceNodes, n);
    const nodes = await benchFleet(dir, n, mode === 'watch', services);
    server = await startServer(serverKind, dir, logs, { shards, say });
    await pinServer(server);
    const { address, connection, metricsPort } = server;
    const client = new Client({ connection });
    // The ceiling first, on the server with nothing else on it: before Datum's controller and
    // agent start, so neither their polls nor the fleet workflow (which opens a NO_RUNNING_LOOP
    // work item for every declared node not yet rolled out) compete with it.
    say('shaped ceiling …');
    const serverPids = {
      server: [server.pids.server],
      ...(server.pids.postgres ? { postgres: [server.pids.postgres] } : {}),
    };
    const ceiling = await shapedCeiling({ address, client, serverPids, nodes, mode, dir, logs, placement, say });
    const ceilingMs = ceiling.ms;
    say(`shaped ceiling ${ceilingMs / 1000} s, ${cpuPerNode(ceiling.cpu, n)} CPU-s a node; Datum's controller and agent …`);
    const datum = path.join(root, 'bin', 'datum.js');
    const prof = (name) => (values.profile ? ['--cpu-prof', '--cpu-prof-dir', path.join(logs, `${name}-prof`)] : []);
    // Every controller shares the fleet and the ledger: on dev the SQLite file under dir, on the
    // cluster its PostgreSQL (DATUM_LEDGER_URL).
    const workers = Array.from({ length: workerCount }, (_, i) =>
      start(
        `worker-${i + 1}`,
        ...placement.wrap('rest', process.execPath, [
          ...workerMemory.nodeArgs,
          ...prof('worker'),
          datum,
          'worker',
          '--fleet',
          dir,
          '--data',
          dir,
          '--address',
          address,
        ]),
        logs,
        { ...process.env, ...workerMemory.env, ...server.workerEnv, ...reporting(logs, `worker-${i + 1}`) },
      ),
    );
    const agent = start(
      'agent',
      ...placement.wrap('agent', process.execPath, [
        ...prof('agent'),
        datum,
        'agent',
        '--address',
        address,
        ...nodes.flatMap((node) => ['--config', path.join(dir, 'agents', `${node}.yaml`)]),
      ]),
      logs,
      // The agent's register of roots in the run's directory, as mixed.mjs and fleet-view.mjs
      // keep it: a run stopped midway leaves no entries in the host's /run/datum.
      { ...process.env, ...reporting(logs, 'agent'), DATUM_RUNTIME_DIR: path.join(dir, 'run') },
    );
    procs.push(...workers, agent);
    const tAgent = Date.now();
    await pollerOn(connection, contract.CONTROL_TASK_QUEUE, 1, 'the controller');
    await pollerOn(connection, contract.agentTaskQueue(nodes[n - 1]), 2, 'the agent');
    const agentStartS = (Date.now() - tAgent) / 1000;
    say(`controller and agent (${n} node workers) polling after ${agentStartS} s; waiting for the processes to go idle …`);
    const watched = { ...serverPids, worker: workers.map((w) => w.pid), agent: [agent.pid] };
    await untilIdle(watched);
    say('rollout …');

    // Full rollout of generation 1 to every node.
    const [cpu0, m0] = [await cpuOf(watched), await serverMetrics(metricsPort)];
    const t0 = Date.now();
    // On the cluster: the Temporal server's own CPU profile over the rollout's first 30 s.
    const serverProfile = server.pprofPort ? serverCpuProfile(server.pprofPort, 30, path.join(logs, 'server-cpu.pprof')) : null;
    // And what Temporal's PostgreSQL backends were doing, sampled over the whole rollout.
    const backends = server.postgresEnv ? sampleBackends(server.postgresEnv) : null;
    const result = await client.workflow.execute(contract.WORKFLOW_TYPES.rollout, {
      taskQueue: contract.CONTROL_TASK_QUEUE,
      workflowId: contract.rolloutWorkflowId(1, nodes),
      args: [{ generation: 1, nodes }],
    });
    const rolloutMs = Date.now() - t0;
    const rolloutBackends = backends ? await backends.stop() : null;
    const [cpu1, m1] = [await cpuOf(watched), await serverMetrics(metricsPort)];
    const converged = result.nodes.filter((x) => x.status === 'CONVERGED').length;
    // How the rollout left each node, by status and reason: for a partial rollout, what it hit
    // (NODE_UNREACHABLE when the agent took no task within node_timeout, which on an overloaded
    // machine it may not). Kept with the row's finished phases if a later phase fails.
    const statusOf = (x) => `${x.status ?? x.outcome}${x.reason ? `/${x.reason}` : ''}`;
    const rolloutStatuses = {};
    for (const x of result.nodes) rolloutStatuses[statusOf(x)] = (rolloutStatuses[statusOf(x)] ?? 0) + 1;
    const rolloutCpu = cpuDelta(cpu0, cpu1, rolloutMs);
    const rolloutFigures = {
      converged,
      rollout_statuses: rolloutStatuses,
      rollout_s: rolloutMs / 1000,
      ceiling_s: ceilingMs / 1000,
      datum_over_ceiling: round(rolloutMs / ceilingMs),
      // CPU-s per node over the phase, every measured process together (server, PostgreSQL,
      // controllers, agent): Datum's rollout against the shaped ceiling's.
      rollout_cpu_s_per_node: cpuPerNode(rolloutCpu, n),
      ceiling_cpu_s_per_node: cpuPerNode(ceiling.cpu, n),
      datum_over_ceiling_cpu: round(cpuPerNode(rolloutCpu, n) / cpuPerNode(ceiling.cpu, n)),
      // The same for the server, PostgreSQL and the controllers only (rows.mjs).
      control_over_ceiling_cpu: controlPlaneCpuRatio(rolloutCpu, ceiling.cpu),
      ceiling_events_to_settle_p50: ceiling.events_p50,
      // Ceiling loops that settled without reaching their node (0 when the ceiling did a full rollout).
      ceiling_unreached: ceiling.unreached,
      ceiling_cpu: ceiling.cpu,
      ceiling_memory_mb: ceiling.memory,
    };
    Object.assign(partial, rolloutFigures);
    say(`rollout ${rolloutMs / 1000} s, ${converged}/${n} CONVERGED; verification pass …`);
    if (converged < n) say(`the rollout's statuses: ${JSON.stringify(rolloutStatuses)}`);
    const handles = nodes.map((node) => client.workflow.getHandle(contract.reconcileWorkflowId(node, 1)));
    // Per node: from the rollout's start to the node's recorded convergence.
    const ledgers = await mapLimit(handles, 32, (h) => ask(h, contract.ledgerQuery));
    const perNode = ledgers.map((ledger) => {
      const done = ledger.find((e) => e.convergence_status === 'CONVERGED');
      return done ? Date.parse(done.decided_at) - t0 : null;
    });
    // The rollout's tail: the node that converged last, every decision its loop recorded, and the
    // rollout's own last events (what it waited on after that node converged).
    const tail = await rolloutTail(client, contract.rolloutWorkflowId(1, nodes), t0, nodes, ledgers, perNode);
    if (tail.last_node) say(`the rollout's tail: ${JSON.stringify(tail)}`);

    // Full verification pass: recheck every node; it ends when the last node's pass has recorded
    // its decision.
    const events0 = await mapLimit(handles, 32, async (h) => (await patiently(() => h.describe())).historyLength);
    const baselineCores = await coresOver(watched, 10_000);
    const [cpu2, m2] = [await cpuOf(watched), await serverMetrics(metricsPort)];
    const t1 = Date.now();
    await mapLimit(handles, 64, (h) => h.signal(contract.recheckSignal, {}));
    // The bench asks nothing of the loops while they verify: it watches the processes' CPU until
    // they are idle, then reads from each loop's history when its pass recorded its decision.
    const idle = await untilIdle(watched, together(baselineCores));
    const [cpu3, m3] = [await cpuOf(watched), await serverMetrics(metricsPort)];
    const verifyPhaseMs = Date.now() - t1;
    // A loop whose task waits out a sticky schedule-to-start timeout burns no CPU meanwhile: the
    // processes can go idle with a few passes unfinished. Those few are read again until they end.
    const verifiedAt = await mapLimit(handles, 16, (h) => passEnd(h, t1));
    while (verifiedAt.includes(null) && Date.now() - t1 < 900_000) {
      await sleep(5000);
      await mapLimit([...verifiedAt.keys()], 16, async (i) => {
        verifiedAt[i] ??= await passEnd(handles[i], t1);
      });
    }
    if (!idle) say('the processes were not idle 15 min after the recheck; the pass is measured as far as it got');
    const unverified = verifiedAt.filter((v) => v === null).length;
    if (unverified > 0) say(`verification pass: ${unverified} nodes recorded no pass`);
    const verifyMs = unverified > 0 ? null : Math.max(...verifiedAt) - t1;
    // The CPU window ends when the processes look idle. Where the fleet at rest burns close to
    // what the shared core can give, busy and rest look alike, and the window can end with passes
    // still to come: then the pass's CPU is not in it, and the per node-pass figures are withheld.
    const afterWindow = verifiedAt.filter((v) => v === null || v - t1 > verifyPhaseMs).length;
    const windowHolds = afterWindow <= n * PASSES_AFTER_WINDOW;
    if (!windowHolds)
      say(`${afterWindow} of ${n} passes ended after the CPU window (${verifyPhaseMs / 1000} s): no figure per node-pass`);
    const verificationFigures = {
      verification_pass_s: verifyMs === null ? null : verifyMs / 1000,
      verification_unfinished_nodes: unverified,
      // What the processes burned in the 10 s before the recheck; the pass ended for the
      // harness when they were back within 0.15 cores of it.
      idle_cores_before_pass: baselineCores,
      // How long the CPU window was, and how many passes ended after it.
      pass_cpu_window_s: verifyPhaseMs / 1000,
      passes_after_window: afterWindow,
      // Issue 33's server CPU per node-pass: each role's CPU over the pass less what it burns at
      // rest (its baseline over the same time), per node, in ms. A role absent here is null, and
      // every role is null when more than 1% of the passes ended after the window.
      ...Object.fromEntries(
        ['server', 'postgres', 'worker', 'agent'].map((k) => [
          `${k}_ms_per_node_pass`,
          k in baselineCores && windowHolds
            ? round(((cpu3[k] - cpu2[k] - baselineCores[k] * (verifyPhaseMs / 1000)) / n) * 1000, 1)
            : null,
        ]),
      ),
    };
    Object.assign(partial, verificationFigures);
    // Where the slowest node's pass spent the time: its history from the recheck on, by offset.
    const slowest = verifiedAt.indexOf(Math.max(...verifiedAt.filter((v) => v !== null)));
    const slowestEvents = slowest < 0 ? [] : await eventsSince(handles[slowest], t1);
    const verifySpread = verifiedAt.filter((v) => v !== null).map((v) => v - t1);
    await sleep(1000);
    const events1 = await mapLimit(handles, 32, async (h) => (await patiently(() => h.describe())).historyLength);
    const steadyEvents = events1.map((e, i) => e - events0[i]);
    say(`verification pass ${verifyMs === null ? 'unfinished' : `${verifyMs / 1000} s`}; drift detection …`);
    if (slowest >= 0) say(`the slowest node's pass (${nodes[slowest]}):\n  ${slowestEvents.map(eventLine).join('\n  ')}`);
    const steadyTypes = await steadyPassEventTypes(handles, t1);
    say(`the pass's events per node, by type: ${JSON.stringify(steadyTypes)}`);

    // Drift detection: out-of-band edits to managed config files and kills of service processes,
    // at random nodes and random times; latency is the change → the ledger entry recording it.
    const picked = [...nodes.keys()].sort(() => Math.random() - 0.5).slice(0, Math.min(fileChanges, n));
    const changes = [
      ...picked.map((i) => ({ i, kind: 'file' })),
      ...Array.from({ length: services }, (_, i) => ({ i, kind: 'service' })),
    ];
    // Changes land at random times over a window of two default resync intervals (60 s), so a
    // polling loop meets them at every phase of its timer. A fleet-wide recheck 20 s in puts some
    // of them into a verification pass, when every loop has a task queued at the controller;
    // each change says whether it landed during that pass (issue 33: detection during a pass).
    const windowMs = 60_000;
    const passAt = Date.now() + 20_000;
    const passEndsAt = passAt + (verifyMs ?? 30_000);
    const fleetPass = sleep(20_000).then(() => mapLimit(handles, 64, (h) => h.signal(contract.recheckSignal, {})));
    const detect = async ({ i, kind }) => {
      await sleep(Math.random() * windowMs);
      const nodeRoot = path.join(dir, 'nodes', nodes[i]);
      const eventsBefore = (await patiently(() => handles[i].describe())).historyLength;
      let at;
      if (kind === 'file') {
        at = Date.now();
        await writeFile(path.join(nodeRoot, 'etc/app/config.json'), `${JSON.stringify({ workers: 1000 + i }, null, 2)}\n`);
      } else {
        const state = await readServiceState(nodeRoot, 'app');
        at = Date.now();
        process.kill(state.pid, 'SIGKILL');
      }
      const duringPass = at >= passAt && at <= passEndsAt;
      // The latency is read from the entry's own decided_at, so asking late loses nothing: the
      // first ask waits 5 s and the next ones 2 s, which keeps the bench's queries (a round trip
      // through the controller each) from loading the server and controller it measures.
      await sleep(5000);
      for (;;) {
        const entry = (await ask(handles[i], contract.ledgerQuery)).find((e) => Date.parse(e.decided_at) >= at);
        if (entry) {
          // The repair is recorded; its pass has finished once the node is CONVERGED again.
          for (let w = 0; w < 40 && (await ask(handles[i], contract.stateQuery)).convergence_status !== 'CONVERGED'; w++)
            await sleep(250);
          await sleep(500);
          return {
            kind,
            during_pass: duringPass,
            ms: Date.parse(entry.decided_at) - at,
            // The node's own latency: from the change to the observation that saw it, before the
            // controller's queueing and decision.
            observed_ms: entry.observed_at ? Date.parse(entry.observed_at) - at : null,
            events: (await patiently(() => handles[i].describe())).historyLength - eventsBefore,
          };
        }
        if (Date.now() - at > 120_000) return { kind, during_pass: duringPass, ms: null, node: nodes[i] };
        await sleep(2000);
      }
    };
    const [detections] = await Promise.all([Promise.all(changes.map(detect)), fleetPass]);
    const among = {
      all: () => true,
      file: (d) => d.kind === 'file',
      service: (d) => d.kind === 'service',
      pass: (d) => d.during_pass,
      quiet: (d) => !d.during_pass,
    };
    const ms = (which) => detections.filter((d) => among[which](d) && d.ms !== null).map((d) => d.ms / 1000);
    const observedS = detections.filter((d) => typeof d.observed_ms === 'number').map((d) => d.observed_ms / 1000);
    // Memory at the end of the row and at each process's peak, then once more after --settle
    // seconds with no rollout and no change: one sample can sit anywhere in a collector's cycle.
    const atEnd = await memoryOf(workers, agent, server);
    await sleep(settleSeconds * 1000);
    const settled = await memoryOf(workers, agent, server);
    // With --resync-pass: each loop's next resync, the steady pass as a fleet runs it.
    const resyncFigures = values['resync-pass']
      ? await resyncPassFigures(handles, mode === 'watch' ? 600_000 : 30_000, () => cpuOf(watched), say)
      : {};
    return {
      ...measured,
      beside_others: others.length,
      server: serverKind,
      server_detail: server.describe,
      // The shaped ceiling (issue 33); rows before 6 December 2026 measured a plain one: one
      // in-process worker, one queue, 200 workflows in flight, no agent process, no CPU read.
      ceiling_kind: 'shaped',
      placement: placement.describe,
      load_avg_1m: round((load0 + os.loadavg()[0]) / 2, 1),
      workers: workerCount,
      // The controller's workflow cache (datum worker --max-cached-workflows), which bounds its RSS.
      max_cached_workflows:
        workerMemory.env.DATUM_MAX_CACHED_WORKFLOWS ?? process.env.DATUM_MAX_CACHED_WORKFLOWS ?? 'SDK default',
      // The controller's memory settings (--worker-memory); rows before 7 December 2026 ran Node's defaults.
      worker_memory: workerMemory.describe,
      nodes: n,
      mode,
      service_nodes: services,
      ...rolloutFigures,
      convergence_p50_s: pct(perNode, 50) / 1000,
      convergence_p99_s: pct(perNode, 99) / 1000,
      convergence_max_s: Math.max(...perNode.filter((v) => v !== null)) / 1000,
      rollout_tail: tail,
      ...verificationFigures,
      verification_p50_s: pct(verifySpread, 50) / 1000,
      verification_slowest: slowest < 0 ? null : { node: nodes[slowest], events: slowestEvents.map(eventLine) },
      steady_pass_event_types: steadyTypes,
      detection_p50_s: pct(ms('all'), 50),
      detection_p99_s: pct(ms('all'), 99),
      detection_observed_p50_s: pct(observedS, 50),
      detection_observed_p99_s: pct(observedS, 99),
      detection_file_p99_s: pct(ms('file'), 99),
      detection_during_pass_p99_s: pct(ms('pass'), 99),
      detection_quiet_p99_s: pct(ms('quiet'), 99),
      detections_during_pass: detections.filter((d) => d.during_pass).length,
      detection_service_p99_s: pct(ms('service'), 99),
      detections: `${ms('all').length}/${changes.length}`,
      // Changes no ledger entry recorded within 120 s: which kind, at which node.
      missed: detections.filter((d) => d.ms === null).map((d) => `${d.kind} ${d.node}`),
      events_per_steady_pass_p50: pct(steadyEvents, 50),
      events_per_steady_pass_max: Math.max(...steadyEvents),
      ...resyncFigures,
      events_to_first_convergence_p50: pct(events0, 50),
      events_per_repair_p50: pct(
        detections.map((d) => d.events ?? null),
        50,
      ),
      events_per_repair_max: Math.max(...detections.map((d) => d.events ?? 0)),
      ...Object.fromEntries(
        ['worker', 'agent', 'server'].flatMap((p) => [
          [`${p}_rss_mb`, atEnd[p].rss],
          [`${p}_peak_mb`, settled[p].peak],
          [`${p}_settled_mb`, settled[p].rss],
        ]),
      ),
      settle_s: settleSeconds,
      server_cpu_rollout_cores: rolloutCpu.server.cores,
      postgres_cpu_rollout_cores: rolloutCpu.postgres?.cores ?? null,
      worker_cpu_rollout_cores: rolloutCpu.worker.cores,
      agent_cpu_rollout_cores: rolloutCpu.agent.cores,
      agent_start_s: agentStartS,
      // Polls the server turned away ("namespace concurrent poller limit exceeded"), as the
      // controller's and the agent's logs report them: 0 when one poll per node fits its limits.
      refused_polls: [...workers, agent].reduce((sum, p) => sum + (p.output().match(REFUSED_POLL) ?? []).length, 0),
      // MB: the first worker's and the agent's V8 heap against their RSS, at the end of the row.
      memory: {
        worker: await memoryInside(workers[0].pid, logs, 'worker-1'),
        agent: await memoryInside(agent.pid, logs, 'agent'),
      },
      profile: {
        server_cpu: serverProfile ? await serverProfile : null,
        rollout_postgres_backends: rolloutBackends,
        rollout_cpu: rolloutCpu,
        verification_cpu: cpuDelta(cpu2, cpu3, verifyPhaseMs),
        rollout_server_metrics: metricsDelta(m0, m1),
        verification_server_metrics: metricsDelta(m2, m3),
      },
      logs,
    };
  } catch (error) {
    throw Object.assign(error instanceof Error ? error : new Error(String(error)), { partial });
  } finally {
    await tearDown();
    interruptible.delete(tearDown);
    if (!values.keep && !values.profile) await rm(dir, { recursive: true, force: true });
  }
}

/**
 * What a row or the floor started and must stop, also when the run is interrupted (Ctrl-C, or a
 * SIGTERM): before, an interrupted row left its server, PostgreSQL and the demo services running.
 */
const interruptible = new Set();
let interrupted = false;
async function interrupt(signal) {
  if (interrupted) return;
  interrupted = true;
  console.error(`bench: ${signal}: stopping what the run started (the rows finished so far are written) …`);
  await Promise.allSettled([...interruptible].map((stop) => stop()));
  process.exit(130);
}
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => void interrupt(signal));

/** A cluster the row had started when Cluster.up had not yet returned it: found by its data directory. */
async function clusterLeftIn(dir) {
  const { Cluster } = require(dist('cluster/cluster.js'));
  const cluster = await Cluster.attach(path.join(dir, 'cluster')).catch(() => null);
  await cluster?.down();
}

// A row that fails closes its connection while other reads of that row may still be waiting to
// retry; the client's retry timer then throws "Channel has been shut down" outside any promise,
// which killed a whole run (2026-12-01, at 1000 nodes). That one error belongs to a finished
// row: it is logged, and the matrix goes on. Anything else still ends the run.
process.on('uncaughtException', (error) => {
  if (/Channel has been shut down/.test(error?.message ?? '')) {
    console.error(`bench: a read of a finished row gave up: ${error.message}`);
    return;
  }
  console.error(error);
  process.exit(1);
});

const results = [];
let soakResult = null;
const date = new Date().toISOString().slice(0, 10);
const machine = {
  cpus: os.cpus().length,
  cpu_model: os.cpus()[0]?.model ?? null,
  mem_gb: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
};
const out = (ext) => path.join(root, 'bench', 'results', `${date}.${ext}`);
const command = `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim();
const earlier = await readFile(out('json'), 'utf8').then(JSON.parse, () => null);
const commands = [...new Set([...(earlier?.commands ?? []), command])];

/** This run's rows over the earlier same-day rows (see replaceRows). */
const accumulated = () => replaceRows(earlier?.results ?? [], results);

async function writeResults() {
  await writeDay(out('json'), {
    date,
    commands,
    machine,
    results: accumulated(),
    soak: soakResult ?? earlier?.soak ?? null,
  });
}

for (const n of sizes) {
  console.error(`bench: ${n} nodes, floor (plain loop, no Temporal) …`);
  const floor = await floorRollout(n, Math.min(serviceNodes, n));
  for (const mode of modes)
    for (const workerCount of workerCounts)
      for (const serverKind of servers) {
        const row = `${serverKind}, ${n} nodes, ${mode}, ${workerCount} worker(s)`;
        console.error(`bench: ${row} …`);
        const runs = [];
        const failures = [];
        for (let i = 1; i <= repeat; i++) {
          if (repeat > 1) console.error(`bench: ${row}, run ${i} of ${repeat} …`);
          try {
            runs.push(await runSize(n, mode, serverKind, workerCount));
          } catch (error) {
            // A run that fails (a server that does not come up, a pass that never ends) is
            // recorded with its error; the other runs and the rest of the matrix still run.
            console.error(`bench: ${row} failed: ${error.stack ?? error}`);
            failures.push({ partial: error.partial, error: String(error.message ?? error) });
          }
        }
        if (runs.length === 0) {
          results.push({
            ...(failures[0].partial ?? { server: serverKind, workers: workerCount, nodes: n, mode }),
            error: failures.map((f) => f.error).join('; '),
          });
          await writeResults();
          continue;
        }
        const r = combineRuns(runs, failures);
        if (values.profile) {
          r.profile.node = await summarizeProfiles(r.logs);
          if (!values.keep) for (const run of runs) await rm(path.dirname(run.logs), { recursive: true, force: true });
        }
        delete r.logs;
        results.push({ ...r, floor_s: floor.ms / 1000, datum_over_floor: round(r.rollout_s / (floor.ms / 1000)) });
        // Written after every row: a later size that fails does not lose the earlier ones.
        await writeResults();
        console.error(
          `bench: ${row}: rollout ${r.rollout_s} s, verification ${r.verification_pass_s} s, detection p99 ${r.detection_p99_s} s`,
        );
      }
}
if (soakHours > 0) {
  console.error(`bench: ${soakHours} h simulated soak on the time-skipping server …`);
  // At the default resync_interval (30s): 2880 passes a day, so continue-as-new many times over.
  soakResult = await soak({ hours: soakHours, resync: '30s', log: (m) => console.error(`bench: soak: ${m}`) });
}

await writeResults();
console.log(markdown(accumulated(), soakResult ?? earlier?.soak ?? null));
console.error(`bench: wrote ${['json', 'md', 'svg'].map((e) => path.relative(root, out(e))).join(', ')}`);
process.exit(0);
