#!/usr/bin/env node
// The fleet workflow's cost (issue 32, must-show 3). For each fleet size, on the dev server: a real
// controller (`datum worker`, which keeps the fleet workflow) and one real `datum agent` serving N
// virtual nodes (the fleet of bench/run.mjs, watch mode), a rollout of generation 1 to all of them,
// and then, with every loop settled:
//   - a steady window (--window s) with the fleet workflow looking every --interval s: the fleet
//     workflow's history events per look (read from its history, every run of it the window
//     touched), and the server's, the controller's and the agent's cores over the window;
//   - a burst of --burst looks asked back to back (the `look` signal, each awaited through the
//     memo's looked_at, which describe reads from the server alone): the server's and the
//     controller's CPU seconds per look above the steady window's rate, and each look's wall time.
// Per look × looks per interval gives what the view costs at the default interval (60 s).
// Writes bench/results/<date>-fleet-view.json and prints the table.
//
//   node bench/fleet-view.mjs [--nodes 100,1000] [--interval 15] [--window 300] [--burst 20] [--repeat 1] [--keep]
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { benchFleet } from './fleet.mjs';
import { benchStart, fail } from './provenance.mjs';
import { pollerOn, start, startServer, treeCpuSeconds } from './servers.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const dist = (p) => path.join(root, 'dist', 'src', p);
const { Client } = require('@temporalio/client');
const contract = require(dist('contract/index.js'));

const USAGE =
  'usage: node bench/fleet-view.mjs [--nodes 100,1000] [--interval 15] [--window 300] [--burst 20] [--repeat 1] [--keep] [--beside-others]';
const { values, whole, measured, others } = await benchStart(USAGE, {
  nodes: { type: 'string', default: '1000' },
  interval: { type: 'string', default: '15' },
  window: { type: 'string', default: '300' },
  burst: { type: 'string', default: '20' },
  repeat: { type: 'string', default: '1' },
  keep: { type: 'boolean', default: false },
});
const sizes = values.nodes.split(',').map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 1))
  fail(`--nodes ${values.nodes} must be a comma-separated list of node counts, such as --nodes 100,1000\n${USAGE}`);
const interval = whole('interval', 1);
const windowS = whole('window', interval);
const burst = whole('burst', 1);
const repeat = whole('repeat', 1);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (x, digits = 3) => (x === null || Number.isNaN(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits);
const median = (xs) => {
  const s = xs.filter((x) => x !== null).sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : null;
};
const tsMs = (t) => Number(t.seconds) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);

async function cpu(pids) {
  const out = {};
  for (const [k, pid] of Object.entries(pids)) out[k] = await treeCpuSeconds(pid);
  return out;
}

/** The fleet workflow's memo: when it last looked. */
async function lookedAt(client) {
  const d = await client.workflow.getHandle(contract.FLEET_WORKFLOW_ID).describe();
  return d.memo?.[contract.MEMO_LOOKED_AT] ?? null;
}

/** The fleet workflow's history events in [from, to], over every run of it that was open then, and its looks (markers) among them. */
async function fleetEvents(client, from, to) {
  let events = 0;
  let looks = 0;
  const runs = [];
  for await (const w of client.workflow.list({ query: `WorkflowId = '${contract.FLEET_WORKFLOW_ID}'` })) {
    const closed = w.closeTime ? w.closeTime.getTime() : Infinity;
    if (closed < from || w.startTime.getTime() > to) continue;
    runs.push(w.runId);
    const history = await client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
    for (const e of history.events ?? []) {
      const at = tsMs(e.eventTime);
      if (at < from || at > to) continue;
      events++;
      if (e.markerRecordedEventAttributes) looks++;
    }
  }
  return { events, looks, runs: runs.length };
}

