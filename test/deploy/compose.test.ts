// The production deployment (docker-compose.yml, Dockerfile, .dockerignore, deploy/) checked
// without a Docker engine: the wiring between services (host names, ports, credentials, volumes,
// start-up order), the files mounted into them validated with Datum's own parsers and authority,
// the image definition, and the one-shot scripts run for real where that needs no container
// (the search-attribute job against a real Temporal dev server). `docker compose config -q`
// runs too when the compose CLI plugin happens to be installed.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
// Not re-exported from the package index; test/helpers/temporal.ts imports it the same way.
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { parseAgentConfigText, parseDesiredStateText } from '../../src/schemas/documents';
import { projectRoot, temporalCliPath } from '../../src/worker/paths';
import { SHUTDOWN_BUDGET_S, SHUTDOWN_FORCE_TIME_MS, SHUTDOWN_GRACE_TIME_MS } from '../../src/worker/shutdown';
import { WORKFLOW_BUNDLE_ENV } from '../../src/worker/bundle';
import { METRICS_ADDRESS_ENV } from '../../src/worker/metrics';
import { DATUM_SEARCH_ATTRIBUTES } from '../../src/contract';
import { installTestRuntime } from '../helpers/temporal';
import { COMPOSE, INSTALL_TIMEOUT_MS, toolOrSkip } from '../helpers/tools';

const ROOT = projectRoot();
const COMPOSE_FILE = path.join(ROOT, 'docker-compose.yml');
const ENV_EXAMPLE = path.join(ROOT, 'deploy', 'env.example');
const DATUM_BIN = path.join(ROOT, 'bin', 'datum.js');

// ---------------------------------------------------------------------------------------------
// Reading docker-compose.yml the way `docker compose` does: YAML (anchors and aliases resolved),
// then ${VAR} interpolation from .env, here from deploy/env.example, the documented template.

type Env = Record<string, string>;

/** KEY=VALUE lines, as compose reads its .env file (comments and blank lines skipped). */
function parseEnvFile(text: string): Env {
  const env: Env = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`not KEY=VALUE: ${raw}`);
    env[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return env;
}

const VARIABLE = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g;

/** Compose's interpolation: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}. */
function interpolate(text: string, env: Env): string {
  return text.replace(
    VARIABLE,
    (match, braced: string | undefined, op: string | undefined, arg: string | undefined, bare: string | undefined) => {
      if (match === '$$') return '$';
      const name = (braced ?? bare)!;
      const value = env[name];
      const unsetOrEmpty = value === undefined || value === '';
      switch (op) {
        case ':-':
          return unsetOrEmpty ? arg! : value;
        case '-':
          return value ?? arg!;
        case ':?':
          if (unsetOrEmpty) throw new Error(`required variable ${name} is missing a value: ${arg}`);
          return value;
        case '?':
          if (value === undefined) throw new Error(`required variable ${name} is missing: ${arg}`);
          return value;
        default:
          return value ?? '';
      }
    },
  );
}

function interpolateDeep(value: unknown, env: Env): unknown {
  if (typeof value === 'string') return interpolate(value, env);
  if (Array.isArray(value)) return value.map((v) => interpolateDeep(v, env));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateDeep(v, env)]));
  return value;
}

/** Every variable the compose file references, with the operator it is used with. */
function referencedVariables(text: string): { name: string; op: string | undefined }[] {
  const withoutComments = text
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n');
  return [...withoutComments.matchAll(VARIABLE)].filter((m) => m[0] !== '$$').map((m) => ({ name: m[1] ?? m[4], op: m[2] }));
}

interface Healthcheck {
  test?: string[] | string;
  disable?: boolean;
}

