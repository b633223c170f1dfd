// A production-shaped Datum cluster on one machine: PostgreSQL it owns, the pinned Temporal
// server (all four roles in one process) on it, set up with the scripts docker-compose.yml runs,
// `datum worker` processes with their ledger in PostgreSQL, and one `datum agent` per node.
// `up` starts what is missing or dead and leaves what runs, as `docker compose up -d` does, and
// records every process in DATA/cluster.json; `down` (any process, any time later) stops every
// one of them and PostgreSQL, and leaves nothing running (and the record, for the next `up`).

import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { listFleetAgents, type FleetAgentFile } from '../agent/config';
import { stopServices } from '../agent/services';
import { prepareDemoFleet } from '../worker/demo-fleet';
import { projectRoot, temporalCliPath } from '../worker/paths';
import { ensureServerBinaries, serverBinaries, type ServerBinaries } from './binaries';
import { ClusterError } from './errors';
import { OwnedPostgres, postmasterPid } from './postgres';
import {
  ensurePortFree,
  killProcess,
  logPath,
  logSize,
  runs,
  startProcess,
  stopProcess,
  waitForLog,
  type ProcessRecord,
} from './processes';
import {
  configsOf,
  databasesOf,
  initialState,
  readState,
  recordedShards,
  saveState,
  settle,
  writeEnvFile,
  type State,
} from './state';
import {
  checkSchemaVersions,
  datumLedgerUrl,
  registerSearchAttributes,
  renderServerConfig,
  serverPorts,
  setupDatabases,
  setupSchema,
  waitForFrontend,
  type Databases,
  type ServerPorts,
} from './temporal';

export interface ClusterOptions {
  /** Everything the cluster keeps: postgres/, temporal/, logs/, fleet/, nodes/, cluster.json, cluster.env. */
  dataDir: string;
  /** The frontend's gRPC port; the server's other ports follow it, PostgreSQL takes base + 10. Default: the running cluster's, else 7233. */
  portBase?: number;
  /** How many `datum worker` processes (they share datum-control); `up` adds missing ones and stops none. */
  workers?: number;
  /** A fleet directory (desired/nodes, agents/, artifacts/); default: the running cluster's, else the bundled demo fleet, copied. */
  fleetDir?: string;
  /** History shards, fixed at the first start (compose: 128; default 16). */
  shards?: number;
  /** Serve Go's pprof on this local port (bench/ --profile takes the server's CPU profile there); off by default. */
  pprofPort?: number;
  log?: (line: string) => void;
}

/** What `up` did with one component: found it running and left it, started it, or started it again after it died. */
export interface UpResult {
  name: string;
  pid: number;
  did: 'running' | 'started' | 'restarted';
  /** The recorded pid that no longer ran, for `restarted`. */
  was?: number;
}

const NAMESPACE = 'default';
const DATUM_BIN = () => path.join(projectRoot(), 'bin', 'datum.js');
const SERVER = 'temporal-server';
const WORKER_READY = 'datum worker: task queue';
const AGENT_READY = 'datum agent: serving';
// A worker bundles the workflow code before it serves: on a loaded two-core machine that took over 60 s.
const READY_WITHIN_MS = 120_000;
const isWorker = (p: ProcessRecord) => p.name.startsWith('worker-');
const isAgent = (p: ProcessRecord) => p.name !== SERVER && !isWorker(p);

