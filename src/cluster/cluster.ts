// A production-shaped Datum cluster on one machine: PostgreSQL it owns, the pinned Temporal
// server (all four roles in one process) on it, set up with the scripts docker-compose.yml runs,
// `datum worker` processes with their ledger in PostgreSQL, and one `datum agent` per node.
// `up` leaves it running and records every process in DATA/cluster.json; `down` (any process,
// any time later) stops every one of them and PostgreSQL, and leaves nothing running.

import { randomBytes } from 'node:crypto';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { stringify, parse as parseYaml } from 'yaml';
import { listFleetAgents, type FleetAgentFile } from '../agent/config';
import { stopServices } from '../agent/services';
import { projectRoot, temporalCliPath } from '../worker/paths';
import { ensureServerBinaries, type ServerBinaries } from './binaries';
import { ClusterError } from './errors';
import { OwnedPostgres } from './postgres';
import {
  alive,
  ensurePortFree,
  killProcess,
  logPath,
  logSize,
  startProcess,
  stopProcess,
  waitForLog,
  type ProcessRecord,
} from './processes';
import {
  checkSchemaVersions,
  datumLedgerUrl,
  registerSearchAttributes,
  renderServerConfig,
  serverPorts,
  setupDatabases,
  setupSchema,
  type Databases,
  type ServerPorts,
} from './temporal';

export interface ClusterOptions {
  /** Everything the cluster keeps: postgres/, temporal/, logs/, fleet/, nodes/, cluster.json. */
  dataDir: string;
  /** The frontend's gRPC port; the server's other ports follow it, PostgreSQL takes base + 10. */
  portBase?: number;
  /** How many `datum worker` processes (they share datum-control). */
  workers?: number;
  /** A fleet directory (desired/nodes, agents/, artifacts/); default: the bundled demo fleet, copied. */
  fleetDir?: string;
  /** History shards, fixed at the first start (compose: 128). */
  shards?: number;
  /** Serve Go's pprof on this local port (bench/ --profile takes the server's CPU profile there); off by default. */
  pprofPort?: number;
  log?: (line: string) => void;
}

interface State {
  version: 1;
  data_dir: string;
  port_base: number;
  address: string;
  namespace: string;
  fleet_dir: string;
  postgres: { dir: string; port: number };
  ledger_url: string;
  processes: ProcessRecord[];
  agent_roots: string[];
  started_at: string;
}

const NAMESPACE = 'default';
const DATUM_BIN = () => path.join(projectRoot(), 'bin', 'datum.js');
const STATE_FILE = 'cluster.json';

export class Cluster {
  private constructor(
    readonly dataDir: string,
    readonly ports: ServerPorts,
    readonly bins: ServerBinaries,
    readonly pg: OwnedPostgres,
    readonly databases: Databases,
    readonly fleetDir: string,
    private readonly log: (line: string) => void,
    private state: State,
  ) {}

  get address(): string {
    return `127.0.0.1:${this.ports.frontend}`;
  }

  get namespace(): string {
    return NAMESPACE;
  }

  get ledgerUrl(): string {
    return datumLedgerUrl(this.databases);
  }

  get processes(): readonly ProcessRecord[] {
    return this.state.processes;
  }

  /** The environment a `datum` command on this cluster needs. */
  get clientEnv(): NodeJS.ProcessEnv {
    return {
      TEMPORAL_ADDRESS: this.address,
      TEMPORAL_NAMESPACE: NAMESPACE,
      DATUM_LEDGER_URL: this.ledgerUrl,
      DATUM_FLEET: this.fleetDir,
    };
  }

  /**
   * Starts PostgreSQL, sets up the databases and schemas, starts the server, registers the search
   * attributes, then the workers and the agents. Anything that fails stops what was started.
   */
  static async up(options: ClusterOptions): Promise<Cluster> {
    const log = options.log ?? (() => undefined);
    const dataDir = path.resolve(options.dataDir);
    await refuseRunning(dataDir);
    const portBase = options.portBase ?? 7233;
    const ports = serverPorts(portBase);
    await checkPorts(ports, portBase + 10);
    const bins = await ensureServerBinaries({ log });
    await fs.mkdir(path.join(dataDir, 'logs'), { recursive: true });
    const databases = await databasesOf(dataDir, portBase + 10);
    const fleetDir = options.fleetDir ? path.resolve(options.fleetDir) : await prepareDemoFleet(dataDir);
    const pg = await OwnedPostgres.prepare({ dir: path.join(dataDir, 'postgres'), port: portBase + 10 }, log);
    const state = initialState(dataDir, portBase, fleetDir, databases, pg);
    const cluster = new Cluster(dataDir, ports, bins, pg, databases, fleetDir, log, state);
    try {
      await cluster.startStorage();
      await cluster.startServer(options.shards ?? 16, options.pprofPort);
      log('registering search attributes (deploy/temporal/register-search-attributes.sh)');
      await registerSearchAttributes(projectRoot(), temporalCliPath(), cluster.address, NAMESPACE);
      for (let i = 1; i <= (options.workers ?? 1); i++) await cluster.startWorker();
      for (const agent of await listFleetAgents(fleetDir)) await cluster.startAgent(agent);
      return cluster;
    } catch (error) {
      await cluster.down().catch(() => undefined);
      throw error;
    }
  }

