// A real PostgreSQL server for tests: DATUM_TEST_PG_URL when set, otherwise a throw-away cluster
// (initdb in a temp dir, started on a free loopback port) from the Debian server binaries, which
// this helper installs with apt-get when they are missing, so a fresh CI machine needs no manual
// step. PostgreSQL refuses to run as root; as root the cluster belongs to the `postgres` user
// the Debian package creates.

import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { chown, mkdtemp, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { auditPostgresLedger } from './ledger-audit';
import { aptInstall, isExecutable, tail } from './tools';

export interface TestPostgres {
  /** A database created for this server's caller: postgres://datum:<pw>@127.0.0.1:<port>/datum_test. */
  url: string;
  /** A further, empty database on the same server, for tests that need a ledger of their own. */
  newDatabase(): Promise<string>;
  /** Stops the server and removes its directory (or, on DATUM_TEST_PG_URL, drops the databases made). */
  stop(): Promise<void>;
}

const DEBIAN_ROOT = '/usr/lib/postgresql';
const RUN_AS = 'postgres';

export async function startPostgres(): Promise<TestPostgres> {
  const external = process.env.DATUM_TEST_PG_URL?.trim();
  if (external) return await onExistingServer(external);
  const bin = findServerBinaries() ?? (await installServer());
  return await startCluster(bin);
}

// --- finding and installing the binaries -----------------------------------------------------

const hasServer = (dir: string) => isExecutable(path.join(dir, 'initdb')) && isExecutable(path.join(dir, 'pg_ctl'));

/**
 * The directory holding initdb and pg_ctl: DATUM_TEST_PG_BIN, else the newest Debian
 * /usr/lib/postgresql/<major>/bin. Not PATH: on Debian, PATH holds pg_wrapper scripts or
 * machine-local symlinks, and a fresh machine must get here through the install below.
 */
export function findServerBinaries(): string | null {
  const override = process.env.DATUM_TEST_PG_BIN;
  if (override) {
    if (!hasServer(override))
      throw new Error(
        `DATUM_TEST_PG_BIN=${override} holds no initdb and pg_ctl — fix: point it at PostgreSQL's bin directory, or unset it`,
      );
    return override;
  }
  if (!existsSync(DEBIAN_ROOT)) return null;
  const majors = readdirSync(DEBIAN_ROOT)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  for (const major of majors) {
    const dir = path.join(DEBIAN_ROOT, major, 'bin');
    if (hasServer(dir)) return dir;
  }
  return null;
}

function run(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeout?: number } = {}) {
  return new Promise<{ code: number | null; output: string }>((resolve) => {
    execFile(command, args, { ...options, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
      const why = error && code === null ? `${error.message}\n` : '';
      resolve({ code, output: `${why}${stdout}${stderr}` });
    });
  });
}

/** apt-get installs the Debian PostgreSQL server (quiet, serialized, idempotent); returns its bin directory. */
export async function installServer(): Promise<string> {
  const fix =
    'install the PostgreSQL server yourself (Debian/Ubuntu: apt-get install postgresql), or set DATUM_TEST_PG_URL=postgres://… to a server the tests may create databases on';
  await aptInstall(['postgresql'], `PostgreSQL server binaries (initdb, pg_ctl under ${DEBIAN_ROOT})`, fix);
  const bin = findServerBinaries();
  if (!bin) throw new Error(`apt-get installed postgresql but no ${DEBIAN_ROOT}/<major>/bin/initdb appeared — fix: ${fix}`);
  return bin;
}

// --- a throw-away cluster --------------------------------------------------------------------

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