interface Service {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  entrypoint?: string[] | string;
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: (string | number | { target: number; published?: string | number; host_ip?: string })[];
  expose?: (string | number)[];
  volumes?: (string | { type: string; source?: string; target: string; read_only?: boolean })[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: Healthcheck;
  restart?: string;
  stop_grace_period?: string;
}

interface ComposeFile {
  name?: string;
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

function loadCompose(env: Env): ComposeFile {
  return interpolateDeep(parseYaml(readFileSync(COMPOSE_FILE, 'utf8')), env) as ComposeFile;
}

function environmentOf(service: Service): Env {
  const raw = service.environment ?? {};
  if (Array.isArray(raw)) {
    return Object.fromEntries(
      raw.map((entry) => {
        const eq = entry.indexOf('=');
        return eq < 0 ? [entry, ''] : [entry.slice(0, eq), entry.slice(eq + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

function argv(value: string[] | string | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value.map(String) : value.split(/\s+/).filter(Boolean);
}

interface Mount {
  kind: 'bind' | 'volume';
  source: string;
  target: string;
  readOnly: boolean;
}

function mountsOf(service: Service): Mount[] {
  return (service.volumes ?? []).map((v) => {
    if (typeof v === 'object') {
      return {
        kind: v.type === 'bind' ? 'bind' : 'volume',
        source: v.source ?? '',
        target: v.target,
        readOnly: v.read_only === true,
      };
    }
    const [source, target, mode] = v.split(':');
    if (target === undefined) return { kind: 'volume', source: '', target: source, readOnly: false };
    const kind = /^[./~]/.test(source) ? 'bind' : 'volume';
    return { kind, source, target, readOnly: (mode ?? '').split(',').includes('ro') };
  });
}

/** Where a path inside a service's container comes from on the host (bind mounts only), or null. */
function hostPathOf(service: Service, containerPath: string): string | null {
  const candidates = mountsOf(service)
    .filter((m) => m.kind === 'bind' && (containerPath === m.target || containerPath.startsWith(`${m.target}/`)))
    .sort((a, b) => b.target.length - a.target.length);
  const mount = candidates[0];
  if (!mount) return null;
  return path.join(path.resolve(ROOT, mount.source), path.relative(mount.target, containerPath));
}

function isInside(child: string, parent: string): boolean {
  const rel = path.posix.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.posix.isAbsolute(rel));
}

interface PortMapping {
  hostIp: string;
  hostPort: string | null;
  containerPort: string;
}

function portsOf(service: Service): PortMapping[] {
  return (service.ports ?? []).map((p) => {
    if (typeof p === 'object')
      return {
        hostIp: p.host_ip ?? '0.0.0.0',
        hostPort: p.published === undefined ? null : String(p.published),
        containerPort: String(p.target),
      };
    const parts = String(p)
      .replace(/\/(tcp|udp)$/, '')
      .split(':');
    if (parts.length === 1) return { hostIp: '0.0.0.0', hostPort: null, containerPort: parts[0] };
    if (parts.length === 2) return { hostIp: '0.0.0.0', hostPort: parts[0], containerPort: parts[1] };
    return { hostIp: parts[0], hostPort: parts[1], containerPort: parts[2] };
  });
}

/** Ports a service's container listens on, as the file declares them (expose + published targets). */
function listensOn(service: Service): Set<string> {
  return new Set([...(service.expose ?? []).map(String), ...portsOf(service).map((p) => p.containerPort)]);
}

function dependsOn(service: Service): Record<string, string> {
  const deps = service.depends_on ?? {};
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((d) => [d, 'service_started']));
  return Object.fromEntries(Object.entries(deps).map(([name, d]) => [name, d?.condition ?? 'service_started']));
}

function splitImage(image: string): { repository: string; tag: string | null; digest: string | null } {
  const [withoutDigest, digest] = image.split('@');
  const slash = withoutDigest.lastIndexOf('/');
  const colon = withoutDigest.lastIndexOf(':');
  if (colon > slash)
    return { repository: withoutDigest.slice(0, colon), tag: withoutDigest.slice(colon + 1), digest: digest ?? null };
  return { repository: withoutDigest, tag: null, digest: digest ?? null };
}

function hostPort(address: string): { host: string; port: string } {
  const match = /^([^:/]+):(\d+)$/.exec(address);
  if (!match) throw new Error(`"${address}" is not host:port`);
  return { host: match[1], port: match[2] };
}

const isDatumService = (s: Service) => s.image !== undefined && splitImage(s.image).repository === 'datum';
const isOneShot = (s: Service) => s.restart === 'no' || s.restart === undefined;
const ONE_SHOT_SCRIPT = (s: Service) => argv(s.entrypoint).find((a) => a.endsWith('.sh'));

// The temporal CLI's names for the SDK's search attribute types (`--type`).
const CLI_TYPE: Record<string, string> = {
  TEXT: 'Text',
  KEYWORD: 'Keyword',
  INT: 'Int',
  DOUBLE: 'Double',
  BOOL: 'Bool',
  DATETIME: 'Datetime',
  KEYWORD_LIST: 'KeywordList',
};

// Custom search attributes on SQL visibility map onto preallocated columns
// (schema/postgresql/v12/visibility/schema.sql of the server): this many per type.
const POSTGRES_VISIBILITY_SLOTS: Record<string, number> = {
  Keyword: 10,
  Int: 3,
  KeywordList: 3,
  Text: 3,
  Double: 3,
  Bool: 3,
  Datetime: 3,
};

/** `Name=Type` arguments of the search-attribute job, by name. */
function registeredSearchAttributes(compose: ComposeFile): { service: string; attributes: Map<string, string> } {
  const entries = Object.entries(compose.services).filter(([, s]) =>
    (ONE_SHOT_SCRIPT(s) ?? '').endsWith('register-search-attributes.sh'),
  );
  expect(entries, 'exactly one service runs deploy/temporal/register-search-attributes.sh').toHaveLength(1);
  const [name, service] = entries[0];
  const specs = argv(service.command);
  const attributes = new Map<string, string>();
  for (const spec of specs) {
    const [attr, type] = spec.split('=');
    expect(attributes.has(attr), `${attr} is registered twice`).toBe(false);
    attributes.set(attr, type);
  }
  return { service: name, attributes };
}

function sha256File(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

function runDatum(args: string[]) {
  return spawnSync(process.execPath, [DATUM_BIN, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
}

// ---------------------------------------------------------------------------------------------

describe('docker-compose.yml', () => {
  const env = parseEnvFile(readFileSync(ENV_EXAMPLE, 'utf8'));
  const composeText = readFileSync(COMPOSE_FILE, 'utf8');
  const compose = loadCompose(env);
  const services = compose.services;
  const serviceNames = Object.keys(services);
  const service = (name: string): Service => {
    const s = services[name];
    if (!s) throw new Error(`docker-compose.yml has no service "${name}" (services: ${serviceNames.join(', ')})`);
    return s;
  };
  const datumServices = Object.entries(services).filter(([, s]) => isDatumService(s));
  const agents = datumServices.filter(([, s]) => argv(s.command)[0] === 'agent');
  const controllers = datumServices.filter(([, s]) => argv(s.command)[0] === 'worker');

  it('has the services of a production stack', () => {
    const images = Object.values(services).map((s) => splitImage(s.image ?? '').repository);
    for (const repository of [
      'postgres',
      'temporalio/server',
      'temporalio/admin-tools',
      'temporalio/ui',
      'datum',
      'prom/prometheus',
    ]) {
      expect(images, `a service runs ${repository}`).toContain(repository);
    }
    expect(controllers.length, 'a Datum controller worker').toBeGreaterThanOrEqual(1);
    expect(agents.length, 'a Datum node agent').toBeGreaterThanOrEqual(1);
  });

  it('takes every password from .env and has no default for any of them', () => {
    const required = new Set(
      referencedVariables(composeText)
        .filter((v) => v.op === ':?')
        .map((v) => v.name),
    );
    for (const name of ['POSTGRES_PASSWORD', 'TEMPORAL_DB_PASSWORD', 'DATUM_DB_PASSWORD']) expect(required).toContain(name);
    for (const name of required) {
      expect(env[name], `deploy/env.example sets ${name}`).toBeTruthy();
      const { [name]: _omitted, ...without } = env;
      expect(() => loadCompose(without), `docker compose refuses to start without ${name}`).toThrow(new RegExp(name));
    }
    for (const variable of referencedVariables(composeText)) {
      const documented = variable.name in env || variable.op === ':-' || variable.op === '-';
      expect(documented, `\${${variable.name}} has a default or is in deploy/env.example`).toBe(true);
    }
  });

  it('pins every image by a tag that is not latest', () => {
    for (const [name, s] of Object.entries(services)) {
      expect(s.image, `${name} names its image (services that build one tag it)`).toBeTruthy();
      const { tag, digest } = splitImage(s.image!);
      expect(tag ?? digest, `${name}: ${s.image} is pinned`).toBeTruthy();
      expect(tag, `${name}: ${s.image}`).not.toBe('latest');
      if (tag !== null) expect(tag, `${name}: ${s.image} has a version tag`).toMatch(/\d/);
    }
  });

  it('starts in an order that exists: depends_on targets, conditions and no cycles', () => {
    const conditions = ['service_started', 'service_healthy', 'service_completed_successfully'];
    for (const [name, s] of Object.entries(services)) {
      for (const [target, condition] of Object.entries(dependsOn(s))) {
        expect(serviceNames, `${name} depends on ${target}`).toContain(target);
        expect(conditions).toContain(condition);
        if (condition === 'service_healthy') {
          const check = service(target).healthcheck;
          expect(check?.test && !check.disable, `${target} has a healthcheck (${name} waits for it)`).toBeTruthy();
        }
        if (condition === 'service_completed_successfully') {
          expect(isOneShot(service(target)), `${target} is a one-shot job (restart: "no")`).toBe(true);
        }
      }
    }
    // Kahn's algorithm: everything can start.
    const pending = new Map(serviceNames.map((n) => [n, new Set(Object.keys(dependsOn(service(n))))]));
    let progressed = true;
    while (pending.size > 0 && progressed) {
      progressed = false;
      for (const [name, deps] of pending) {
        if ([...deps].every((d) => !pending.has(d))) {
          pending.delete(name);
          progressed = true;
        }
      }
    }
    expect([...pending.keys()], 'services in a depends_on cycle').toEqual([]);
  });

  it('starts the Datum services only after the search attributes are registered', () => {
    const { service: job } = registeredSearchAttributes(compose);
    expect(datumServices.length).toBeGreaterThanOrEqual(2);
    for (const [name, s] of datumServices) {
      expect(dependsOn(s)[job], `${name} waits for ${job}`).toBe('service_completed_successfully');
    }
    // …which itself waits for a healthy server.
    const temporal = Object.entries(services).find(([, s]) => splitImage(s.image!).repository === 'temporalio/server')![0];
    expect(dependsOn(service(job))[temporal]).toBe('service_healthy');
  });

  it('registers exactly the search attributes of src/contract/names.ts, names and types', () => {
    const { attributes } = registeredSearchAttributes(compose);
    const expected = new Map(DATUM_SEARCH_ATTRIBUTES.map((key) => [key.name, CLI_TYPE[key.type]]));
    expect(Object.fromEntries(attributes)).toEqual(Object.fromEntries(expected));
    expect(attributes.size).toBe(6);
    // And they fit the columns PostgreSQL visibility preallocates per type.
    const perType = new Map<string, number>();
    for (const type of attributes.values()) perType.set(type, (perType.get(type) ?? 0) + 1);
    for (const [type, count] of perType) expect(count, `${type} attributes`).toBeLessThanOrEqual(POSTGRES_VISIBILITY_SLOTS[type]);
  });

  it('points every Temporal client at the frontend service, on the port it listens on, in one namespace', () => {
    const temporal = Object.entries(services).find(([, s]) => splitImage(s.image!).repository === 'temporalio/server')!;
    const [temporalName, temporalService] = temporal;
    const frontendPort = environmentOf(temporalService).FRONTEND_GRPC_PORT ?? '7233';
    expect(listensOn(temporalService), `${temporalName} declares its frontend port`).toContain(frontendPort);
    expect(environmentOf(temporalService).BIND_ON_IP, 'the frontend listens on all interfaces of its container').toBe('0.0.0.0');

    const clients = Object.entries(services).filter(([, s]) => environmentOf(s).TEMPORAL_ADDRESS !== undefined);
    const clientNames = clients.map(([n]) => n);
    for (const needed of [...datumServices.map(([n]) => n), registeredSearchAttributes(compose).service])
      expect(clientNames).toContain(needed);
    expect(
      clients.some(([, s]) => splitImage(s.image!).repository === 'temporalio/ui'),
      'the Web UI is a client too',
    ).toBe(true);
    for (const [name, s] of clients) {
      const { host, port } = hostPort(environmentOf(s).TEMPORAL_ADDRESS);
      expect(host, `${name}: TEMPORAL_ADDRESS names the Temporal service`).toBe(temporalName);
      expect(port, `${name}: TEMPORAL_ADDRESS port is the frontend's`).toBe(frontendPort);
    }

    const namespaces = new Set(
      Object.values(services).flatMap((s) => {
        const e = environmentOf(s);
        return [e.TEMPORAL_NAMESPACE, e.TEMPORAL_DEFAULT_NAMESPACE].filter((v): v is string => v !== undefined);
      }),
    );
    expect([...namespaces], 'every service uses the same namespace').toEqual([env.TEMPORAL_NAMESPACE ?? 'default']);
  });

  it('points Temporal, its schema job and the ledger at the PostgreSQL service with the credentials db-setup creates', () => {
    const [pgName, pg] = Object.entries(services).find(
      ([, s]) => splitImage(s.image!).repository === 'postgres' && !isOneShot(s),
    )!;
    const pgEnv = environmentOf(pg);
    const pgPort = '5432';
    expect(listensOn(pg)).toContain(pgPort);

    const setup = Object.values(services).find((s) => (ONE_SHOT_SCRIPT(s) ?? '').endsWith('postgres/setup.sh'));
    expect(setup, 'a db-setup job runs deploy/postgres/setup.sh').toBeDefined();
    const db = environmentOf(setup!);
    expect(db.PGHOST).toBe(pgName);
    expect(db.PGPORT).toBe(pgPort);
    expect(db.PGUSER).toBe(pgEnv.POSTGRES_USER);
    expect(db.PGPASSWORD).toBe(pgEnv.POSTGRES_PASSWORD);
    expect(db.PGPASSWORD).toBe(env.POSTGRES_PASSWORD);

    // The Temporal server's persistence (DB=postgres12 template of the server image).
    const temporal = environmentOf(Object.values(services).find((s) => splitImage(s.image!).repository === 'temporalio/server')!);
    expect(temporal.DB).toBe('postgres12');
    expect(temporal.POSTGRES_SEEDS).toBe(pgName);
    expect(temporal.DB_PORT).toBe(pgPort);
    expect(temporal.POSTGRES_USER).toBe(db.TEMPORAL_DB_USER);
    expect(temporal.POSTGRES_PWD).toBe(db.TEMPORAL_DB_PASSWORD);
    expect(temporal.DBNAME).toBe(db.TEMPORAL_DBNAME);
    expect(temporal.VISIBILITY_DBNAME).toBe(db.TEMPORAL_VISIBILITY_DBNAME);

    // The schema job works on the same databases as the same role.
    const schemaJob = Object.values(services).find((s) => (ONE_SHOT_SCRIPT(s) ?? '').endsWith('setup-schema.sh'));
    expect(schemaJob, 'a temporal-schema job runs deploy/temporal/setup-schema.sh').toBeDefined();
    const schema = environmentOf(schemaJob!);
    expect(splitImage(schemaJob!.image!)).toMatchObject({ repository: 'temporalio/admin-tools' });
    expect(splitImage(schemaJob!.image!).tag, 'admin-tools and server come from the same release').toBe(
      splitImage(Object.values(services).find((s) => splitImage(s.image!).repository === 'temporalio/server')!.image!).tag,
    );
    expect(schema.SQL_PLUGIN).toBe(temporal.DB);
    expect(schema.SQL_HOST).toBe(pgName);
    expect(schema.SQL_PORT).toBe(pgPort);
    expect(schema.SQL_USER).toBe(temporal.POSTGRES_USER);
    expect(schema.SQL_PASSWORD).toBe(temporal.POSTGRES_PWD);
    expect(schema.TEMPORAL_DBNAME).toBe(temporal.DBNAME);
    expect(schema.TEMPORAL_VISIBILITY_DBNAME).toBe(temporal.VISIBILITY_DBNAME);

    // The ledger of every controller.
    for (const [name, s] of controllers) {
      const ledger = new URL(environmentOf(s).DATUM_LEDGER_URL);
      expect(ledger.protocol, `${name}: DATUM_LEDGER_URL`).toBe('postgres:');
      expect(ledger.hostname, `${name}: DATUM_LEDGER_URL host`).toBe(pgName);
      expect(ledger.port || '5432', `${name}: DATUM_LEDGER_URL port`).toBe(pgPort);
      expect(ledger.pathname, `${name}: the datum database`).toBe(`/${db.DATUM_DBNAME}`);
      expect(decodeURIComponent(ledger.username)).toBe(db.DATUM_DB_USER);
      expect(decodeURIComponent(ledger.password)).toBe(db.DATUM_DB_PASSWORD);
      expect(decodeURIComponent(ledger.password)).toBe(env.DATUM_DB_PASSWORD);
      expect(dependsOn(s)[Object.entries(services).find(([, x]) => x === setup)![0]], `${name} waits for its database`).toBe(
        'service_completed_successfully',
      );
    }
  });

  it('keeps every other host name it mentions on the compose network', () => {
    // Any *_HOST, *_SEEDS or *_ADDRESS value, and every URL host, is a service (or an address).
    for (const [name, s] of Object.entries(services)) {
      for (const [key, value] of Object.entries(environmentOf(s))) {
        let host: string | null = null;
        if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) host = new URL(value).hostname;
        else if (/(_HOST|HOST|_SEEDS|_ADDRESS)$/.test(key) && value !== '') host = value.split(':')[0];
        if (host === null || /^\d+\.\d+\.\d+\.\d+$/.test(host)) continue;
        expect(serviceNames, `${name}: ${key}=${value} names a service`).toContain(host);
      }
    }
  });

  it('publishes each host port once, on a container port the service listens on', () => {
    const seen = new Map<string, string>();
    for (const [name, s] of Object.entries(services)) {
      for (const p of portsOf(s)) {
        if (p.hostPort === null) continue;
        expect(seen.get(p.hostPort), `host port ${p.hostPort} of ${name} is free`).toBeUndefined();
        seen.set(p.hostPort, name);
        expect(p.hostIp, `${name} publishes on an explicit interface (default 127.0.0.1 in env.example)`).toMatch(
          /^\d+\.\d+\.\d+\.\d+$/,
        );
        // Listened on by the service's own account (its expose list or a *_PORT setting), not
        // only because it is published (listensOn counts published ports too).
        const declared = new Set([
          ...(s.expose ?? []).map(String),
          ...Object.entries(environmentOf(s))
            .filter(([k]) => /_PORT$/.test(k))
            .map(([, v]) => v),
        ]);
        expect([...declared], `${name} listens on container port ${p.containerPort}`).toContain(p.containerPort);
      }
    }
    expect(seen.size, 'the frontend and the Web UI are published').toBeGreaterThanOrEqual(2);
    const ui = Object.values(services).find((s) => splitImage(s.image!).repository === 'temporalio/ui')!;
    expect(portsOf(ui).map((p) => p.containerPort)).toContain(environmentOf(ui).TEMPORAL_UI_PORT ?? '8080');
    // The database is for the compose network only.
    const pg = Object.values(services).filter((s) => splitImage(s.image!).repository === 'postgres');
    for (const s of pg) expect(portsOf(s)).toEqual([]);
  });

  it('declares the volumes that keep the ledger and the node roots, and every bind mount exists', () => {
    const declared = new Set(Object.keys(compose.volumes ?? {}));
    for (const [name, s] of Object.entries(services)) {
      for (const mount of mountsOf(s)) {
        if (mount.kind === 'volume') {
          expect(mount.source, `${name}: ${mount.target} is a named volume, not an anonymous one`).not.toBe('');
          expect(declared, `${name}: volume ${mount.source} is declared under top-level volumes`).toContain(mount.source);
        } else {
          expect(existsSync(path.resolve(ROOT, mount.source)), `${name}: bind source ${mount.source} exists`).toBe(true);
          expect(mount.readOnly, `${name}: ${mount.source} is mounted read-only`).toBe(true);
        }
      }
    }
    const pg = Object.values(services).find((s) => splitImage(s.image!).repository === 'postgres' && !isOneShot(s))!;
    const pgData = environmentOf(pg).PGDATA ?? '/var/lib/postgresql/data';
    expect(
      mountsOf(pg).some((m) => m.kind === 'volume' && isInside(pgData, m.target)),
      `PostgreSQL's data directory ${pgData} is on a named volume`,
    ).toBe(true);
  });

  it("mounts each agent's agent.yaml, which the real parser accepts, with its root on the agent's own volume", () => {
    const volumes = new Map<string, string>();
    for (const [name, s] of agents) {
      const args = argv(s.command);
      const configs = args.flatMap((a, i) => (a === '--config' ? [args[i + 1]] : []));
      expect(configs.length, `${name} passes --config`).toBeGreaterThanOrEqual(1);
      for (const containerPath of configs) {
        const hostFile = hostPathOf(s, containerPath);
        expect(hostFile, `${name}: ${containerPath} comes from a bind mount`).not.toBeNull();
        expect(isInside(path.relative(ROOT, hostFile!), 'deploy'), `${name}: its agent.yaml lives under deploy/`).toBe(true);
        const config = parseAgentConfigText(readFileSync(hostFile!, 'utf8'), path.relative(ROOT, hostFile!));
        const stateVolume = mountsOf(s).find((m) => m.kind === 'volume' && isInside(config.root, m.target));
        expect(stateVolume, `${name}: root ${config.root} is on a named volume`).toBeDefined();
        expect(
          mountsOf(s).some((m) => m.kind === 'bind' && isInside(config.root, m.target)),
          `${name}: no bind mount shadows ${config.root}`,
        ).toBe(false);
        expect(volumes.get(stateVolume!.source), `volume ${stateVolume!.source} belongs to one agent`).toBeUndefined();
        volumes.set(stateVolume!.source, name);
      }
    }
  });

  it('gives the controller a fleet whose desired state validates and whose artifacts resolve, for the agents too', async () => {
    expect(controllers.length).toBeGreaterThanOrEqual(1);
    for (const [name, s] of controllers) {
      const args = argv(s.command);
      const fleetInContainer = args[args.indexOf('--fleet') + 1];
      expect(args.includes('--fleet') && fleetInContainer, `${name} passes --fleet`).toBeTruthy();
      const fleetDir = hostPathOf(s, fleetInContainer);
      expect(fleetDir, `${name}: ${fleetInContainer} is a bind mount`).not.toBeNull();
      const nodesDir = path.join(fleetDir!, 'desired', 'nodes');
      const files = readdirSync(nodesDir).filter((f) => f.endsWith('.yaml'));
      expect(files.length, `${nodesDir} holds desired state`).toBeGreaterThanOrEqual(1);

      const authority = new DesiredStateAuthority(fleetDir!);
      for (const file of files) {
        const node = file.replace(/\.yaml$/, '');
        const text = readFileSync(path.join(nodesDir, file), 'utf8');
        const intent = parseDesiredStateText(
          text,
          `desired/nodes/${file}`,
          { revision: 'test', author: null, loaded_at: new Date().toISOString() },
          node,
        );
        // The controller's own read: validation plus artifact resolution against the fleet.
        const read = await authority.read(node);
        if (!read.ok) throw new Error(read.error);
        expect(read.intent.digest).toBe(intent.digest);

        const releases = Object.entries(read.intent.resources).filter(([, r]) => r.type === 'release');
        expect(releases.length, `${file} declares a release`).toBeGreaterThanOrEqual(1);
        for (const [key, spec] of releases) {
          if (spec.type !== 'release') continue;
          const location = read.intent.locations![key];
          if (/^https?:\/\//.test(location)) continue;
          // The agent verifies this digest before it unpacks anything.
          expect(sha256File(location), `${file}: resources.${key}.sha256 is the archive's`).toBe(spec.sha256);
          const entries: string[] = [];
          await tar.t({ file: location, onReadEntry: (e) => entries.push(e.path) });
          expect(entries, 'a release archive holds its files at the root').toEqual(
            expect.arrayContaining(['server.js', 'build.json']),
          );
          const extracted = mkdtempSync(path.join(os.tmpdir(), 'datum-deploy-artifact-'));
          try {
            await tar.x({ file: location, cwd: extracted });
            const build = JSON.parse(readFileSync(path.join(extracted, 'build.json'), 'utf8')) as { build: string };
            expect(build.build, `the service in ${path.basename(location)} reports build ${spec.version}`).toBe(spec.version);
          } finally {
            rmSync(extracted, { recursive: true, force: true });
          }

          // The controller hands the agent the path as the controller's container sees it.
          const inController = path.posix.join(fleetInContainer, path.relative(fleetDir!, location).split(path.sep).join('/'));
          const agent = agents.find(([, a]) => {
            const cfg = argv(a.command).flatMap((arg, i, all) => (arg === '--config' ? [all[i + 1]] : []))[0];
            return parseAgentConfigText(readFileSync(hostPathOf(a, cfg)!, 'utf8'), cfg).node === node;
          });
          if (!agent) continue;
          const seenByAgent = hostPathOf(agent[1], inController);
          expect(seenByAgent, `${agent[0]} mounts ${inController}`).not.toBeNull();
          expect(path.resolve(seenByAgent!)).toBe(path.resolve(location));
        }
      }
    }
    // Every compose agent serves a node the fleet declares.
    for (const [name, a] of agents) {
      const cfg = argv(a.command)[argv(a.command).indexOf('--config') + 1];
      const node = parseAgentConfigText(readFileSync(hostPathOf(a, cfg)!, 'utf8'), cfg).node;
      const fleetDir = hostPathOf(
        controllers[0][1],
        argv(controllers[0][1].command)[argv(controllers[0][1].command).indexOf('--fleet') + 1],
      )!;
      expect(
        existsSync(path.join(fleetDir, 'desired', 'nodes', `${node}.yaml`)),
        `${name}: the fleet has desired state for ${node}`,
      ).toBe(true);
    }
  });

  it('runs real datum subcommands, with options the subcommand knows', () => {
    expect(datumServices.length).toBeGreaterThanOrEqual(2);
    for (const [name, s] of datumServices) {
      const [subcommand, ...rest] = argv(s.command);
      const help = runDatum([subcommand, '--help']);
      expect(help.status, `${name}: datum ${subcommand} --help\n${help.stderr}`).toBe(0);
      expect(help.stdout, `${name}: datum ${subcommand} is a subcommand`).toContain(`Usage: datum ${subcommand} `);
      for (const option of rest.filter((a) => a.startsWith('--')))
        expect(help.stdout, `${name}: datum ${subcommand} takes ${option}`).toContain(option);
    }
    // The check can fail: an unknown subcommand has no usage of its own (the top-level help, or an error).
    const unknown = runDatum(['no-such-subcommand', '--help']);
    expect(unknown.stdout).not.toContain('Usage: datum no-such-subcommand');
    expect(runDatum(['no-such-subcommand']).status).not.toBe(0);
  });

  it('mounts one-shot scripts that exist and are valid POSIX sh, and a dynamic config the server reads', () => {
    for (const [name, s] of Object.entries(services)) {
      const script = ONE_SHOT_SCRIPT(s);
      if (!script) continue;
      expect(argv(s.entrypoint)[0], `${name} runs its script with sh (the images have no bash)`).toBe('sh');
      const hostScript = hostPathOf(s, script);
      expect(hostScript && existsSync(hostScript), `${name}: ${script} is mounted from the repository`).toBeTruthy();
      const check = spawnSync('sh', ['-n', hostScript!], { encoding: 'utf8' });
      expect(check.status, `sh -n ${hostScript}: ${check.stderr}`).toBe(0);
      expect(isOneShot(s), `${name} runs once`).toBe(true);
    }
    const temporal = Object.values(services).find((s) => splitImage(s.image!).repository === 'temporalio/server')!;
    const dynamicConfig = environmentOf(temporal).DYNAMIC_CONFIG_FILE_PATH;
    const hostFile = hostPathOf(temporal, dynamicConfig);
    expect(hostFile && existsSync(hostFile), `${dynamicConfig} is mounted`).toBeTruthy();
    const values = parseYaml(readFileSync(hostFile!, 'utf8')) as Record<string, { value: unknown; constraints?: unknown }[]>;
    for (const [key, list] of Object.entries(values)) {
      expect(Array.isArray(list) && list.every((v) => 'value' in v), `${key} is a list of {value, constraints}`).toBe(true);
    }
  });

  it('serves metrics from every Datum service on the port it exposes, with a healthcheck that reads them', () => {
    for (const [name, s] of datumServices) {
      const metrics = environmentOf(s)[METRICS_ADDRESS_ENV];
      expect(metrics, `${name} sets ${METRICS_ADDRESS_ENV} (metrics on by default in compose)`).toMatch(/^0\.0\.0\.0:\d+$/);
      const port = metrics.split(':')[1];
      expect(listensOn(s), `${name} exposes ${port}`).toContain(port);
      const test = argv(s.healthcheck?.test);
      expect(test.slice(0, 3), `${name}: a node -e healthcheck (the image has no curl)`).toEqual(['CMD', 'node', '-e']);
      expect(test[3], `${name}: the healthcheck reads its own metrics port`).toContain(`http://127.0.0.1:${port}/metrics`);
      // The script itself must at least compile (it runs for real in observability.test.ts).
      const check = spawnSync(process.execPath, ['--check', '-'], { input: test[3], encoding: 'utf8' });
      expect(check.status, `${name}: ${check.stderr}`).toBe(0);
    }
  });

  it('scrapes every Datum service with the Prometheus service, under the job names the alerts use', () => {
    const [promName, prom] = Object.entries(services).find(([, s]) => splitImage(s.image!).repository === 'prom/prometheus')!;
    const configArg = argv(prom.command).find((a) => a.startsWith('--config.file='));
    expect(configArg, `${promName} passes --config.file`).toBeDefined();
    const configFile = hostPathOf(prom, configArg!.slice('--config.file='.length));
    expect(configFile && existsSync(configFile), `${promName}: its config is mounted from the repository`).toBeTruthy();
    const config = parseYaml(readFileSync(configFile!, 'utf8')) as {
      rule_files: string[];
      scrape_configs: { job_name: string; dns_sd_configs?: { names: string[]; port: number }[] }[];
    };
    for (const rules of config.rule_files) {
      const inContainer = path.posix.resolve(path.posix.dirname(configArg!.slice('--config.file='.length)), rules);
      expect(existsSync(hostPathOf(prom, inContainer) ?? ''), `rule file ${rules} is mounted`).toBe(true);
    }
    const job = (jobName: string) => {
      const found = config.scrape_configs.find((c) => c.job_name === jobName);
      expect(found, `prometheus.yml has job ${jobName}`).toBeDefined();
      return (found!.dns_sd_configs ?? []).flatMap((d) => d.names.map((n) => ({ name: n, port: String(d.port) })));
    };
    for (const [jobName, members] of [
      ['datum-worker', controllers],
      ['datum-agent', agents],
    ] as const) {
      const scraped = job(jobName);
      for (const [name, s] of members) {
        const port = environmentOf(s)[METRICS_ADDRESS_ENV].split(':')[1];
        expect(scraped, `job ${jobName} scrapes ${name}:${port}`).toContainEqual({ name, port });
      }
      for (const target of scraped) expect(serviceNames, `job ${jobName} names service ${target.name}`).toContain(target.name);
    }
  });

  it('gives the worker a stop_grace_period that fits its shutdownGraceTime, and the agents as long', () => {
    const seconds = (d: string | undefined) => {
      const m = /^(\d+)s$/.exec(d ?? '');
      if (!m) throw new Error(`stop_grace_period ${d} is not N s`);
      return Number(m[1]);
    };
    // The grace and force times of the controller worker (src/worker/shutdown.ts) fit inside the
    // budget, with time left to close the connections and the ledger before SIGKILL.
    expect(SHUTDOWN_GRACE_TIME_MS).toBeLessThan(SHUTDOWN_FORCE_TIME_MS);
    expect(SHUTDOWN_FORCE_TIME_MS).toBeLessThanOrEqual((SHUTDOWN_BUDGET_S - 5) * 1000);
    for (const [name, s] of datumServices)
      expect(seconds(s.stop_grace_period), `${name}: stop_grace_period`).toBe(SHUTDOWN_BUDGET_S);
  });

  // The compose CLI standalone (the `docker compose` plugin's own program): `config` reads the
  // files and needs no Docker engine.
  it(`passes \`docker compose config -q\` (compose ${COMPOSE.release})`, { timeout: INSTALL_TIMEOUT_MS }, async (ctx) => {
    const compose = await toolOrSkip(ctx, 'docker-compose');
    const result = spawnSync(compose, ['--env-file', ENV_EXAMPLE, '-f', COMPOSE_FILE, 'config', '-q'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout, 'config -q prints nothing').toBe('');
  });
});

// ---------------------------------------------------------------------------------------------

interface DockerInstruction {
  keyword: string;
  args: string;
}

function parseDockerfile(text: string): {
  stages: { from: string; name: string | null; instructions: DockerInstruction[] }[];
  args: Env;
} {
  const lines = text.replace(/\\\n/g, ' ').split('\n');
  const args: Env = {};
  const stages: { from: string; name: string | null; instructions: DockerInstruction[] }[] = [];
  for (const raw of lines) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const [keyword, ...rest] = line.split(/\s+/);
    const instruction = { keyword: keyword.toUpperCase(), args: rest.join(' ') };
    if (instruction.keyword === 'ARG' && stages.length === 0) {
      const [name, value] = instruction.args.split('=');
      args[name] = value ?? '';
    } else if (instruction.keyword === 'FROM') {
      const [image, as, name] = instruction.args.split(/\s+/);
      stages.push({ from: interpolate(image, args), name: as?.toUpperCase() === 'AS' ? name : null, instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return { stages, args };
}

describe('Dockerfile', () => {
  const dockerfile = parseDockerfile(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
  const stageNames = new Set(dockerfile.stages.map((s) => s.name).filter(Boolean));
  const final = dockerfile.stages.at(-1)!;
  const all = (stage: { instructions: DockerInstruction[] }, keyword: string) =>
    stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);
  const stage = (name: string) => dockerfile.stages.find((s) => s.name === name)!;
  const baseOf = (s: { from: string }): { from: string } => (stageNames.has(s.from) ? baseOf(stage(s.from)) : s);

  it('builds from a pinned, supported Node LTS bookworm-slim image, multi-stage', () => {
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(3);
    for (const s of dockerfile.stages) {
      const { from } = baseOf(s);
      // 22 (maintenance until April 2027) or 24 (until April 2028); Node 20 ended in April 2026.
      expect(from, 'every stage starts from the pinned Node.js image').toMatch(/^node:(22|24)\.\d+\.\d+-bookworm-slim$/);
    }
  });

  it('prebuilds the workflow bundle in the build stage and points the runtime at it', () => {
    const runs = dockerfile.stages.flatMap((s) => all(s, 'RUN').map((r) => ({ stage: s.name, run: r })));
    const bundle = runs.find((r) => r.run.includes('scripts/bundle-workflows.mjs'));
    expect(bundle, 'a stage runs scripts/bundle-workflows.mjs').toBeDefined();
    const out = /bundle-workflows\.mjs\s+(\S+)/.exec(bundle!.run)![1];
    expect(existsSync(path.join(ROOT, 'scripts', 'bundle-workflows.mjs'))).toBe(true);
    // Written under dist/, which the final stage copies from that stage to /app/dist.
    expect(out.startsWith('dist/')).toBe(true);
    expect(all(final, 'COPY')).toContain(`--from=${bundle!.stage} /app/dist ./dist`);
    const envs = all(final, 'ENV').join(' ');
    expect(envs, `the runtime sets ${WORKFLOW_BUNDLE_ENV}`).toContain(`${WORKFLOW_BUNDLE_ENV}=/app/${out}`);
  });

  it('compiles dist/ in a build stage and installs production dependencies with npm ci --omit=dev', () => {
    const runs = dockerfile.stages.flatMap((s) => all(s, 'RUN').map((r) => ({ stage: s.name, run: r })));
    const build = runs.find((r) => r.run.includes('node scripts/build.mjs'));
    expect(build, 'a stage runs node scripts/build.mjs').toBeDefined();
    expect(
      runs.some((r) => r.stage === build!.stage && /npm ci\b/.test(r.run)),
      'after npm ci',
    ).toBe(true);
    expect(
      runs.some((r) => /npm ci --omit=dev\b/.test(r.run)),
      'npm ci --omit=dev',
    ).toBe(true);
    const copies = all(final, 'COPY');
    expect(
      copies.some((c) => new RegExp(`--from=${build!.stage}\\s+/app/dist\\s+\\./dist`).test(c)),
      'the final stage copies the compiled dist/',
    ).toBe(true);
    for (const dir of ['bin/', 'examples/'])
      expect(
        copies.some((c) => c.startsWith(`${dir} `)),
        `the final stage copies ${dir}`,
      ).toBe(true);
    expect(all(final, 'USER').at(-1), 'runs unprivileged').toBe('node');
  });

  it('runs install scripts only for the production dependencies package.json allowScripts reviews', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; hasInstallScript?: boolean; optional?: boolean }>;
    };
    const reviewed = new Set(Object.keys(pkg.allowScripts ?? {}).map((spec) => spec.replace(/(.)@.*$/, '$1')));
    const withScripts = Object.entries(lock.packages)
      .filter(([where, p]) => where.startsWith('node_modules/') && p.hasInstallScript && !p.dev)
      .map(([where]) => where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length));
    // The image installs with --ignore-scripts and rebuilds only the allowed ones: a production
    // dependency whose script nobody reviewed would silently not run.
    for (const name of withScripts)
      expect(reviewed, `${name} has an install script: review it in package.json allowScripts`).toContain(name);
    const prodInstall = dockerfile.stages.flatMap((s) => all(s, 'RUN')).find((r) => r.includes('--omit=dev'))!;
    expect(prodInstall).toContain('--ignore-scripts');
    expect(prodInstall).toContain('allowScripts');
    expect(prodInstall).toContain('npm rebuild');
  });

  it('has ENTRYPOINT ["node", "/app/bin/datum.js"], which the image contains', () => {
    const entrypoints = dockerfile.stages.flatMap((s) => all(s, 'ENTRYPOINT'));
    expect(entrypoints).toHaveLength(1);
    expect(JSON.parse(all(final, 'ENTRYPOINT')[0])).toEqual(['node', '/app/bin/datum.js']);
    const workdir = dockerfile.stages.flatMap((s) => all(s, 'WORKDIR')).at(0);
    expect(workdir).toBe('/app');
    expect(existsSync(DATUM_BIN)).toBe(true);
    // bin/datum.js loads dist/src/cli/main.js and the worker finds Datum's package.json by name.
    expect(all(final, 'COPY').some((c) => /^package\.json\b/.test(c))).toBe(true);
  });

  it('keeps build outputs, local tools and secrets out of the build context, but not what it copies', () => {
    const ignored = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'))
      .map((l) => l.replace(/\/$/, ''));
    for (const entry of ['node_modules', '.venv', 'dist', 'test-artifacts', '.git', '.env']) expect(ignored).toContain(entry);
    const sources = dockerfile.stages
      .flatMap((s) => all(s, 'COPY'))
      .filter((c) => !c.startsWith('--from='))
      .flatMap((c) => c.split(/\s+/).slice(0, -1))
      .map((src) => src.replace(/\/$/, ''));
    expect(sources.length).toBeGreaterThan(0);
    for (const src of sources) {
      expect(ignored, `${src} is copied into the image`).not.toContain(src);
      expect(existsSync(path.join(ROOT, src)), `${src} exists`).toBe(true);
    }
  });
});

// ---------------------------------------------------------------------------------------------

const SA_SCRIPT = path.join(ROOT, 'deploy', 'temporal', 'register-search-attributes.sh');
const COMPOSE_ATTRIBUTES = () =>
  [...registeredSearchAttributes(loadCompose(parseEnvFile(readFileSync(ENV_EXAMPLE, 'utf8')))).attributes].map(
    ([n, t]) => `${n}=${t}`,
  );

function runScript(script: string, args: string[], env: Env, pathPrefix: string) {
  return spawnSync('sh', [script, ...args], {
    encoding: 'utf8',
    timeout: 90_000,
    env: { PATH: `${pathPrefix}${path.delimiter}${process.env.PATH ?? ''}`, HOME: os.tmpdir(), SETUP_SLEEP_SECONDS: '1', ...env },
  });
}

describe('deploy/temporal/register-search-attributes.sh', () => {
  // A stand-in `temporal` CLI whose answers each test chooses, for the answers a real server
  // only gives in special situations (older servers' "already exists", a server that never
  // becomes healthy).
  let stubDir: string;
  beforeAll(() => {
    stubDir = mkdtempSync(path.join(os.tmpdir(), 'datum-temporal-stub-'));
    writeFileSync(
      path.join(stubDir, 'temporal'),
      [
        '#!/bin/sh',
        'echo "$*" >> "$STUB_LOG"',
        'case "$1 $2 $3" in',
        '  "operator cluster health") [ "${STUB_HEALTH:-ok}" = ok ] && { echo SERVING; exit 0; }; echo "connection refused" >&2; exit 1 ;;',
        '  "operator namespace describe") exit 0 ;;',
        '  "operator search-attribute create")',
        '    name=$5',
        '    case " ${STUB_EXISTING:-} " in *" $name=same "*) echo "Error: unable to add search attributes: search attribute $name already exists" >&2; exit 1 ;; esac',
        '    case " ${STUB_EXISTING:-} " in *" $name=other "*) echo "Error: search attribute $name already exists and has different type Text" >&2; exit 1 ;; esac',
        '    echo "Search attributes have been added"; exit 0 ;;',
        'esac',
        'echo "stub: unexpected $*" >&2; exit 2',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
  });
  afterAll(() => rmSync(stubDir, { recursive: true, force: true }));

  const stubRun = (args: string[], env: Env = {}) => {
    const log = path.join(stubDir, `calls-${Math.random().toString(36).slice(2)}.log`);
    writeFileSync(log, '');
    const result = runScript(SA_SCRIPT, args, { STUB_LOG: log, TEMPORAL_ADDRESS: 'temporal:7233', ...env }, stubDir);
    return { ...result, calls: readFileSync(log, 'utf8').trim().split('\n').filter(Boolean) };
  };

  it('creates each attribute with its type, in the namespace of TEMPORAL_NAMESPACE', () => {
    const result = stubRun(COMPOSE_ATTRIBUTES(), { TEMPORAL_NAMESPACE: 'fleet' });
    expect(result.status, result.stderr).toBe(0);
    const creates = result.calls.filter((c) => c.startsWith('operator search-attribute create'));
    expect(creates).toEqual(
      COMPOSE_ATTRIBUTES().map(
        (spec) => `operator search-attribute create --name ${spec.split('=')[0]} --type ${spec.split('=')[1]}`,
      ),
    );
    expect(result.stdout).toContain('namespace fleet exists');
  });

  it('accepts an attribute that already exists with the same type (older servers say so)', () => {
    const result = stubRun(COMPOSE_ATTRIBUTES(), { STUB_EXISTING: 'DatumNode=same DatumConditions=same' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('DatumNode (Keyword): already registered');
  });

  it('fails, naming the fix, when an attribute exists with another type', () => {
    const result = stubRun(COMPOSE_ATTRIBUTES(), { STUB_EXISTING: 'DatumStatus=other' });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/DatumStatus already exists .* with another type than Keyword/);
    expect(result.stderr).toContain('fix:');
  });

  it('gives up after a bounded number of attempts when Temporal never answers', () => {
    const result = stubRun(COMPOSE_ATTRIBUTES(), { STUB_HEALTH: 'down', SETUP_MAX_ATTEMPTS: '2', SETUP_SLEEP_SECONDS: '0' });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('not healthy after 2 attempts');
    expect(result.calls.filter((c) => c === 'operator cluster health')).toHaveLength(2);
  });

  it('refuses arguments that are not Name=Type', () => {
    expect(stubRun([]).status).toBe(1);
    const bad = stubRun(['DatumNode']);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('is not Name=Type');
  });

  describe('against a real Temporal dev server (the pinned CLI from npm run setup)', () => {
    let env: TestWorkflowEnvironment | undefined;
    let cliDir: string | undefined;

    beforeAll(async () => {
      // Installed by `npm run setup`, which `npm test` runs first; missing, it says so and fails.
      const cli = temporalCliPath();
      installTestRuntime();
      // No search attributes at start: registering them is what this tests.
      env = await TestWorkflowEnvironment.createLocal({
        server: {
          executable: { type: 'existing-path', path: cli },
          searchAttributes: [],
          log: { format: 'pretty', level: process.env.DATUM_TEST_SERVER_LOG_LEVEL ?? 'error' },
        },
      });
      // Only the `temporal` binary on PATH, as in the admin-tools image.
      cliDir = mkdtempSync(path.join(os.tmpdir(), 'datum-temporal-cli-'));
      symlinkSync(cli, path.join(cliDir, 'temporal'));
    });

    afterAll(async () => {
      await env?.teardown();
      if (cliDir) rmSync(cliDir, { recursive: true, force: true });
    });

    it('creates the namespace and registers the attributes, idempotently, with the types of the contract', async () => {
      const namespace = 'datum-deploy-test';
      const run = () =>
        runScript(SA_SCRIPT, COMPOSE_ATTRIBUTES(), { TEMPORAL_ADDRESS: env!.address, TEMPORAL_NAMESPACE: namespace }, cliDir!);
      const first = run();
      expect(first.status, `${first.stdout}\n${first.stderr}`).toBe(0);
      expect(first.stdout).toContain(`namespace ${namespace} created`);
      const second = run();
      expect(second.status, `${second.stdout}\n${second.stderr}`).toBe(0);
      expect(second.stdout).not.toContain('created');

      const { customAttributes } = await env!.connection.operatorService.listSearchAttributes({ namespace });
      const datum = Object.fromEntries(Object.entries(customAttributes ?? {}).filter(([name]) => name.startsWith('Datum')));
      expect(datum).toEqual(
        Object.fromEntries(DATUM_SEARCH_ATTRIBUTES.map((key) => [key.name, encodeSearchAttributeIndexedValueType(key.type)])),
      );

      const conflict = runScript(
        SA_SCRIPT,
        ['DatumGeneration=Keyword'],
        { TEMPORAL_ADDRESS: env!.address, TEMPORAL_NAMESPACE: namespace },
        cliDir!,
      );
      expect(conflict.status).toBe(1);
      expect(conflict.stderr).toContain('DatumGeneration already exists');
    });
  });
});

describe('deploy/env.example', () => {
  it('is a template: placeholder passwords, and URL-safe where DATUM_LEDGER_URL embeds one', () => {
    const env = parseEnvFile(readFileSync(ENV_EXAMPLE, 'utf8'));
    for (const key of ['POSTGRES_PASSWORD', 'TEMPORAL_DB_PASSWORD', 'DATUM_DB_PASSWORD']) expect(env[key]).toMatch(/^change-me/);
    expect(encodeURIComponent(env.DATUM_DB_PASSWORD)).toBe(env.DATUM_DB_PASSWORD);
  });
});