  /** The cluster recorded in DATA/cluster.json, for `down` and `status` from another process. */
  static async attach(dataDir: string, log: (line: string) => void = () => undefined): Promise<Cluster | null> {
    const state = await readState(path.resolve(dataDir));
    if (!state) return null;
    const bins = await ensureServerBinaries({ log });
    const pg = await OwnedPostgres.prepare(state.postgres, log);
    const databases = await databasesOf(state.data_dir, state.postgres.port);
    return new Cluster(state.data_dir, serverPorts(state.port_base), bins, pg, databases, state.fleet_dir, log, state);
  }

  private async startStorage(): Promise<void> {
    this.log(`starting PostgreSQL on 127.0.0.1:${this.pg.port} (${this.pg.dataDir})`);
    await this.pg.start();
    await this.save();
    this.log('roles and databases (deploy/postgres/setup.sh)');
    await setupDatabases(projectRoot(), this.pg.adminEnv, this.pg.bin, this.databases);
    this.log("Temporal's schema (deploy/temporal/setup-schema.sh)");
    await setupSchema(projectRoot(), this.bins, this.databases);
  }

  private async startServer(shards: number, pprofPort?: number): Promise<void> {
    const configDir = path.join(this.dataDir, 'temporal');
    await fs.mkdir(configDir, { recursive: true });
    const dynamicConfig = path.join(projectRoot(), 'deploy', 'temporal', 'dynamicconfig', 'production.yaml');
    const config = await renderServerConfig({
      bins: this.bins,
      ports: this.ports,
      databases: this.databases,
      dynamicConfig,
      shards,
      logLevel: 'warn',
      ...(pprofPort ? { pprofPort } : {}),
    });
    await fs.writeFile(path.join(configDir, 'cluster.yaml'), config, { mode: 0o600 });
    await this.launchServer();
  }

  /** (Re)starts the server process on the written config and waits until its frontend serves. */
  async launchServer(): Promise<void> {
    await checkSchemaVersions(this.bins, this.databases);
    const configDir = path.join(this.dataDir, 'temporal');
    const command = [this.bins.server, '--root', configDir, '--config', '.', '--env', 'cluster', '--allow-no-auth', 'start'];
    this.log(`starting Temporal server ${this.bins.version} on ${this.address}`);
    const p = startProcess('temporal-server', command, logPath(this.dataDir, 'temporal-server'), process.env, configDir);
    await this.track(p);
    await waitForFrontend(this.address, p, 120_000);
  }

  /** A `datum worker` process; `datum` names another release's bin/datum.js (the upgrade test runs the previous one). */
  async startWorker(datum = DATUM_BIN()): Promise<ProcessRecord> {
    const n = this.state.processes.filter((p) => p.name.startsWith('worker-')).length + 1;
    const name = `worker-${n}`;
    const command = [process.execPath, datum, 'worker', '--fleet', this.fleetDir, '--data', path.join(this.dataDir, name)];
    this.log(`starting ${name} (datum worker, ledger in PostgreSQL)`);
    return await this.launch(name, command, 'datum worker: task queue');
  }

  async startAgent(agent: FleetAgentFile): Promise<ProcessRecord> {
    return await this.startAgents(`agent-${agent.node}`, [agent.file]);
  }

  /** One `datum agent` process serving several agent.yaml files (as one host with several nodes would). */
  async startAgents(name: string, files: string[], datum = DATUM_BIN()): Promise<ProcessRecord> {
    const command = [process.execPath, datum, 'agent', ...files.flatMap((f) => ['--config', f])];
    for (const file of files) {
      const root = (parseYaml(await fs.readFile(file, 'utf8')) as { root?: string }).root;
      if (root && !this.state.agent_roots.includes(root)) this.state.agent_roots.push(root);
    }
    return await this.launch(name, command, 'datum agent: serving');
  }

