// The two Temporal servers the bench runs the same matrix on:
//   - dev: `temporal server start-dev` (one process on SQLite), as `datum dev` runs it;
//   - cluster: the production-shaped cluster of `npm run cluster` (src/cluster): PostgreSQL it
//     owns, the pinned Temporal server on it set up by the deploy/ scripts docker-compose.yml
//     runs, with no worker or agent of its own (the bench starts those, as on dev) and the
//     controller's ledger in the cluster's PostgreSQL.
// Each start returns the address, the Prometheus port, the processes whose CPU and RSS the bench
// reads, the environment a `datum worker` on it needs, and a stop that leaves nothing running.
import { spawn } from 'node:child_process';
import { chmod, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const dist = (p) => path.join(root, 'dist', 'src', p);
const { Connection } = require('@temporalio/client');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export const SERVERS = ['dev', 'dev-plain', 'cluster'];

/** A child process whose output goes to `<logDir>/<name>.log` when it exits. */
export function start(name, command, args, logDir, env = process.env) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const chunks = [];
  child.stdout.on('data', (d) => chunks.push(d));
  child.stderr.on('data', (d) => chunks.push(d));
  child.output = () => Buffer.concat(chunks).toString('utf8');
  child.exited = new Promise((resolve) => child.on('exit', resolve)).then(() =>
    writeFile(path.join(logDir, `${name}.log`), Buffer.concat(chunks)).catch(() => undefined),
  );
  return child;
}

async function connected(address) {
  for (let i = 0; ; i++) {
    try {
      const connection = await Connection.connect({ address });
      await connection.workflowService.getSystemInfo({});
      return connection;
    } catch (e) {
      if (i > 100) throw e;
      await sleep(300);
    }
  }
}

/**
 * `temporal server start-dev` on a fresh SQLite file, with `datum dev`'s flags; `plain` keeps only
 * the search attributes, so the server runs on its default limits, as a new user's would.
 */
async function startDev(dir, logs, { plain = false } = {}) {
  const { temporalCliPath } = require(dist('worker/paths.js'));
  const { devServerFlags } = require(dist('worker/dev-server.js'));
  const { freePort } = require(dist('agent/services/launch.js'));
  const [port, metricsPort] = [await freePort(), await freePort()];
  const address = `127.0.0.1:${port}`;
  const args = ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port)];
  args.push('--metrics-port', String(metricsPort), '--db-filename', path.join(dir, 'temporal.sqlite'));
  // devServerFlags() is flag/value pairs.
  const pairs = devServerFlags().flatMap((flag, i, all) => (i % 2 === 0 ? [[flag, all[i + 1]]] : []));
  const kept = pairs.filter(([flag]) => !plain || flag !== '--dynamic-config-value').flat();
  const server = start('temporal', temporalCliPath(), [...args, '--log-level', 'error', ...kept], logs);
  const connection = await connected(address).catch((e) => {
    server.kill('SIGKILL');
    throw e;
  });
  return {
    kind: plain ? 'dev-plain' : 'dev',
    address,
    connection,
    metricsPort,
    pids: { server: server.pid },
    workerEnv: {},
    describe: plain ? 'temporal server start-dev (SQLite), default dynamic config' : 'temporal server start-dev (SQLite)',
    async stop() {
      await connection.close().catch(() => undefined);
      if (server.exitCode === null) server.kill('SIGTERM');
      await Promise.race([server.exited, sleep(5000)]);
      if (server.exitCode === null) server.kill('SIGKILL');
    },
  };
}

/**
 * `Cluster.up` with no worker and an empty fleet of its own, on a random port base below 32757
 * (Temporal keeps membership ports in a smallint), retried when a port is taken.
 */
