import { execFile } from 'node:child_process';
import { existsSync, promises as fs, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client as PgClient } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binariesDir, ensureServerBinaries } from '../../src/cluster/binaries';
import { Cluster } from '../../src/cluster/cluster';
import { ClusterError } from '../../src/cluster/errors';
import { projectRoot } from '../../src/worker/paths';

/*
 * Bad configuration of the production cluster: each gets an error that names the problem and the
 * fix, and nothing `up` started is left running after it.
 */

const run = promisify(execFile);
let base: string;
beforeAll(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-badcfg-')));
  await fs.chmod(base, 0o755); // as root, PostgreSQL runs as the postgres user, who must reach its directory
  await ensureServerBinaries();
}, 900_000);
afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

/** Processes whose command line names `dir`: what a failed `up` must not leave behind. */
function runningUnder(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(dir) && Number(pid) !== process.pid) found.push(`${pid}: ${cmd.slice(0, 120)}`);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

const portBase = () => 20_000 + 20 * Math.floor(Math.random() * 600);

async function upFails(dataDir: string, options: { portBase?: number; fleetDir?: string } = {}): Promise<ClusterError> {
  const fleetDir = options.fleetDir ?? path.join(base, 'empty-fleet');
  await fs.mkdir(path.join(fleetDir, 'agents'), { recursive: true });
  await fs.mkdir(path.join(fleetDir, 'desired', 'nodes'), { recursive: true });
  const error = await Cluster.up({ dataDir, fleetDir, workers: 1, portBase: options.portBase ?? portBase(), shards: 2 }).then(
    async (c) => {
      await c.down();
      throw new Error('up succeeded');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ClusterError);
  expect(runningUnder(dataDir)).toEqual([]);
  return error as ClusterError;
}

describe('production cluster: bad configuration', () => {
  it('a port in use: named with what it was for, and nothing starts', async () => {
    const ports = portBase();
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(ports + 3, '127.0.0.1', r));
    try {
      const error = await upFails(path.join(base, 'port'), { portBase: ports });
      expect(error.problem).toBe(`port ${ports + 3} on 127.0.0.1 (Temporal matching) is in use`);
      expect(error.fix).toMatch(/--port-base/);
    } finally {
      blocker.close();
    }
  }, 120_000);

  it('a server binary that fails its checksum is refused before it runs', async () => {
    const cache = path.join(base, 'cache');
    const copy = path.join(cache, path.basename(binariesDir()));
    await fs.cp(binariesDir(), copy, { recursive: true });
    await fs.appendFile(path.join(copy, 'bin', 'temporal-server'), 'tampered');
    const saved = process.env.DATUM_CACHE_DIR;
    process.env.DATUM_CACHE_DIR = cache;
    try {
      const error = (await ensureServerBinaries().catch((e: unknown) => e)) as ClusterError;
      expect(error).toBeInstanceOf(ClusterError);
      expect(error.problem).toMatch(/temporal-server fails its checksum: sha256 [0-9a-f]{64}, expected [0-9a-f]{64}/);
      expect(error.fix).toContain(`delete ${copy}`);
    } finally {
      if (saved === undefined) delete process.env.DATUM_CACHE_DIR;
      else process.env.DATUM_CACHE_DIR = saved;
    }
  }, 120_000);

  it('PostgreSQL missing (DATUM_PG_BIN names a directory without it)', async () => {
    const empty = path.join(base, 'no-postgres');
    await fs.mkdir(empty, { recursive: true });
    process.env.DATUM_PG_BIN = empty;
    try {
      const error = await upFails(path.join(base, 'nopg'));
      expect(error.problem).toBe(`DATUM_PG_BIN=${empty} holds no pg_ctl`);
      expect(error.fix).toMatch(/bin directory/);
    } finally {
      delete process.env.DATUM_PG_BIN;
    }
  }, 120_000);

  it('a wrong superuser password, then a schema newer than the server: each named, nothing left running', async () => {
    const dataDir = path.join(base, 'schema');
    const cluster = await Cluster.up({
      dataDir,
      fleetDir: path.join(base, 'empty-fleet'),
      workers: 0,
      portBase: portBase(),
      shards: 2,
    });
    const { databases } = cluster;
    const pgPort = cluster.pg.port;
    // A newer server upgraded the schema (as far as this build can tell).
    const db = new PgClient({
      host: '127.0.0.1',
      port: pgPort,
      user: databases.temporal.user,
      password: databases.temporal.password,
      database: 'temporal',
    });
    await db.connect();
    await db.query("UPDATE schema_version SET curr_version = '99.0' WHERE db_name = 'temporal'");
    await db.end();
    await cluster.down();
    expect(runningUnder(dataDir)).toEqual([]);

    // 1. The superuser password the cluster keeps no longer matches the server's.
    const pwFile = path.join(dataDir, 'postgres', 'superuser.password');
    const right = await fs.readFile(pwFile, 'utf8');
    await fs.writeFile(pwFile, 'not-the-password\n');
    const wrong = await upFails(dataDir, { portBase: cluster.ports.frontend });
    expect(wrong.problem).toMatch(/creating the roles and databases failed/);
    expect(wrong.problem).toMatch(/password authentication failed for user "postgres"/);
    expect(wrong.fix).toMatch(/superuser password/);
    await fs.writeFile(pwFile, right);

    // 2. The schema is newer than this server.
    const newer = await upFails(dataDir, { portBase: cluster.ports.frontend });
    expect(newer.problem).toMatch(/^database temporal is at schema version 99\.0, and Temporal 1\.32\.2 needs \d+\.\d+$/);
    expect(newer.fix).toMatch(/a newer Temporal server upgraded this database/);
  }, 300_000);

  it('the command line: a port base too high for Temporal, an unknown command, and down with nothing running', async () => {
    const main = path.join(projectRoot(), 'dist', 'src', 'cluster', 'main.js');
    const high = await run(process.execPath, [main, 'up', '--port-base', '40000']).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(high).toMatchObject({ code: 2 });
    expect((high as { stderr: string }).stderr).toMatch(/--port-base 40000 is not a whole number from 1024 to 32757 — fix:/);
    const unknown = await run(process.execPath, [main, 'sideways']).catch((e: { code: number; stderr: string }) => e);
    expect(unknown).toMatchObject({ code: 2 });
    expect((unknown as { stderr: string }).stderr).toMatch(/unknown command "sideways" — fix: use up, down, status or build/);
    const down = await run(process.execPath, [main, 'down', '--data', path.join(base, 'never-up')]);
    expect(down.stdout).toMatch(/nothing to stop/);
    expect(existsSync(path.join(base, 'never-up', 'cluster.json'))).toBe(false);
  }, 60_000);
});