  private async launch(name: string, command: string[], ready: string): Promise<ProcessRecord> {
    const log = logPath(this.dataDir, name);
    const from = await logSize(log);
    const env = { ...process.env, ...this.clientEnv };
    const p = startProcess(name, command, log, env, this.dataDir);
    await this.track(p);
    await waitForLog(p, ready, 60_000, from);
    return p;
  }

  private async track(p: ProcessRecord): Promise<void> {
    this.state.processes = [...this.state.processes.filter((q) => q.name !== p.name), p];
    await this.save();
  }

  process(name: string): ProcessRecord {
    const p = this.state.processes.find((q) => q.name === name);
    if (!p)
      throw new ClusterError(
        `this cluster runs no process "${name}"`,
        `one of: ${this.state.processes.map((q) => q.name).join(', ')}`,
      );
    return p;
  }

  /** kill -9 of one process (the fault tests' crash). */
  async kill(name: string): Promise<void> {
    await killProcess(this.process(name));
  }

  /** A crash and a restart of the Temporal server. */
  async crashServer(): Promise<void> {
    await this.kill('temporal-server');
    await this.launchServer();
  }

  async restartWorker(name: string): Promise<void> {
    const p = this.process(name);
    await stopProcess(p);
    await this.launch(name, p.command, 'datum worker: task queue');
  }

  /** Stops one process gracefully (SIGTERM, then SIGKILL after the grace) and forgets it. */
  async stop(name: string): Promise<void> {
    await stopProcess(this.process(name));
    this.state.processes = this.state.processes.filter((p) => p.name !== name);
    await this.save();
  }

  /** Stops every process it started (agents and workers first, then the server), their node services, and PostgreSQL. */
  async down(): Promise<string[]> {
    const said: string[] = [];
    const order = (p: ProcessRecord) => (p.name.startsWith('agent-') ? 0 : p.name.startsWith('worker-') ? 1 : 2);
    for (const group of [0, 1, 2]) {
      const stopping = this.state.processes.filter((p) => order(p) === group);
      const results = await Promise.all(stopping.map(async (p) => `${p.name} (pid ${p.pid}): ${await stopProcess(p)}`));
      said.push(...results);
      if (group === 0) said.push(...(await this.stopNodeServices()));
    }
    await this.pg.stop('fast');
    said.push(`postgres (port ${this.pg.port}): stopped`);
    this.state.processes = [];
    await fs.rm(path.join(this.dataDir, STATE_FILE), { force: true });
    return said;
  }

  private async stopNodeServices(): Promise<string[]> {
    const said: string[] = [];
    for (const root of this.state.agent_roots) {
      if (!existsSync(root)) continue;
      const stopped = await stopServices(root).catch(() => []);
      said.push(...stopped.map((s) => `service ${s.key} of ${root} (pid ${s.pid}): ${s.result}`));
    }
    return said;
  }

  /** Each recorded process and whether it still runs. */
  status(): Array<{ name: string; pid: number; running: boolean; log: string }> {
    const rows = this.state.processes.map((p) => ({ name: p.name, pid: p.pid, running: alive(p.pid), log: p.log }));
    return [...rows, { name: 'postgres', pid: this.pg.pid() ?? 0, running: this.pg.running(), log: this.pg.logFile }];
  }

  private async save(): Promise<void> {
    const file = path.join(this.dataDir, STATE_FILE);
    await fs.writeFile(`${file}.tmp`, `${JSON.stringify(this.state, null, 2)}\n`, { mode: 0o600 });
    await fs.rename(`${file}.tmp`, file);
  }
}

function initialState(dataDir: string, portBase: number, fleetDir: string, databases: Databases, pg: OwnedPostgres): State {
  return {
    version: 1,
    data_dir: dataDir,
    port_base: portBase,
    address: `127.0.0.1:${portBase}`,
    namespace: NAMESPACE,
    fleet_dir: fleetDir,
    postgres: { dir: pg.dir, port: pg.port },
    ledger_url: datumLedgerUrl(databases),
    processes: [],
    agent_roots: [],
    started_at: new Date().toISOString(),
  };
}

async function readState(dataDir: string): Promise<State | null> {
  const file = path.join(dataDir, STATE_FILE);
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as State;
  } catch (error) {
    throw new ClusterError(
      `${file} is not readable (${(error as Error).message})`,
      `stop the processes it lists by hand, then remove it`,
    );
  }
}

