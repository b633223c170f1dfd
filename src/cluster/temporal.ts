// The Temporal side of a local production-shaped cluster: the databases and roles
// (deploy/postgres/setup.sh), the schemas (deploy/temporal/setup-schema.sh), the server with all
// four roles in one process on PostgreSQL with deploy/temporal/dynamicconfig/production.yaml, and
// Datum's search attributes (deploy/temporal/register-search-attributes.sh, with the attribute
// list docker-compose.yml passes it). The same scripts the compose file runs, run for real.

import { existsSync, promises as fs, readdirSync } from 'node:fs';
import { Connection } from '@temporalio/client';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { parse as parseYaml, stringify } from 'yaml';
import type { ServerBinaries } from './binaries';
import { ClusterError } from './errors';
import { LogLines } from './log-lines';
import { exec, tail } from './postgres';
import { runs, type ProcessRecord } from './processes';

/**
 * Every port the server binds, from one base (the frontend's gRPC port). The SQL persistence
 * keeps membership ports in a smallint column, so base + 8 must stay below 32768.
 */
export function serverPorts(base: number) {
  if (base + 8 > 32_767)
    throw new ClusterError(
      `port base ${base} puts the server's membership ports above 32767, which Temporal's SQL schema cannot store`,
      'choose a port base of at most 32757',
    );
  return {
    frontend: base,
    http: base + 1,
    history: base + 2,
    matching: base + 3,
    worker: base + 4,
    membership: { frontend: base + 5, history: base + 6, matching: base + 7, worker: base + 8 },
    metrics: base + 9,
  };
}
export type ServerPorts = ReturnType<typeof serverPorts>;

export interface Databases {
  host: string;
  port: number;
  temporal: { user: string; password: string; db: string; visibility: string };
  datum: { user: string; password: string; db: string };
}

export const datumLedgerUrl = (d: Databases) =>
  `postgres://${encodeURIComponent(d.datum.user)}:${encodeURIComponent(d.datum.password)}@${d.host}:${d.port}/${d.datum.db}`;

function deployScript(root: string, ...parts: string[]): string {
  const file = path.join(root, 'deploy', ...parts);
  if (!existsSync(file))
    throw new ClusterError(`${file} is missing`, 'restore deploy/ from the repository (git checkout -- deploy)');
  return file;
}

async function sh(script: string, env: NodeJS.ProcessEnv, what: string, fix: string): Promise<string> {
  const result = await exec('sh', [script], { env, timeout: 10 * 60_000 });
  if (result.code !== 0)
    throw new ClusterError(`${what} failed (${path.basename(script)} exit ${result.code}):\n${tail(result.output)}`, fix);
  return result.output;
}

/** Roles and databases, as compose's db-setup service makes them. */
export async function setupDatabases(root: string, admin: NodeJS.ProcessEnv, pgBin: string, d: Databases): Promise<void> {
  await sh(
    deployScript(root, 'postgres', 'setup.sh'),
    {
      ...process.env,
      ...admin,
      PATH: `${pgBin}:${process.env.PATH ?? ''}`,
      SETUP_MAX_ATTEMPTS: '5',
      SETUP_SLEEP_SECONDS: '1',
      TEMPORAL_DB_USER: d.temporal.user,
      TEMPORAL_DB_PASSWORD: d.temporal.password,
      TEMPORAL_DBNAME: d.temporal.db,
      TEMPORAL_VISIBILITY_DBNAME: d.temporal.visibility,
      DATUM_DB_USER: d.datum.user,
      DATUM_DB_PASSWORD: d.datum.password,
      DATUM_DBNAME: d.datum.db,
    },
    'creating the roles and databases',
    `check that PostgreSQL runs on ${String(admin.PGHOST)}:${String(admin.PGPORT)} and that the superuser password is right (a local cluster keeps it in DATA/postgres/superuser.password; the server's own is set at initdb)`,
  );
}

