// The PostgreSQL instance a local cluster owns: its own data directory and port, started and
// stopped with pg_ctl from the Debian server binaries (installed with apt-get when missing, as
// the tests do), superuser password generated once and kept beside the data, mode 0600.
// PostgreSQL refuses to run as root; as root the instance belongs to the `postgres` user the
// Debian package creates.

import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, readdirSync, readFileSync } from 'node:fs';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ClusterError } from './errors';

const DEBIAN_ROOT = '/usr/lib/postgresql';
const RUN_AS = 'postgres';

export interface PostgresOptions {
  /** Directory of this instance (data/, server.log, password). */
  dir: string;
  port: number;
}

export interface Exec {
  code: number | null;
  output: string;
}

export function exec(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeout?: number } = {}) {
  return new Promise<Exec>((resolve) => {
    execFile(command, args, { ...options, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
      const why = error && code === null ? `${error.message}\n` : '';
      resolve({ code, output: `${why}${stdout}${stderr}` });
    });
  });
}

export const tail = (text: string, lines = 20) => text.trim().split('\n').slice(-lines).join('\n');

const executable = (file: string) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** The newest Debian /usr/lib/postgresql/<major>/bin with initdb and pg_ctl, or $DATUM_PG_BIN. */
export function findPostgresBinaries(): string | null {
  const override = process.env.DATUM_PG_BIN?.trim();
  if (override) {
    if (!executable(path.join(override, 'pg_ctl')))
      throw new ClusterError(`DATUM_PG_BIN=${override} holds no pg_ctl`, "point it at PostgreSQL's bin directory, or unset it");
    return override;
  }
  if (!existsSync(DEBIAN_ROOT)) return null;
  const majors = readdirSync(DEBIAN_ROOT)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  const found = majors
    .map((m) => path.join(DEBIAN_ROOT, m, 'bin'))
    .find((d) => executable(path.join(d, 'initdb')) && executable(path.join(d, 'pg_ctl')));
  return found ?? null;
}

/** apt-get installs the Debian PostgreSQL server (serialized, idempotent). */
export async function installPostgres(log: (line: string) => void): Promise<string> {
  const fix =
    'install the PostgreSQL server (Debian/Ubuntu: apt-get install postgresql), or set DATUM_PG_BIN to its bin directory';
  if (process.platform !== 'linux' || !existsSync('/usr/bin/apt-get'))
    throw new ClusterError(
      `PostgreSQL is not installed (no initdb/pg_ctl under ${DEBIAN_ROOT}) and this machine has no apt-get`,
      fix,
    );
  const root = process.getuid?.() === 0;
  if (!root && spawnSync('sudo', ['-n', 'true']).status !== 0)
    throw new ClusterError('PostgreSQL is not installed, and installing it needs root (not root, no passwordless sudo)', fix);
  const script = [
    'apt-get -qq -o DPkg::Lock::Timeout=300 update',
    'apt-get -qq -y -o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0 install --no-install-recommends postgresql',
  ].join(' && ');
  const shell = root ? ['sh', '-c', script] : ['sudo', '-n', 'sh', '-c', script];
  const command = existsSync('/usr/bin/flock') ? ['flock', path.join(tmpdir(), 'datum-postgres-install.lock'), ...shell] : shell;
  log('PostgreSQL is not installed; installing it with apt-get (once per machine) …');
  const result = await exec(command[0], command.slice(1), {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: 600_000,
  });
  const bin = result.code === 0 ? findPostgresBinaries() : null;
  if (!bin)
    throw new ClusterError(
      `installing PostgreSQL failed (${command.join(' ')} exited ${result.code}):\n${tail(result.output)}`,
      fix,
    );
  return bin;
}

/** One PostgreSQL instance in `dir`, on 127.0.0.1:`port`. */
export class OwnedPostgres {
  private constructor(
    readonly bin: string,
    readonly dir: string,
    readonly port: number,
    readonly password: string,
    private readonly owner: { uid: number; gid: number } | null,
  ) {}