async function refuseRunning(dataDir: string): Promise<void> {
  const state = await readState(dataDir);
  const running = state?.processes.filter((p) => alive(p.pid)) ?? [];
  if (running.length > 0)
    throw new ClusterError(
      `a cluster already runs from ${dataDir} (${running.map((p) => `${p.name} pid ${p.pid}`).join(', ')})`,
      `\`npm run cluster -- down --data ${dataDir}\` first, or use another --data`,
    );
}

async function checkPorts(ports: ServerPorts, pgPort: number): Promise<void> {
  const wanted: Array<[number, string]> = [
    [ports.frontend, 'Temporal frontend gRPC'],
    [ports.http, 'Temporal frontend HTTP'],
    [ports.history, 'Temporal history'],
    [ports.matching, 'Temporal matching'],
    [ports.worker, 'Temporal worker service'],
    ...Object.entries(ports.membership).map(([s, p]): [number, string] => [p, `Temporal ${s} membership`]),
    [ports.metrics, 'Temporal metrics'],
    [pgPort, 'PostgreSQL'],
  ];
  for (const [port, what] of wanted) await ensurePortFree(port, what);
}

/** The two application roles' passwords, generated at the first `up` and kept in DATA/secrets.json (0600). */
async function databasesOf(dataDir: string, port: number): Promise<Databases> {
  const file = path.join(dataDir, 'secrets.json');
  if (!existsSync(file)) {
    await fs.mkdir(dataDir, { recursive: true });
    const secrets = { temporal: randomBytes(18).toString('base64url'), datum: randomBytes(18).toString('base64url') };
    await fs.writeFile(file, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 });
  }
  const secrets = JSON.parse(await fs.readFile(file, 'utf8')) as { temporal: string; datum: string };
  return {
    host: '127.0.0.1',
    port,
    temporal: { user: 'temporal', password: secrets.temporal, db: 'temporal', visibility: 'temporal_visibility' },
    datum: { user: 'datum', password: secrets.datum, db: 'datum' },
  };
}

/** The bundled demo fleet (examples/fleet) copied to DATA/fleet, its nodes rooted in DATA/nodes. */
async function prepareDemoFleet(dataDir: string): Promise<string> {
  const fleetDir = path.join(dataDir, 'fleet');
  if (existsSync(path.join(fleetDir, 'desired', 'nodes'))) return fleetDir;
  await fs.cp(path.join(projectRoot(), 'examples', 'fleet'), fleetDir, { recursive: true });
  for (const { file } of await listFleetAgents(fleetDir)) {
    const doc = parseYaml(await fs.readFile(file, 'utf8')) as { node: string; root: string };
    doc.root = path.join(dataDir, 'nodes', doc.node);
    await fs.writeFile(file, `# Rooted by npm run cluster under its data dir.\n${stringify(doc)}`);
    await fs.mkdir(doc.root, { recursive: true });
  }
  // As `datum dev` does: N-24's maintenance flag is the operator's (the seed's worked example).
  const flag = path.join(dataDir, 'nodes', 'N-24', 'flags', 'maintenance.json');
  await fs.mkdir(path.dirname(flag), { recursive: true });
  await fs.writeFile(flag, 'true\n');
  return fleetDir;
}

/** Until the frontend answers GetSystemInfo; fails early with the server's log when it exits. */
async function waitForFrontend(address: string, p: ProcessRecord, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (!alive(p.pid)) break;
    try {
      const connection = await Connection.connect({ address, connectTimeout: 2_000 });
      try {
        await connection.workflowService.getSystemInfo({});
        return;
      } finally {
        await connection.close();
      }
    } catch (error) {
      last = (error as Error).message;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  const log = existsSync(p.log) ? serverFailure(await fs.readFile(p.log, 'utf8')) : '';
  throw new ClusterError(
    alive(p.pid)
      ? `the Temporal server did not serve on ${address} within ${timeoutMs / 1000} s (${last}):\n${log}`
      : `the Temporal server exited during start-up:\n${log}`,
    `read ${p.log}`,
  );
}

/** The server's fatal lines (its JSON log), else its last lines: why it did not come up. */
export function serverFailure(log: string): string {
  const lines = log.trim().split('\n');
  const fatal = lines.flatMap((line) => {
    try {
      const entry = JSON.parse(line) as { level?: string; msg?: string; error?: string };
      return entry.level === 'fatal' ? [`${entry.msg ?? ''}${entry.error ? `: ${entry.error}` : ''}`] : [];
    } catch {
      return [];
    }
  });
  return (fatal.length > 0 ? fatal : lines.slice(-15)).join('\n');
}
