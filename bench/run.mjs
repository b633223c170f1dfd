#!/usr/bin/env node
// Fleet benchmark, first cut (issue 5 is open; see bench/README.md for what is still missing).
// Runs against a real dev server with a real controller worker and one real agent process
// serving N virtual nodes (each with its own task queue, root and agent.yaml), and measures:
//   - a full rollout: rollout workflow until every node is CONVERGED, per-node latency p50/p99;
//   - a full verification pass: `recheck` to every node until every last_verified_at moved;
//   - history events per steady-state pass and per repair.
// Writes bench/results/<date>.json and prints a markdown table.
//
//   npm run bench -- --nodes 100[,300]
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const dist = (p) => path.join(root, 'dist', 'src', p);
const { Client, Connection } = require('@temporalio/client');
const { stringify } = require('yaml');
const { temporalCliPath } = require(dist('worker/paths.js'));
const { stopServices } = require(dist('agent/services.js'));
const contract = require(dist('workflows/contract.js'));
const { observeNode, applyAction } = require(dist('agent/activities.js'));
const { DesiredStateAuthority } = require(dist('activities/authority.js'));
const domain = require(dist('domain/index.js'));
const { Worker, NativeConnection } = require('@temporalio/worker');

/**
 * The floor: the same observations and applies, by a plain in-process loop calling the agent's
 * providers directly, every node at once (the concurrency a rollout gives), no Temporal.
 */
async function floorRollout(n) {
  const dir = await mkdtemp(path.join(os.tmpdir(), `datum-floor-${n}-`));
  try {
    const nodes = await fleetOf(dir, n, false);
    const authority = new DesiredStateAuthority(dir);
    const t0 = Date.now();
    let applies = 0;
    await Promise.all(
      nodes.map(async (node) => {
        const read = await authority.read(node);
        if (!read.ok) throw new Error(read.error);
        const intent = read.intent;
        const resources = Object.fromEntries(Object.entries(intent.resources).map(([k, r]) => [k, r.type === 'release' ? { ...r, artifact: intent.locations[k] } : r]));
        const configPath = path.join(dir, 'agents', `${node}.yaml`);
        const pre = await observeNode(configPath, { node, resources });
        const view = { ok: true, generation: intent.generation, digest: intent.digest };
        const first = domain.decide({ intent, authority: view, observation: pre, history: domain.emptyHistory(), now: new Date().toISOString() });
        for (const action of first.decision.authorized_actions) {
          await applyAction(configPath, { node, action });
          applies++;
        }
        const post = await observeNode(configPath, { node, resources });
        if (Object.values(post.resources).some((r) => r.value === null)) throw new Error(`floor: ${node} did not converge`);
      }),
    );
    return { ms: Date.now() - t0, applies };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The ceiling: N no-op workflows running the same number of activities as a repair pass. */
async function ceilingRollout(address, n, appliesPerNode) {
  const connection = await NativeConnection.connect({ address });
  const taskQueue = 'bench-ceiling';
  const worker = await Worker.create({ connection, taskQueue, workflowsPath: path.join(root, 'bench', 'ceiling-workflows.js'), activities: { noop: () => Promise.resolve() } });
  const running = worker.run();
  try {
    const client = new Client({ connection: await Connection.connect({ address }) });
    const t0 = Date.now();
    await Promise.all(Array.from({ length: n }, (_, i) => client.workflow.execute('noopPass', { taskQueue, workflowId: `bench-ceiling-${i}-${t0}`, args: [appliesPerNode] })));
    return Date.now() - t0;
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
  }
}

const { values } = parseArgs({
  options: { nodes: { type: 'string', default: '100' }, modes: { type: 'string', default: 'watch,poll' }, changes: { type: 'string', default: '20' }, keep: { type: 'boolean' } },
});
const modes = values.modes.split(',');
if (modes.some((m) => m !== 'watch' && m !== 'poll')) {
  console.error(`bench: --modes ${values.modes} must list watch and/or poll`);
  process.exit(2);
}
const sizes = values.nodes.split(',').map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 1)) {
  console.error(`bench: --nodes ${values.nodes} must be a comma-separated list of node counts, such as 100,300`);
  process.exit(2);
}

const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : null;
};

function start(name, command, args, logDir, env = process.env) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const chunks = [];
  child.stdout.on('data', (d) => chunks.push(d));
  child.stderr.on('data', (d) => chunks.push(d));
  child.on('exit', () => void writeFile(path.join(logDir, `${name}.log`), Buffer.concat(chunks)).catch(() => undefined));
  return child;
}