async function startCluster(bin: string): Promise<TestPostgres> {
  const asRoot = process.getuid?.() === 0;
  // As root, every server command runs as the `postgres` user (which the Debian package makes).
  let owner: { uid: number; gid: number } | null = null;
  if (asRoot) {
    const uid = spawnSync('id', ['-u', RUN_AS], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', RUN_AS], { encoding: 'utf8' });
    if (uid.status !== 0 || gid.status !== 0) {
      throw new Error(
        `running as root, and there is no "${RUN_AS}" user to run PostgreSQL as (it refuses root) — fix: install the postgresql package, which creates it, or run the tests as a normal user`,
      );
    }
    owner = { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  }
  const pg = (tool: string, args: string[], cwd: string) => {
    const exe = path.join(bin, tool);
    // cwd: the server user must be able to enter it (it cannot enter /root).
    return asRoot ? run('runuser', ['-u', RUN_AS, '--', exe, ...args], { cwd }) : run(exe, args, { cwd });
  };

  const dir = await mkdtemp(path.join(tmpdir(), 'datum-pg-'));
  const data = path.join(dir, 'data');
  const log = path.join(dir, 'server.log');
  const password = randomBytes(12).toString('hex');
  const pwfile = path.join(dir, 'pwfile');
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  if (owner) {
    await chown(dir, owner.uid, owner.gid);
    await chown(pwfile, owner.uid, owner.gid);
  }

  let running = false;
  const stopNow = () => {
    // Synchronous so it also works from process.on('exit').
    if (running) {
      const exe = path.join(bin, 'pg_ctl');
      const args = ['-D', data, '-m', 'immediate', '-w', 'stop'];
      spawnSync(asRoot ? 'runuser' : exe, asRoot ? ['-u', RUN_AS, '--', exe, ...args] : args, { cwd: dir, stdio: 'ignore' });
      running = false;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  // A test process that dies without stop() must not leave a server behind.
  process.once('exit', stopNow);

  try {
    const init = await pg(
      'initdb',
      [
        '-D',
        data,
        '-U',
        'datum',
        `--pwfile=${pwfile}`,
        '--auth-host=scram-sha-256',
        '--auth-local=trust',
        '-E',
        'UTF8',
        '--locale=C',
        '--no-sync',
      ],
      dir,
    );
    if (init.code !== 0) throw new Error(`initdb failed (exit ${init.code ?? 'abnormal'}) in ${dir}:\n${tail(init.output)}`);

    // A free port can be taken between probing and binding; try a few.
    let port = 0;
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      // Durability settings off: a test server that crashes is thrown away, never recovered.
      const serverOptions = `-h 127.0.0.1 -p ${port} -k ${dir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100`;
      const start = await pg('pg_ctl', ['-D', data, '-l', log, '-w', '-t', '60', '-o', serverOptions, 'start'], dir);
      if (start.code === 0) break;
      const serverLog = existsSync(log) ? readFileSync(log, 'utf8') : '';
      if (attempt < 3 && /could not bind|already in use/i.test(serverLog)) continue;
      throw new Error(
        `pg_ctl start failed (exit ${start.code ?? 'abnormal'}) in ${dir}:\n${tail(start.output)}\n${tail(serverLog)}`,
      );
    }
    running = true;

    const base = `postgres://datum:${password}@127.0.0.1:${port}`;
    const admin = new Client({ connectionString: `${base}/postgres` });
    await admin.connect();
    let made = 0;
    const newDatabase = async () => {
      const name = `datum_test_${++made}`;
      await admin.query(`CREATE DATABASE ${name}`);
      return `${base}/${name}`;
    };
    const url = await newDatabase();
    return {
      url,
      newDatabase,
      async stop() {
        try {
          // Every ledger written on this server keeps its invariants (test/helpers/ledger-audit.ts).
          for (let n = 1; n <= made; n++) await auditPostgresLedger(`${base}/datum_test_${n}`);
        } finally {
          await admin.end().catch(() => undefined); // the server goes away next anyway
          stopNow();
          process.removeListener('exit', stopNow);
        }
      },
    };
  } catch (error) {
    stopNow();
    process.removeListener('exit', stopNow);
    throw error;
  }
}

// --- DATUM_TEST_PG_URL -----------------------------------------------------------------------

async function onExistingServer(url: string): Promise<TestPostgres> {
  const admin = new Client({ connectionString: url });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(
      `DATUM_TEST_PG_URL: cannot connect (${(error as Error).message}) — fix: start that server, correct the URL, or unset it to let the tests run their own`,
    );
  }
  const prefix = `datum_test_${process.pid}_${randomBytes(3).toString('hex')}`;
  const made: string[] = [];
  const newDatabase = async () => {
    const name = `${prefix}_${made.length + 1}`;
    await admin.query(`CREATE DATABASE ${name}`);
    made.push(name);
    const u = new URL(url);
    u.pathname = `/${name}`;
    return u.toString();
  };
  return {
    url: await newDatabase(),
    newDatabase,
    async stop() {
      try {
        // Every ledger written on this server keeps its invariants (test/helpers/ledger-audit.ts).
        for (const name of made) {
          const u = new URL(url);
          u.pathname = `/${name}`;
          await auditPostgresLedger(u.toString());
        }
      } finally {
        for (const name of made.splice(0)) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.end();
      }
    },
  };
}