  static async prepare(options: PostgresOptions, log: (line: string) => void): Promise<OwnedPostgres> {
    const bin = findPostgresBinaries() ?? (await installPostgres(log));
    const owner = process.getuid?.() === 0 ? serverUser() : null;
    await fs.mkdir(options.dir, { recursive: true, mode: 0o700 });
    const pwFile = path.join(options.dir, 'superuser.password');
    if (!existsSync(pwFile)) await fs.writeFile(pwFile, `${randomBytes(18).toString('base64url')}\n`, { mode: 0o600 });
    const password = (await fs.readFile(pwFile, 'utf8')).trim();
    if (owner) {
      await fs.chown(options.dir, owner.uid, owner.gid);
      await fs.chown(pwFile, owner.uid, owner.gid);
    }
    if (owner && spawnSync('runuser', ['-u', RUN_AS, '--', 'test', '-r', pwFile]).status !== 0)
      throw new ClusterError(
        `the "${RUN_AS}" user cannot reach ${options.dir} (PostgreSQL refuses to run as root, so it runs as ${RUN_AS})`,
        `let it through every parent directory (chmod o+x on each), or choose a --data directory under a world-traversable path`,
      );
    const pg = new OwnedPostgres(bin, options.dir, options.port, password, owner);
    await pg.initOnce(pwFile);
    return pg;
  }

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  get logFile(): string {
    return path.join(this.dir, 'server.log');
  }

  /** The superuser's URL (deploy/postgres/setup.sh runs as it). */
  get adminEnv(): NodeJS.ProcessEnv {
    return {
      PGHOST: '127.0.0.1',
      PGPORT: String(this.port),
      PGUSER: 'postgres',
      PGPASSWORD: this.password,
      PGDATABASE: 'postgres',
    };
  }

  private run(tool: string, args: string[]): Promise<Exec> {
    const exe = path.join(this.bin, tool);
    return this.owner
      ? exec('runuser', ['-u', RUN_AS, '--', exe, ...args], { cwd: this.dir })
      : exec(exe, args, { cwd: this.dir });
  }

  private async initOnce(pwFile: string): Promise<void> {
    if (existsSync(path.join(this.dataDir, 'PG_VERSION'))) return;
    const init = await this.run('initdb', [
      '-D',
      this.dataDir,
      '-U',
      'postgres',
      `--pwfile=${pwFile}`,
      '--auth-host=scram-sha-256',
      '--auth-local=scram-sha-256',
      '-E',
      'UTF8',
      '--locale=C',
    ]);
    if (init.code !== 0)
      throw new ClusterError(`initdb failed in ${this.dataDir}:\n${tail(init.output)}`, `remove ${this.dataDir} and start again`);
  }

  /** Starts the server and waits until it accepts connections. */
  async start(): Promise<void> {
    // Sized for a Temporal server (four services, each with its pools) plus Datum's ledger.
    const options = `-h 127.0.0.1 -p ${this.port} -k ${this.dir} -c max_connections=300 -c shared_buffers=256MB`;
    const started = await this.run('pg_ctl', ['-D', this.dataDir, '-l', this.logFile, '-w', '-t', '120', '-o', options, 'start']);
    if (started.code === 0) return;
    const serverLog = existsSync(this.logFile) ? readFileSync(this.logFile, 'utf8') : '';
    if (/could not bind|already in use/i.test(serverLog + started.output))
      throw new ClusterError(
        `PostgreSQL cannot listen on 127.0.0.1:${this.port}: the port is in use`,
        'stop what holds it, or pick another with --port-base',
      );
    throw new ClusterError(
      `PostgreSQL did not start (pg_ctl exit ${started.code}):\n${tail(started.output)}\n${tail(serverLog)}`,
      `read ${this.logFile}`,
    );
  }

  /** fast: roll back and disconnect clients; immediate: no checkpoint (like a crash, recovered at the next start). */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    if (!this.running()) return;
    const stopped = await this.run('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
    if (stopped.code !== 0 && this.running())
      throw new ClusterError(`pg_ctl stop failed:\n${tail(stopped.output)}`, `stop the postmaster in ${this.dataDir} by hand`);
  }

  async restart(): Promise<void> {
    await this.stop('fast');
    await this.start();
  }

  /** The postmaster's pid from postmaster.pid while it runs, else null. */
  pid(): number | null {
    return postmasterPid(this.dir);
  }

  running(): boolean {
    return this.pid() !== null;
  }
}

/** The postmaster's pid of the instance in `dir` (an OwnedPostgres's dir) while it runs, else null. */
export function postmasterPid(dir: string): number | null {
  const file = path.join(dir, 'data', 'postmaster.pid');
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

function serverUser(): { uid: number; gid: number } {
  const uid = spawnSync('id', ['-u', RUN_AS], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', RUN_AS], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0)
    throw new ClusterError(
      `running as root, and there is no "${RUN_AS}" user to run PostgreSQL as (it refuses root)`,
      'install the postgresql package, which creates it, or run as a normal user',
    );
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}