/** Temporal's schemas, as compose's temporal-schema service applies them (with this build's sql tool and schema files). */
export async function setupSchema(root: string, bins: ServerBinaries, d: Databases): Promise<void> {
  // A schema newer than this build is refused before the script could touch it.
  await checkSchemaVersions(bins, d, { allowOlder: true });
  await sh(
    deployScript(root, 'temporal', 'setup-schema.sh'),
    {
      ...process.env,
      PATH: `${path.dirname(bins.sqlTool)}:${process.env.PATH ?? ''}`,
      SQL_PLUGIN: 'postgres12',
      SQL_HOST: d.host,
      SQL_PORT: String(d.port),
      SQL_USER: d.temporal.user,
      SQL_PASSWORD: d.temporal.password,
      TEMPORAL_DBNAME: d.temporal.db,
      TEMPORAL_VISIBILITY_DBNAME: d.temporal.visibility,
      TEMPORAL_SCHEMA_ROOT: bins.schemaDir,
      SETUP_MAX_ATTEMPTS: '5',
      SETUP_SLEEP_SECONDS: '1',
    },
    "applying Temporal's schema",
    `check the temporal role's password and that ${d.temporal.db} exists (deploy/postgres/setup.sh makes both)`,
  );
  await checkSchemaVersions(bins, d);
}

/** The newest version under a versioned/ directory (v1.9 → "1.9"), which this server build expects. */
export function expectedSchemaVersion(versionedDir: string): string {
  const versions = readdirVersions(versionedDir);
  if (versions.length === 0)
    throw new ClusterError(
      `${versionedDir} holds no schema versions`,
      'rebuild the server cache (`npm run cluster -- build --force`)',
    );
  return versions[versions.length - 1];
}

function readdirVersions(dir: string): string[] {
  const names = existsSync(dir) ? readdirSync(dir) : [];
  return names
    .filter((n) => /^v\d+\.\d+$/.test(n))
    .map((n) => n.slice(1))
    .sort(compareVersions);
}

export function compareVersions(a: string, b: string): number {
  const [am, an] = a.split('.').map(Number);
  const [bm, bn] = b.split('.').map(Number);
  return am - bm || an - bn;
}

/**
 * Both databases at exactly the schema version this server build expects. A newer schema means a
 * newer server wrote it: starting an older one on it is refused here, with the version named,
 * rather than by a server failing later.
 */
export async function checkSchemaVersions(bins: ServerBinaries, d: Databases, o: { allowOlder?: boolean } = {}): Promise<void> {
  for (const [db, part] of [
    [d.temporal.db, 'temporal'],
    [d.temporal.visibility, 'visibility'],
  ] as const) {
    const expected = expectedSchemaVersion(path.join(bins.schemaDir, part, 'versioned'));
    const actual = await schemaVersionOf(d, db);
    if (actual === expected) continue;
    const newer = actual !== null && compareVersions(actual, expected) > 0;
    if (o.allowOlder && !newer) continue;
    throw new ClusterError(
      `database ${db} is at schema version ${actual ?? 'none'}, and Temporal ${bins.version} needs ${expected}`,
      newer
        ? `a newer Temporal server upgraded this database: run that server version (DATUM_TEMPORAL_SERVER_VERSION cannot go back), or start from a new --data directory`
        : `run deploy/temporal/setup-schema.sh against it (\`npm run cluster -- up\` does), and check its output`,
    );
  }
}

async function schemaVersionOf(d: Databases, db: string): Promise<string | null> {
  const client = new PgClient({ host: d.host, port: d.port, user: d.temporal.user, password: d.temporal.password, database: db });
  try {
    await client.connect();
  } catch (error) {
    throw new ClusterError(
      `cannot connect to database ${db} as ${d.temporal.user} on ${d.host}:${d.port}: ${(error as Error).message}`,
      'check that PostgreSQL runs and that the temporal role and its password are set (deploy/postgres/setup.sh sets both)',
    );
  }
  try {
    const result = await client.query<{ curr_version: string }>(
      'SELECT curr_version FROM schema_version WHERE version_partition = 0 AND db_name = $1',
      [db],
    );
    return result.rows[0]?.curr_version ?? null;
  } catch {
    return null;
  } finally {
    await client.end();
  }
}

export interface ServerConfigOptions {
  bins: ServerBinaries;
  ports: ServerPorts;
  databases: Databases;
  /** deploy/temporal/dynamicconfig/production.yaml (compose mounts the same file). */
  dynamicConfig: string;
  /** Fixed at the cluster's first start; compose uses 128. */
  shards: number;
  logLevel: string;
  /** Go's pprof on 127.0.0.1 at this port (profiling only); unset: no pprof endpoint. */
  pprofPort?: number;
}

/** The parts of development-postgres12.yaml this cluster changes (the rest stays as the module ships it). */
interface BaseConfig {
  [key: string]: unknown;
  persistence: { [key: string]: unknown; numHistoryShards: number; datastores: unknown };
  global: {
    [key: string]: unknown;
    membership: Record<string, unknown>;
    pprof?: unknown;
    metrics: { prometheus: Record<string, unknown> };
  };
  clusterMetadata: { [key: string]: unknown; clusterInformation: { active: Record<string, unknown> } };
}