export class Cluster {
  /** What the last `up` did, component by component, in the order it went. */
  readonly upResults: UpResult[] = [];
  /** `bins` were checked against their pins (or built): done once, before the first of them runs. */
  private binsChecked = false;
  private saving: Promise<void> = Promise.resolve();

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
   * Brings the cluster in `dataDir` up, as `docker compose up -d` does: what runs is left running,
   * what is missing or died is started (PostgreSQL; the server after the databases, schemas and
   * search attributes are set up; the workers; an agent per fleet agent file no running agent
   * serves). A failure stops everything when nothing ran before, and leaves what ran otherwise.
   */
  static async up(options: ClusterOptions): Promise<Cluster> {
    const log = options.log ?? (() => undefined);
    const dataDir = path.resolve(options.dataDir);
    const recorded = await readState(dataDir);
    const settled = settle(dataDir, recorded, options);
    // What runs decides what must start; the ports of what must start are checked before anything is made.
    const server = settled.keep ? recorded?.processes.find((p) => p.name === SERVER) : undefined;
    const running = { server: server !== undefined && runs(server), pg: postmasterPid(path.join(dataDir, 'postgres')) !== null };
    await checkPorts(running.server ? null : serverPorts(settled.portBase), running.pg ? null : settled.portBase + 10);
    await fs.mkdir(path.join(dataDir, 'logs'), { recursive: true });
    const databases = await databasesOf(dataDir, settled.portBase + 10);
    const fleetDir = settled.fleetDir ?? (await prepareDemoFleet(dataDir, 'npm run cluster'));
    const pg = await OwnedPostgres.prepare({ dir: path.join(dataDir, 'postgres'), port: settled.portBase + 10 }, log);
    const state = settled.keep && recorded ? recorded : initialState(dataDir, settled.portBase, fleetDir, databases, NAMESPACE);
    const cluster = new Cluster(dataDir, serverPorts(settled.portBase), serverBinaries(), pg, databases, fleetDir, log, state);
    const ranBefore = cluster.status().some((p) => p.running);
    try {
      await cluster.converge(options, running);
      return cluster;
    } catch (error) {
      if (!ranBefore) await cluster.down().catch(() => undefined);
      throw error;
    }
  }

  /** Each part in order, started unless it runs. */
  private async converge(options: ClusterOptions, running: { server: boolean; pg: boolean }): Promise<void> {
    if (!running.server) await this.checkBinaries(); // a build (minutes, once per machine) before anything starts
    // 1. Storage.
    if (!running.pg) await this.startPostgres();
    this.upResults.push({ name: 'postgres', pid: this.pg.pid() ?? 0, did: running.pg ? 'running' : 'started' });
    await this.save();
    // 2. The server: the databases and schemas first (compose's one-shot jobs, idempotent), then the search attributes.
    const server = this.recorded(SERVER);
    if (server && running.server) this.upResults.push({ name: SERVER, pid: server.pid, did: 'running' });
    else {
      await this.setUpDatabases();
      await this.startServer(await this.shards(options.shards), options.pprofPort);
      this.log('registering search attributes (deploy/temporal/register-search-attributes.sh)');
      await registerSearchAttributes(projectRoot(), temporalCliPath(), this.address, NAMESPACE);
      this.upResults.push(this.result(SERVER, server));
    }
    // 3. Workers and agents, each as recorded (its own command), then the ones missing.
    await this.ensureWorkersAndAgents(options.workers ?? 1);
    await writeEnvFile(this.dataDir, this.clientEnv as Record<string, string>);
  }

