// What a local cluster keeps in its data directory between commands: the record of what it
// started (cluster.json), the application roles' passwords (secrets.json), the environment a
// `datum` command needs (cluster.env); the demo fleet's copy is src/worker/demo-fleet.ts's. Every
// file holding a password is mode 0600.

import { randomBytes } from 'node:crypto';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ClusterError } from './errors';
import { postmasterPid } from './postgres';
import { runs, type ProcessRecord } from './processes';
import { datumLedgerUrl, type Databases } from './temporal';

export interface State {
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

const STATE_FILE = 'cluster.json';
export const ENV_FILE = 'cluster.env';

export async function readState(dataDir: string): Promise<State | null> {
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

export async function saveState(state: State): Promise<void> {
  await writePrivate(path.join(state.data_dir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
}

/** Written to a temporary file and renamed, mode 0600 from the start: it may hold a password. */
async function writePrivate(file: string, text: string): Promise<void> {
  await fs.writeFile(`${file}.tmp`, text, { mode: 0o600 });
  await fs.chmod(`${file}.tmp`, 0o600); // an older .tmp keeps its mode through writeFile
  await fs.rename(`${file}.tmp`, file);
}

/**
 * DATA/cluster.env: the environment of a `datum` command on this cluster, the ledger URL with its
 * password among it, so the `up` banner names this file instead of printing the password.
 * Shell syntax (`set -a; . DATA/cluster.env; set +a`), which `node --env-file` reads too.
 */
export async function writeEnvFile(dataDir: string, env: Record<string, string>): Promise<string> {
  const file = path.join(dataDir, ENV_FILE);
  const quoted = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;
  const lines = Object.entries(env).map(([k, v]) => `${k}=${quoted(v)}`);
  await writePrivate(
    file,
    `# The cluster in ${dataDir}, for \`datum\` commands (npm run cluster -- up writes it).\n${lines.join('\n')}\n`,
  );
  return file;
}

/** The two application roles' passwords, generated at the first `up` and kept in DATA/secrets.json (0600). */
export async function databasesOf(dataDir: string, port: number): Promise<Databases> {
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

/** The history shards the server's config (DATA/temporal/cluster.yaml) was written with, if any: fixed at the first start. */
export async function recordedShards(configFile: string): Promise<number | null> {
  if (!existsSync(configFile)) return null;
  const doc = parseYaml(await fs.readFile(configFile, 'utf8')) as { persistence?: { numHistoryShards?: unknown } };
  const shards = doc.persistence?.numHistoryShards;
  return typeof shards === 'number' ? shards : null;
}

export function initialState(
  dataDir: string,
  portBase: number,
  fleetDir: string,
  databases: Databases,
  namespace: string,
): State {
  return {
    version: 1,
    data_dir: dataDir,
    port_base: portBase,
    address: `127.0.0.1:${portBase}`,
    namespace,
    fleet_dir: fleetDir,
    postgres: { dir: path.join(dataDir, 'postgres'), port: databases.port },
    ledger_url: datumLedgerUrl(databases),
    processes: [],
    agent_roots: [],
    started_at: new Date().toISOString(),
  };
}

/**
 * The port base and fleet of an `up`. A cluster with anything still running keeps its own, and a
 * different one given is refused; otherwise what is given wins, then what was recorded. `keep`:
 * the recorded processes are this cluster's (each is started again as it was when dead).
 */
export function settle(dataDir: string, recorded: State | null, o: { portBase?: number; fleetDir?: string }) {
  const fleetDir = o.fleetDir ? path.resolve(o.fleetDir) : undefined;
  const running = [
    ...(recorded?.processes.filter(runs).map((p) => `${p.name} pid ${p.pid}`) ?? []),
    ...(postmasterPid(path.join(dataDir, 'postgres')) ? ['postgres'] : []),
  ];
  if (recorded && running.length > 0) {
    const differs = (what: string, given: unknown, own: unknown) =>
      new ClusterError(
        `the cluster in ${dataDir} runs (${running.join(', ')}) with ${what} ${String(own)}, not ${String(given)}`,
        `leave out ${what} (\`up\` keeps what the cluster runs with), or \`npm run cluster -- down --data ${dataDir}\` first`,
      );
    if (o.portBase !== undefined && o.portBase !== recorded.port_base)
      throw differs('--port-base', o.portBase, recorded.port_base);
    if (fleetDir !== undefined && fleetDir !== recorded.fleet_dir) throw differs('--fleet', fleetDir, recorded.fleet_dir);
    return { portBase: recorded.port_base, fleetDir: recorded.fleet_dir, keep: true };
  }
  const portBase = o.portBase ?? recorded?.port_base ?? 7233;
  const fleet = fleetDir ?? recorded?.fleet_dir;
  const keep = recorded !== null && recorded.port_base === portBase && recorded.fleet_dir === fleet;
  return { portBase, fleetDir: fleet, keep };
}

/** The agent.yaml files an agent's command line serves (`--config FILE` …). */
export function configsOf(command: string[]): string[] {
  return command.flatMap((arg, i) => (i > 0 && command[i - 1] === '--config' ? [path.resolve(arg)] : []));
}