/** The server's config: the module's development-postgres12.yaml, with this cluster's ports, databases and dynamic config. */
export async function renderServerConfig(o: ServerConfigOptions): Promise<string> {
  const doc = parseYaml(await fs.readFile(o.bins.baseConfig, 'utf8')) as BaseConfig;
  const store = (db: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName: db,
      connectAddr: `${o.databases.host}:${o.databases.port}`,
      connectProtocol: 'tcp',
      user: o.databases.temporal.user,
      password: o.databases.temporal.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  doc.log = { stdout: true, level: o.logLevel, format: 'json' };
  doc.persistence.numHistoryShards = o.shards;
  doc.persistence.datastores = {
    'postgres-default': store(o.databases.temporal.db, 20),
    'postgres-visibility': store(o.databases.temporal.visibility, 10),
  };
  doc.global.membership.broadcastAddress = '127.0.0.1';
  if (o.pprofPort) doc.global.pprof = { port: o.pprofPort, host: '127.0.0.1' };
  else delete doc.global.pprof;
  doc.global.metrics.prometheus.listenAddress = `127.0.0.1:${o.ports.metrics}`;
  const svc = (grpcPort: number, membershipPort: number, extra: object = {}) => ({
    rpc: { grpcPort, membershipPort, bindOnLocalHost: true, ...extra },
  });
  doc.services = {
    frontend: svc(o.ports.frontend, o.ports.membership.frontend, { httpPort: o.ports.http }),
    history: svc(o.ports.history, o.ports.membership.history),
    matching: svc(o.ports.matching, o.ports.membership.matching),
    worker: svc(o.ports.worker, o.ports.membership.worker),
  };
  doc.clusterMetadata.clusterInformation.active.rpcAddress = `127.0.0.1:${o.ports.frontend}`;
  // Archival needs a provider directory per cluster; a local cluster keeps none.
  doc.archival = { history: { state: 'disabled' }, visibility: { state: 'disabled' } };
  doc.namespaceDefaults = { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } };
  doc.dynamicConfigClient = { filepath: o.dynamicConfig, pollInterval: '10s' };
  return stringify(doc);
}

/**
 * The search attributes docker-compose.yml registers (service datum-search-attributes,
 * `command:`), read from the compose file itself so the cluster registers exactly those.
 */
export async function composeSearchAttributes(root: string): Promise<string[]> {
  const compose = parseYaml(await fs.readFile(path.join(root, 'docker-compose.yml'), 'utf8')) as {
    services?: Record<string, { command?: unknown }>;
  };
  const command = compose.services?.['datum-search-attributes']?.command;
  if (!Array.isArray(command) || command.length === 0 || !command.every((c) => typeof c === 'string' && c.includes('=')))
    throw new ClusterError(
      'docker-compose.yml: services.datum-search-attributes.command lists no Name=Type search attributes',
      'restore docker-compose.yml from the repository',
    );
  return command as string[];
}

/** Creates the namespace when missing and registers the attributes, as compose's datum-search-attributes job does. */
export async function registerSearchAttributes(
  root: string,
  temporalCli: string,
  address: string,
  namespace: string,
): Promise<void> {
  const attributes = await composeSearchAttributes(root);
  const result = await exec('sh', [deployScript(root, 'temporal', 'register-search-attributes.sh'), ...attributes], {
    env: {
      ...process.env,
      PATH: `${path.dirname(temporalCli)}:${process.env.PATH ?? ''}`,
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: namespace,
      TEMPORAL_NAMESPACE_RETENTION: '720h',
      SETUP_MAX_ATTEMPTS: '60',
      SETUP_SLEEP_SECONDS: '1',
    },
    timeout: 5 * 60_000,
  });
  if (result.code !== 0)
    throw new ClusterError(
      `registering Datum's search attributes failed:\n${tail(result.output)}`,
      `check that the server at ${address} is serving (see its log)`,
    );
}

/** Until the frontend answers GetSystemInfo; fails early with the server's log when it exits. */
export async function waitForFrontend(address: string, p: ProcessRecord, timeoutMs: number, from: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (!runs(p)) break;
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
  // This start's output only: the log holds every earlier run's too.
  const output = new LogLines(p.log, from);
  const log = serverFailure([...output.read(), output.partial()].join('\n'));
  throw new ClusterError(
    runs(p)
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