async function row(n) {
  const dir = await mkdtemp(path.join(os.tmpdir(), `datum-bench-fleet-view-${n}-`));
  const logs = path.join(dir, 'logs');
  await mkdir(logs);
  const say = (m) => console.error(`bench: fleet view, ${n} nodes: ${m}`);
  const procs = [];
  let server = null;
  const load0 = os.loadavg()[0];
  try {
    // bench/run.mjs's watch-mode fleet: loops at rest wait for the watch, with a 10 min resync.
    const nodes = await benchFleet(dir, n, true, 0);
    // The agent's register of roots in this run's directory, as bench/mixed.mjs keeps it: a run
    // stopped midway leaves nothing in the host's /run/datum for the next to read.
    const env = { ...process.env, DATUM_RUNTIME_DIR: path.join(dir, 'run') };
    server = await startServer('dev', dir, logs, { say });
    const { address, connection } = server;
    const client = new Client({ connection });
    const datum = path.join(root, 'bin', 'datum.js');
    const worker = start(
      'worker',
      process.execPath,
      [datum, 'worker', '--fleet', dir, '--data', dir, '--address', address],
      logs,
      { ...env, ...server.workerEnv, DATUM_FLEET_INTERVAL: `${interval}s` },
    );
    const configs = nodes.flatMap((node) => ['--config', path.join(dir, 'agents', `${node}.yaml`)]);
    const agent = start('agent', process.execPath, [datum, 'agent', '--address', address, ...configs], logs, env);
    procs.push(worker, agent);
    await pollerOn(connection, contract.CONTROL_TASK_QUEUE, 1, 'the controller');
    await pollerOn(connection, contract.agentTaskQueue(nodes[n - 1]), 2, 'the agent');
    const pids = { server: server.pids.server, worker: worker.pid, agent: agent.pid };

    say('rollout …');
    const t0 = Date.now();
    const result = await client.workflow.execute(contract.WORKFLOW_TYPES.rollout, {
      taskQueue: contract.CONTROL_TASK_QUEUE,
      workflowId: contract.rolloutWorkflowId(1, nodes),
      args: [{ generation: 1, nodes }],
    });
    const converged = result.nodes.filter((x) => x.status === 'CONVERGED').length;
    say(`rollout ${(Date.now() - t0) / 1000} s, ${converged}/${n} CONVERGED; settling 30 s, then a ${windowS} s window …`);
    await sleep(30_000);

    // The steady window: the fleet workflow looks every interval, the loops rest.
    const [w0, c0] = [Date.now(), await cpu(pids)];
    await sleep(windowS * 1000);
    const [w1, c1] = [Date.now(), await cpu(pids)];
    const seconds = (w1 - w0) / 1000;
    const steady = Object.fromEntries(Object.keys(pids).map((k) => [k, (c1[k] - c0[k]) / seconds]));
    const history = await fleetEvents(client, w0, w1);
    say(`window: ${history.looks} looks, ${history.events} events; burst of ${burst} looks …`);

    // The burst: looks asked one after another, each awaited.
    const handle = client.workflow.getHandle(contract.FLEET_WORKFLOW_ID);
    const walls = [];
    const [b0, cb0] = [Date.now(), await cpu(pids)];
    for (let i = 0; i < burst; i++) {
      const before = await lookedAt(client);
      const asked = Date.now();
      await handle.signal(contract.fleetLookSignal);
      for (let tries = 0; (await lookedAt(client)) === before; tries++) {
        if (tries > 1200) throw new Error('the fleet workflow did not look within 2 min of the signal');
        await sleep(100);
      }
      walls.push(Date.now() - asked);
    }
    const [b1, cb1] = [Date.now(), await cpu(pids)];
    const burstS = (b1 - b0) / 1000;
    const perLook = (k) => (cb1[k] - cb0[k] - steady[k] * burstS) / burst;
    const figures = {
      nodes: n,
      converged,
      interval_s: interval,
      window_s: round(seconds, 1),
      looks_in_window: history.looks,
      fleet_runs_in_window: history.runs,
      events_per_look: history.looks ? round(history.events / history.looks, 2) : null,
      events_per_hour_at_60s: history.looks ? Math.round((history.events / history.looks) * 60) : null,
      steady_cores: { server: round(steady.server), worker: round(steady.worker), agent: round(steady.agent) },
      look_wall_ms: { median: median(walls), max: Math.max(...walls) },
      server_cpu_s_per_look: round(perLook('server')),
      worker_cpu_s_per_look: round(perLook('worker')),
      server_cores_at_60s: round(perLook('server') / 60, 4),
      load_at_start: round(load0, 2),
    };
    say(JSON.stringify(figures));
    return figures;
  } finally {
    for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
    await Promise.race([Promise.all(procs.map((p) => p.exited)), sleep(5000)]);
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    if (server) await server.stop();
    if (!values.keep) await rm(dir, { recursive: true, force: true });
    else say(`kept ${dir}`);
  }
}

const date = new Date().toISOString().slice(0, 10);
const out = path.join(root, 'bench', 'results', `${date}-fleet-view.json`);
const rows = [];
// Written after every run: a later run that fails keeps the finished ones.
const save = () =>
  writeFile(
    out,
    `${JSON.stringify({ measured, beside_others: others, interval_s: interval, window_s: windowS, burst, rows }, null, 2)}\n`,
  );
for (const n of sizes) {
  const runs = [];
  rows.push({ nodes: n, runs });
  for (let i = 0; i < repeat; i++) {
    runs.push(await row(n));
    await save();
  }
}
const pick = (runs, f) => median(runs.map(f));
console.log(
  '| nodes | events per look | looks in window | look wall p50 / max ms | server CPU s per look | controller CPU s per look | server cores at 60 s | steady cores: server / controller / agent |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const { nodes, runs } of rows)
  console.log(
    `| ${nodes} | ${pick(runs, (r) => r.events_per_look)} | ${pick(runs, (r) => r.looks_in_window)} | ${pick(runs, (r) => r.look_wall_ms.median)} / ${pick(runs, (r) => r.look_wall_ms.max)} | ${pick(runs, (r) => r.server_cpu_s_per_look)} | ${pick(runs, (r) => r.worker_cpu_s_per_look)} | ${pick(runs, (r) => r.server_cores_at_60s)} | ${pick(runs, (r) => r.steady_cores.server)} / ${pick(runs, (r) => r.steady_cores.worker)} / ${pick(runs, (r) => r.steady_cores.agent)} |`,
  );
console.log(`\nwritten: ${path.relative(root, out)}`);