async function rss(pid) {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) * 1024;
  } catch {
    return null;
  }
}
async function cpuSeconds(pid) {
  try {
    const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

async function fleetOf(dir, n, watch) {
  await Promise.all(['desired/nodes', 'agents', 'artifacts', 'nodes'].map((d) => mkdir(path.join(dir, d), { recursive: true })));
  const art = path.join(root, 'examples', 'fleet', 'artifacts', 'app-7.3.tgz');
  const sha = createHash('sha256').update(await readFile(art)).digest('hex');
  const nodes = Array.from({ length: n }, (_, i) => `B-${String(i + 1).padStart(4, '0')}`);
  // Polling mode keeps the default resync (30s); watch mode relies on events with resync as a
  // safety net. conflict_window 0s: the bench's out-of-band edits are drift, not a second writer.
  const policy = { resync_interval: watch ? '10m' : '30s', node_timeout: '60s', observation_ttl: '120s', conflict_window: '0s', watch };
  await Promise.all(
    nodes.map(async (node) => {
      const desired = {
        node,
        generation: 1,
        resources: {
          build: { type: 'release', version: '7.3', artifact: art, sha256: sha },
          config: { type: 'file', path: 'etc/app/config.json', content: { workers: 8 } },
          feature: { type: 'flag', value: true },
        },
        policy,
      };
      await writeFile(path.join(dir, 'desired/nodes', `${node}.yaml`), stringify(desired));
      await writeFile(path.join(dir, 'agents', `${node}.yaml`), stringify({ node, root: path.join(dir, 'nodes', node), reconciliation: { mode: 'enforce' } }));
    }),
  );
  return nodes;
}

async function runSize(n, mode) {
  const dir = await mkdtemp(path.join(os.tmpdir(), `datum-bench-${n}-`));
  const logs = path.join(dir, 'logs');
  await mkdir(logs);
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const procs = [];
  try {
    const nodes = await fleetOf(dir, n, mode === 'watch');
    const server = start('temporal', temporalCliPath(), ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port), '--db-filename', path.join(dir, 'temporal.sqlite'), '--log-level', 'error', ...contract.DATUM_SEARCH_ATTRIBUTES.flatMap((k) => ['--search-attribute', `${k.name}=${{ KEYWORD: 'Keyword', INT: 'Int', KEYWORD_LIST: 'KeywordList' }[k.type]}`])], logs);
    procs.push(server);
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
    const datum = path.join(root, 'bin', 'datum.js');
    const worker = start('worker', process.execPath, [datum, 'worker', '--fleet', dir, '--data', dir, '--address', address], logs);
    const agent = start('agent', process.execPath, [datum, 'agent', '--address', address, ...nodes.flatMap((node) => ['--config', path.join(dir, 'agents', `${node}.yaml`)])], logs);
    procs.push(worker, agent);
    await sleep(3000);

    // The ceiling first, on the idle server, so Datum's loops do not compete with it.
    const ceilingMs = await ceilingRollout(address, n, 3);
    const cpu0 = await cpuSeconds(server.pid);
    const t0 = Date.now();
    const result = await client.workflow.execute('rollout', { taskQueue: contract.CONTROL_TASK_QUEUE, workflowId: contract.rolloutWorkflowId(1, nodes), args: [{ generation: 1, nodes }] });
    const rolloutMs = Date.now() - t0;
    const converged = result.nodes.filter((x) => x.status === 'CONVERGED').length;
    // Per-node latency: from the rollout's start to the node's recorded convergence.
    const perNode = await Promise.all(
      nodes.map(async (node) => {
        const ledger = await client.workflow.getHandle(contract.reconcileWorkflowId(node, 1)).query(contract.ledgerQuery);
        const done = ledger.find((e) => e.convergence_status === 'CONVERGED');
        return done ? Date.parse(done.decided_at) - t0 : null;
      }),
    );

    // Full verification pass: recheck every node, wait until every last_verified_at moved.
    const handles = nodes.map((node) => client.workflow.getHandle(contract.reconcileWorkflowId(node, 1)));
    const before = await Promise.all(handles.map((h) => h.query(contract.stateQuery)));
    const events0 = await Promise.all(handles.map(async (h) => (await h.describe()).historyLength));
    const t1 = Date.now();
    await Promise.all(handles.map((h) => h.signal(contract.recheckSignal, {})));
    const pending = new Set(nodes.map((_, i) => i));
    while (pending.size > 0) {
      await Promise.all(
        [...pending].map(async (i) => {
          const s = await handles[i].query(contract.stateQuery);
          if (s.last_verified_at && s.last_verified_at !== before[i].last_verified_at) pending.delete(i);
        }),
      );
      if (Date.now() - t1 > 600_000) throw new Error(`verification pass did not finish in 10 min; ${pending.size} nodes left`);
    }
    const verifyMs = Date.now() - t1;
    await sleep(1000);
    const events1 = await Promise.all(handles.map(async (h) => (await h.describe()).historyLength));
    const steadyEvents = events1.map((e, i) => e - events0[i]);
    const repairEvents = events0; // the first pass (the repair) plus start-up, per node
    // Drift-detection latency: out-of-band edits of managed files at random nodes and random
    // times; latency is edit → the ledger entry that records the node's next decision.
    const k = Math.min(Number(values.changes), n);
    const picked = [...nodes.keys()].sort(() => Math.random() - 0.5).slice(0, k);
    const detections = await Promise.all(
      picked.map(async (i) => {
        await sleep(Math.random() * 2000);
        const file = path.join(dir, 'nodes', nodes[i], 'etc/app/config.json');
        const at = Date.now();
        await writeFile(file, `${JSON.stringify({ workers: 1000 + i }, null, 2)}\n`);
        for (;;) {
          const ledger = await handles[i].query(contract.ledgerQuery);
          const entry = ledger.find((e) => Date.parse(e.decided_at) >= at);
          if (entry) return Date.parse(entry.decided_at) - at;
          if (Date.now() - at > 120_000) return null;
          await sleep(50);
        }
      }),
    );
    const detected = detections.filter((x) => x !== null);
    const cpu1 = await cpuSeconds(server.pid);
    return {
      nodes: n,
      mode,
      detection_p50_s: pct(detected, 50) / 1000,
      detection_p99_s: pct(detected, 99) / 1000,
      detections: `${detected.length}/${k}`,
      converged,
      rollout_s: rolloutMs / 1000,
      ceiling_s: ceilingMs / 1000,
      datum_over_ceiling: Math.round((rolloutMs / ceilingMs) * 100) / 100,
      convergence_p50_s: pct(perNode.filter((x) => x !== null), 50) / 1000,
      convergence_p99_s: pct(perNode.filter((x) => x !== null), 99) / 1000,
      verification_pass_s: verifyMs / 1000,
      events_per_steady_pass_p50: pct(steadyEvents, 50),
      events_per_steady_pass_max: Math.max(...steadyEvents),
      events_to_first_convergence_p50: pct(repairEvents, 50),
      worker_rss_mb: Math.round((await rss(worker.pid)) / 2 ** 20),
      agent_rss_mb: Math.round((await rss(agent.pid)) / 2 ** 20),
      server_cpu_s: cpu1 !== null && cpu0 !== null ? Math.round((cpu1 - cpu0) * 10) / 10 : null,
    };
  } finally {
    for (const p of procs.reverse()) if (p.exitCode === null) p.kill('SIGTERM');
    await sleep(2000);
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    await Promise.all(
      (await import('node:fs/promises')).readdir(path.join(dir, 'nodes')).then((ns) => Promise.all(ns.map((x) => stopServices(path.join(dir, 'nodes', x)).catch(() => undefined)))),
    ).catch(() => undefined);
    if (!values.keep) await rm(dir, { recursive: true, force: true });
  }
}

const results = [];
for (const n of sizes) {
  console.error(`bench: ${n} nodes, floor (plain loop, no Temporal) …`);
  const floor = await floorRollout(n);
  for (const mode of modes) {
    console.error(`bench: ${n} nodes, ${mode} …`);
    const r = await runSize(n, mode);
    results.push({ ...r, floor_s: floor.ms / 1000, datum_over_floor: Math.round((r.rollout_s / (floor.ms / 1000)) * 100) / 100 });
  }
}
const date = new Date().toISOString().slice(0, 10);
await mkdir(path.join(root, 'bench', 'results'), { recursive: true });
const out = path.join(root, 'bench', 'results', `${date}.json`);
await writeFile(out, `${JSON.stringify({ date: new Date().toISOString(), machine: { cpus: os.cpus().length, mem_gb: Math.round(os.totalmem() / 2 ** 30) }, results }, null, 2)}\n`);
const cols = Object.keys(results[0]);
console.log(`| ${cols.join(' | ')} |\n| ${cols.map(() => '---').join(' | ')} |\n${results.map((r) => `| ${cols.map((c) => r[c]).join(' | ')} |`).join('\n')}`);
console.error(`bench: wrote ${path.relative(root, out)}`);
process.exit(0);