  /**
   * The workers and agents: those that run are left, the others started all at once (they wait
   * on nothing but the server). Recorded ones are started again with their own command line.
   */
  private async ensureWorkersAndAgents(workers: number): Promise<void> {
    const starts: Array<{ name: string; was?: ProcessRecord; start: () => Promise<ProcessRecord> }> = [];
    const keepOrStart = (was: ProcessRecord | undefined, name: string, start: () => Promise<ProcessRecord>) => {
      if (was && runs(was)) this.upResults.push({ name, pid: was.pid, did: 'running' });
      else starts.push({ name, was, start });
    };
    const names = new Set(this.state.processes.filter(isWorker).map((p) => p.name));
    for (let i = 1; i <= workers; i++) names.add(`worker-${i}`);
    for (const name of [...names].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))) {
      const was = this.recorded(name);
      keepOrStart(was, name, () => this.launch(name, was?.command ?? this.workerCommand(name, DATUM_BIN()), WORKER_READY));
    }
    const agents = this.state.processes.filter(isAgent);
    for (const was of agents) keepOrStart(was, was.name, () => this.launch(was.name, was.command, AGENT_READY));
    const served = new Set(agents.flatMap((p) => configsOf(p.command)));
    for (const agent of await listFleetAgents(this.fleetDir))
      if (!served.has(path.resolve(agent.file))) keepOrStart(undefined, `agent-${agent.node}`, () => this.startAgent(agent));

    if (starts.length > 0) this.log(`starting ${starts.map((s) => s.name).join(', ')}`);
    // Settled, not raced: a failure must not leave another start running unrecorded in the results.
    const outcomes = await Promise.allSettled(starts.map((s) => s.start()));
    outcomes.forEach((o, i) => {
      if (o.status === 'fulfilled') this.upResults.push(this.result(starts[i].name, starts[i].was, o.value));
    });
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** `started`, or `restarted` when a record of it was there (its process had died). */
  private result(name: string, was: ProcessRecord | undefined, now = this.process(name)): UpResult {
    return was ? { name, pid: now.pid, did: 'restarted', was: was.pid } : { name, pid: now.pid, did: 'started' };
  }

  private recorded(name: string): ProcessRecord | undefined {
    return this.state.processes.find((p) => p.name === name);
  }

  /** The cluster recorded in DATA/cluster.json, for `down` and `status` from another process. */
  static async attach(dataDir: string, log: (line: string) => void = () => undefined): Promise<Cluster | null> {
    const state = await readState(path.resolve(dataDir));
    if (!state) return null;
    const pg = await OwnedPostgres.prepare(state.postgres, log);
    const databases = await databasesOf(state.data_dir, state.postgres.port);
    const bins = serverBinaries(); // checked only before the server is started again (launchServer)
    return new Cluster(state.data_dir, serverPorts(state.port_base), bins, pg, databases, state.fleet_dir, log, state);
  }

  /** Builds the server binaries when the cache has none, and checks them against their pins. */
  private async checkBinaries(): Promise<void> {
    if (this.binsChecked) return;
    await ensureServerBinaries({ log: this.log });
    this.binsChecked = true;
  }

  private async startPostgres(): Promise<void> {
    this.log(`starting PostgreSQL on 127.0.0.1:${this.pg.port} (${this.pg.dataDir})`);
    await this.pg.start();
  }

  private async setUpDatabases(): Promise<void> {
    this.log('roles and databases (deploy/postgres/setup.sh)');
    await setupDatabases(projectRoot(), this.pg.adminEnv, this.pg.bin, this.databases);
    this.log("Temporal's schema (deploy/temporal/setup-schema.sh)");
    await setupSchema(projectRoot(), this.bins, this.databases);
  }

  /** The shards of the server's config if one was written (they cannot change), else `given` or 16. */
  private async shards(given: number | undefined): Promise<number> {
    const config = path.join(this.dataDir, 'temporal', 'cluster.yaml');
    const fixed = await recordedShards(config);
    if (fixed !== null && given !== undefined && given !== fixed)
      throw new ClusterError(
        `the cluster in ${this.dataDir} has ${fixed} history shards (${config}); a Temporal cluster's shard count cannot change`,
        `leave out --shards, or start another cluster with its own --data`,
      );
    return fixed ?? given ?? 16;
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
    await this.checkBinaries();
    await checkSchemaVersions(this.bins, this.databases);
    const configDir = path.join(this.dataDir, 'temporal');
    const command = [this.bins.server, '--root', configDir, '--config', '.', '--env', 'cluster', '--allow-no-auth', 'start'];
    this.log(`starting Temporal server ${this.bins.version} on ${this.address}`);
    const log = logPath(this.dataDir, SERVER);
    const from = await logSize(log);
    const p = startProcess(SERVER, command, log, process.env, configDir);
    await this.track(p);
    await waitForFrontend(this.address, p, 120_000, from);
  }

  private workerCommand(name: string, datum: string): string[] {
    return [process.execPath, datum, 'worker', '--fleet', this.fleetDir, '--data', path.join(this.dataDir, name)];
  }

  /** A `datum worker` process; `datum` names another release's bin/datum.js (the upgrade test runs the previous one). */
  async startWorker(datum = DATUM_BIN()): Promise<ProcessRecord> {
    const name = `worker-${this.state.processes.filter(isWorker).length + 1}`;
    this.log(`starting ${name} (datum worker, ledger in PostgreSQL)`);
    return await this.launch(name, this.workerCommand(name, datum), WORKER_READY);
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
    return await this.launch(name, command, AGENT_READY);
  }

  private async launch(name: string, command: string[], ready: string): Promise<ProcessRecord> {
    const log = logPath(this.dataDir, name);
    const from = await logSize(log);
    const env = { ...process.env, ...this.clientEnv };
    const p = startProcess(name, command, log, env, this.dataDir);
    await this.track(p);
    await waitForLog(p, ready, READY_WITHIN_MS, from);
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
    await this.kill(SERVER);
    await this.launchServer();
  }

  async restartWorker(name: string): Promise<void> {
    const p = this.process(name);
    await stopProcess(p);
    await this.launch(name, p.command, WORKER_READY);
  }

  /** Stops one process gracefully (SIGTERM, then SIGKILL after the grace) and forgets it. */
  async stop(name: string): Promise<void> {
    await stopProcess(this.process(name));
    this.state.processes = this.state.processes.filter((p) => p.name !== name);
    await this.save();
  }

  /**
   * Stops every process it started (agents and workers first, then the server), their node
   * services, and PostgreSQL. The record stays, with no process in it: the next `up` on this data
   * starts the same cluster again (its port base and fleet).
   */
  async down(): Promise<string[]> {
    const said: string[] = [];
    const order = (p: ProcessRecord) => (isAgent(p) ? 0 : isWorker(p) ? 1 : 2);
    for (const group of [0, 1, 2]) {
      const stopping = this.state.processes.filter((p) => order(p) === group);
      const results = await Promise.all(stopping.map(async (p) => `${p.name} (pid ${p.pid}): ${await stopProcess(p)}`));
      said.push(...results);
      if (group === 0) said.push(...(await this.stopNodeServices()));
    }
    await this.pg.stop('fast');
    said.push(`postgres (port ${this.pg.port}): stopped`);
    this.state.processes = [];
    await this.save();
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
    const rows = this.state.processes.map((p) => ({ name: p.name, pid: p.pid, running: runs(p), log: p.log }));
    return [...rows, { name: 'postgres', pid: this.pg.pid() ?? 0, running: this.pg.running(), log: this.pg.logFile }];
  }

  /** Saves are queued: starts running at once would otherwise write DATA/cluster.json over each other. */
  private async save(): Promise<void> {
    const saving = this.saving.then(() => saveState(this.state));
    this.saving = saving.catch(() => undefined);
    await saving;
  }
}

/** Refuses a port in use among those of what must start (null: it runs already), before anything starts. */
async function checkPorts(ports: ServerPorts | null, pgPort: number | null): Promise<void> {
  const wanted: Array<[number, string]> = ports
    ? [
        [ports.frontend, 'Temporal frontend gRPC'],
        [ports.http, 'Temporal frontend HTTP'],
        [ports.history, 'Temporal history'],
        [ports.matching, 'Temporal matching'],
        [ports.worker, 'Temporal worker service'],
        ...Object.entries(ports.membership).map(([s, p]): [number, string] => [p, `Temporal ${s} membership`]),
        [ports.metrics, 'Temporal metrics'],
      ]
    : [];
  if (pgPort !== null) wanted.push([pgPort, 'PostgreSQL']);
  for (const [port, what] of wanted) await ensurePortFree(port, what);
}
