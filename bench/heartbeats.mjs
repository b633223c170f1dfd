// Heartbeats per watched loop-hour: N virtual nodes with watch on, converged on a fresh dev
// server by a rollout, then left alone for --minutes while the server's frontend counts the
// RecordActivityTaskHeartbeat requests it takes (each one a write of the workflow's state).
// Nothing changes on the nodes meanwhile, so every beat is a watch's (or a late observe's).
//
//   node scripts/build.mjs && node bench/heartbeats.mjs --nodes 20 --minutes 10
//
// Prints one JSON line: the beats counted, the loops watched, and beats per watched loop-hour.
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { writeFleet } from './fleet.mjs';
import { pollerOn, start, startServer } from './servers.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const contract = require(path.join(root, 'dist', 'src', 'contract', 'index.js'));
const { Client } = require('@temporalio/client');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const { values } = parseArgs({
  options: { nodes: { type: 'string', default: '20' }, minutes: { type: 'string', default: '10' }, keep: { type: 'boolean' } },
});
const n = Number(values.nodes);
const minutes = Number(values.minutes);
if (!(n > 0 && minutes > 0)) throw new Error('--nodes and --minutes take positive numbers, e.g. --nodes 20 --minutes 10');

/** The frontend's count of RecordActivityTaskHeartbeat requests so far. */
async function heartbeatRequests(metricsPort) {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^service_requests\{([^}]*)\} ([0-9.e+-]+)$/.exec(line);
    if (m && m[1].includes('operation="RecordActivityTaskHeartbeat"') && m[1].includes('service_name="frontend"'))
      total += Number(m[2]);
  }
  return total;
}

/** How many of the loops have a watch running now. */
async function watching(client, nodes) {
  const running = await Promise.all(
    nodes.map(async (node) => {
      const d = await client.workflow.getHandle(contract.reconcileWorkflowId(node, 1)).describe();
      return (d.raw.pendingActivities ?? []).some((a) => a.activityType?.name === 'watch');
    }),
  );
  return running.filter(Boolean).length;
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'datum-heartbeats-'));
const logs = path.join(dir, 'logs');
await mkdir(logs);
const nodes = Array.from({ length: n }, (_, i) => `H-${String(i + 1).padStart(4, '0')}`);
const policy = { resync_interval: '10m', node_timeout: '60s', observation_ttl: '120s', conflict_window: '0s', watch: true };
await writeFleet(dir, nodes, { policy });
const server = await startServer('dev', dir, logs);
const procs = [];
try {
  const { address, connection, metricsPort } = server;
  const datum = path.join(root, 'bin', 'datum.js');
  procs.push(start('worker', process.execPath, [datum, 'worker', '--fleet', dir, '--data', dir, '--address', address], logs));
  const configs = nodes.flatMap((node) => ['--config', path.join(dir, 'agents', `${node}.yaml`)]);
  procs.push(start('agent', process.execPath, [datum, 'agent', '--address', address, ...configs], logs));
  await pollerOn(connection, contract.CONTROL_TASK_QUEUE, 1, 'the controller');
  await pollerOn(connection, contract.agentTaskQueue(nodes[n - 1]), 2, 'the agent');
  const client = new Client({ connection });
  const result = await client.workflow.execute(contract.WORKFLOW_TYPES.rollout, {
    taskQueue: contract.CONTROL_TASK_QUEUE,
    workflowId: contract.rolloutWorkflowId(1, nodes),
    args: [{ generation: 1, nodes }],
  });
  const converged = result.nodes.filter((x) => x.status === 'CONVERGED').length;
  // Every loop's first watch started: from here on, only watches run.
  while ((await watching(client, nodes)) < n) await sleep(1000);
  const before = await heartbeatRequests(metricsPort);
  const t0 = Date.now();
  await sleep(minutes * 60_000);
  const beats = (await heartbeatRequests(metricsPort)) - before;
  const hours = (Date.now() - t0) / 3_600_000;
  const watched = await watching(client, nodes);
  const perLoopHour = Math.round((beats / n / hours) * 10) / 10;
  console.log(
    JSON.stringify({
      nodes: n,
      converged,
      watched_at_end: watched,
      minutes,
      heartbeats: beats,
      per_watched_loop_hour: perLoopHour,
    }),
  );
} finally {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
  await Promise.all(procs.map((p) => Promise.race([p.exited, sleep(10_000)])));
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
  await server.stop();
  if (values.keep) console.error(`bench: kept ${dir}`);
  else await rm(dir, { recursive: true, force: true });
}