async function startCluster(dir, logs, { shards, say }) {
  const { Cluster } = require(dist('cluster/cluster.js'));
  const { ClusterError } = require(dist('cluster/errors.js'));
  // PostgreSQL runs as the postgres user when the bench runs as root: it must reach its directory.
  await chmod(dir, 0o755);
  const fleetDir = path.join(dir, 'cluster-fleet');
  await mkdir(path.join(fleetDir, 'agents'), { recursive: true });
  let cluster;
  let pprofPort = null;
  for (let attempt = 1; !cluster; attempt++) {
    const portBase = 20_000 + 20 * Math.floor(Math.random() * 600);
    // Go's pprof on a port of this base's block the cluster leaves free (it takes base to base + 10):
    // the row takes the server's CPU profile over its rollout (sampling at 100 Hz costs little).
    pprofPort = portBase + 11;
    try {
      cluster = await Cluster.up({
        dataDir: path.join(dir, 'cluster'),
        fleetDir,
        workers: 0,
        portBase,
        shards,
        log: say,
        pprofPort,
      });
    } catch (error) {
      if (!(attempt < 5 && error instanceof ClusterError && /is in use/.test(error.problem))) throw error;
    }
  }
  const connection = await connected(cluster.address);
  const serverPid = cluster.process('temporal-server').pid;
  return {
    kind: 'cluster',
    address: cluster.address,
    connection,
    metricsPort: cluster.ports.metrics,
    pprofPort,
    // The superuser's connection (PGHOST, PGPORT, …): the row samples pg_stat_activity with it.
    postgresEnv: cluster.pg.adminEnv,
    pids: { server: serverPid, postgres: cluster.pg.pid() },
    workerEnv: { DATUM_LEDGER_URL: cluster.ledgerUrl },
    describe: `Temporal ${cluster.bins.version} on PostgreSQL (${shards} shards)`,
    async stop() {
      await connection.close().catch(() => undefined);
      // The cluster's own logs go with the rest under --keep.
      await cluster.down();
      await keepLogs(path.join(dir, 'cluster', 'logs'), logs);
    },
  };
}

async function keepLogs(from, to) {
  for (const f of await readdir(from).catch(() => [])) {
    const text = await readFile(path.join(from, f)).catch(() => null);
    if (text) await writeFile(path.join(to, `cluster-${f}`), text);
  }
}

/** Starts the named server for one row of the matrix. */
export function startServer(kind, dir, logs, options) {
  if (kind === 'dev') return startDev(dir, logs);
  if (kind === 'dev-plain') return startDev(dir, logs, { plain: true });
  if (kind === 'cluster') return startCluster(dir, logs, options);
  throw new Error(`unknown server ${kind}: one of ${SERVERS.join(', ')}`);
}

/** A process's parent and CPU ticks from /proc: its own (utime + stime) and its reaped children's. */
async function procStat(pid) {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  return {
    pid: Number(pid),
    ppid: Number(fields[1]),
    own: Number(fields[11]) + Number(fields[12]),
    reaped: Number(fields[13]) + Number(fields[14]),
  };
}

/** The living children of `pid` (PostgreSQL's backends are the postmaster's), each with its stat. */
export async function childrenOf(pid) {
  const stats = await Promise.all(
    (await readdir('/proc')).filter((p) => /^\d+$/.test(p) && Number(p) !== pid).map((p) => procStat(p).catch(() => null)),
  );
  return stats.filter((s) => s !== null && s.ppid === pid);
}

/** utime + stime of `pid`, and of its children (living, and reaped). */
export async function treeCpuSeconds(pid) {
  try {
    const top = await procStat(pid);
    const children = await childrenOf(pid);
    return (top.own + top.reaped + children.reduce((sum, c) => sum + c.own, 0)) / 100;
  } catch {
    return null;
  }
}

/** Waits until `taskQueue` has a poller (the worker or agent serving it is up). */
export async function pollerOn(connection, taskQueue, type, what) {
  for (let i = 0; i < 600; i++) {
    const r = await connection.workflowService.describeTaskQueue({
      namespace: 'default',
      taskQueue: { name: taskQueue },
      taskQueueType: type,
    });
    if (r.pollers.length > 0) return;
    await sleep(500);
  }
  throw new Error(`${what} did not poll ${taskQueue} within 5 minutes; see its log under --keep`);
}
