// The pinned Temporal server and its SQL tool, built once from the Go module proxy and cached
// outside the checkout, so every clone on a machine shares one build (about 6–10 minutes on two
// cores) and `npm run cluster` or the production tests start in seconds after that.
//
// The build is reproducible (-trimpath, CGO off, a pinned toolchain), so the binaries have known
// SHA-256 digests on the platform the pins were taken on; every use verifies them, and a binary
// that fails its digest is refused rather than run.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, promises as fs } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { ClusterError } from './errors';

/** The server version: the one `docker-compose.yml` pins as `temporalio/server:1.32.2`. */
export const TEMPORAL_SERVER_VERSION = '1.32.2';
/** The server module needs a newer Go than many machines have; GOTOOLCHAIN fetches this one from the module proxy. */
export const GO_TOOLCHAIN = 'go1.27.3';
const MODULE = 'go.temporal.io/server';
const PACKAGES = { server: `${MODULE}/cmd/server`, sql: `${MODULE}/cmd/tools/sql` } as const;

/**
 * SHA-256 of the reproducible build (GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0 -trimpath) per platform.
 * A platform without pins is verified against the digests recorded when it was built there.
 */
const PINNED_DIGESTS: Record<string, { server: string; sql: string }> = {
  'linux/amd64': {
    server: '9a58f017f661813767c9776ba618204d3ebe8b960b8bb2ce7caf695a077f95cf',
    sql: 'b22ddde2322a30d9f850d6d113072288dc3ed89ff68743aa833d286d5418549a',
  },
};

export interface ServerBinaries {
  version: string;
  dir: string;
  /** temporal-server */
  server: string;
  /** temporal-sql-tool, under the name deploy/temporal/setup-schema.sh calls it by. */
  sqlTool: string;
  /** The module's schema/postgresql/v12 (temporal/ and visibility/, each with versioned/). */
  schemaDir: string;
  /** The module's config/development-postgres12.yaml, which the cluster's config starts from. */
  baseConfig: string;
}

const MANIFEST = 'manifest.json';

interface Manifest {
  version: string;
  toolchain: string;
  platform: string;
  digests: { server: string; sql: string };
  built_at: string;
}

/** Where the build lives: $DATUM_CACHE_DIR, else $XDG_CACHE_HOME/datum, else ~/.cache/datum. */
export function cacheRoot(): string {
  const explicit = process.env.DATUM_CACHE_DIR?.trim();
  if (explicit) return path.resolve(explicit);
  const xdg = process.env.XDG_CACHE_HOME?.trim();
  return path.join(xdg ? path.resolve(xdg) : path.join(homedir(), '.cache'), 'datum');
}

export function binariesDir(root = cacheRoot()): string {
  return path.join(root, `temporal-server-${TEMPORAL_SERVER_VERSION}`);
}

const platform = () => `${process.platform}/${process.arch === 'x64' ? 'amd64' : process.arch}`;

function layout(dir: string): ServerBinaries {
  return {
    version: TEMPORAL_SERVER_VERSION,
    dir,
    server: path.join(dir, 'bin', 'temporal-server'),
    sqlTool: path.join(dir, 'bin', 'temporal-sql-tool'),
    schemaDir: path.join(dir, 'schema', 'postgresql', 'v12'),
    baseConfig: path.join(dir, 'config', 'development-postgres12.yaml'),
  };
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Where the binaries are, unchecked: for a command that runs none of them (`down`, `status`). */
export function serverBinaries(): ServerBinaries {
  return layout(binariesDir());
}

/**
 * The verified binaries, building them first when the cache has none. `log` hears the progress
 * of a build (minutes), so a caller can say why it waits.
 */
export async function ensureServerBinaries(
  options: { log?: (line: string) => void; rebuild?: boolean } = {},
): Promise<ServerBinaries> {
  const dir = binariesDir();
  const bins = layout(dir);
  if (options.rebuild || !existsSync(path.join(dir, MANIFEST))) {
    await withBuildLock(dir, async () => {
      if (options.rebuild) await fs.rm(dir, { recursive: true, force: true });
      // Another process may have built it while this one waited for the lock.
      if (!existsSync(path.join(dir, MANIFEST))) await build(dir, options.log ?? (() => undefined));
    });
  }
  await verify(bins);
  return bins;
}

/**
 * One build at a time per machine: a lock directory holding the builder's pid; a dead builder's
 * lock is taken over. Also for the packaging tool (src/packaging/nfpm.ts), cached the same way.
 */
export async function withBuildLock(dir: string, work: () => Promise<void>): Promise<void> {
  const lock = `${dir}.lock`;
  await fs.mkdir(path.dirname(dir), { recursive: true });
  for (;;) {
    try {
      await fs.mkdir(lock);
      await fs.writeFile(path.join(lock, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(await fs.readFile(path.join(lock, 'pid'), 'utf8').catch(() => '0'));
      if (holder > 0 && !running(holder)) await fs.rm(lock, { recursive: true, force: true });
      else await new Promise((r) => setTimeout(r, 2_000));
    }
  }
  try {
    await work();
  } finally {
    await fs.rm(lock, { recursive: true, force: true });
  }
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Checks both binaries against the pins (or the build's own record) and the schema files' presence. */
export async function verify(bins: ServerBinaries): Promise<void> {
  const manifest = await readManifest(bins.dir);
  const expected = PINNED_DIGESTS[manifest.platform] ?? manifest.digests;
  const rebuild = `delete ${bins.dir} and run \`npm run cluster -- build\` to build it again from the module proxy`;
  for (const [name, file] of [
    ['server', bins.server],
    ['sql', bins.sqlTool],
  ] as const) {
    if (!existsSync(file)) throw new ClusterError(`${file} is missing from the server build`, rebuild);
    const digest = await sha256File(file);
    if (digest !== expected[name])
      throw new ClusterError(
        `${file} fails its checksum: sha256 ${digest}, expected ${expected[name]} (Temporal ${bins.version}, ${manifest.platform}) — the file was changed after it was built, or is not the pinned build`,
        rebuild,
      );
  }
  for (const needed of [
    path.join(bins.schemaDir, 'temporal', 'versioned'),
    path.join(bins.schemaDir, 'visibility', 'versioned'),
    bins.baseConfig,
  ]) {
    if (!existsSync(needed)) throw new ClusterError(`${needed} is missing from the server build`, rebuild);
  }
}

async function readManifest(dir: string): Promise<Manifest> {
  try {
    return JSON.parse(await fs.readFile(path.join(dir, MANIFEST), 'utf8')) as Manifest;
  } catch (error) {
    throw new ClusterError(
      `the server build in ${dir} has no readable ${MANIFEST} (${(error as Error).message})`,
      `delete ${dir} and run \`npm run cluster -- build\``,
    );
  }
}

/** Builds into a temporary directory beside the cache and renames it in place, so a killed build leaves nothing half-made. */
async function build(dir: string, log: (line: string) => void): Promise<void> {
  const go = findGo();
  await fs.mkdir(path.dirname(dir), { recursive: true });
  const work = `${dir}.build-${process.pid}`;
  await fs.rm(work, { recursive: true, force: true });
  const bins = layout(work);
  await fs.mkdir(path.join(work, 'bin'), { recursive: true });
  const env = {
    ...process.env,
    GOTOOLCHAIN: GO_TOOLCHAIN,
    CGO_ENABLED: '0',
    GOFLAGS: '-trimpath',
    GOBIN: path.join(work, 'bin'),
  };
  const started = Date.now();
  log(
    `building Temporal server ${TEMPORAL_SERVER_VERSION} with ${GO_TOOLCHAIN} into ${dir} (once per machine; about 6–10 minutes on two cores) …`,
  );
  const at = `@v${TEMPORAL_SERVER_VERSION}`;
  runGo(go, ['install', `${PACKAGES.server}${at}`, `${PACKAGES.sql}${at}`], env);
  await fs.rename(path.join(work, 'bin', 'server'), bins.server);
  await fs.rename(path.join(work, 'bin', 'sql'), bins.sqlTool);
  // The schema files and the sample config come from the same module version, out of the module cache.
  const moduleDir = runGo(go, ['mod', 'download', '-json', `${MODULE}${at}`], env, true);
  const source = (JSON.parse(moduleDir) as { Dir?: string }).Dir;
  if (!source || !existsSync(source))
    throw new ClusterError(`go mod download gave no directory for ${MODULE}${at}`, 'check GOPROXY and GOMODCACHE');
  await fs.cp(path.join(source, 'schema', 'postgresql', 'v12'), bins.schemaDir, { recursive: true });
  await fs.mkdir(path.dirname(bins.baseConfig), { recursive: true });
  await fs.copyFile(path.join(source, 'config', 'development-postgres12.yaml'), bins.baseConfig);
  await makeWritable(work); // the module cache is read-only; the copies need not be
  const manifest: Manifest = {
    version: TEMPORAL_SERVER_VERSION,
    toolchain: GO_TOOLCHAIN,
    platform: platform(),
    digests: { server: await sha256File(bins.server), sql: await sha256File(bins.sqlTool) },
    built_at: new Date().toISOString(),
  };
  await fs.writeFile(path.join(work, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  await fs.rm(dir, { recursive: true, force: true });
  await fs.rename(work, dir);
  log(`built Temporal server ${TEMPORAL_SERVER_VERSION} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

async function makeWritable(dir: string): Promise<void> {
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    await fs.chmod(file, entry.isDirectory() ? 0o755 : (await fs.stat(file)).mode | 0o600);
  }
}

/** A Go to build with: any from 1.21, which fetches the pinned toolchain (GOTOOLCHAIN) itself. */
export function findGo(): string {
  const explicit = process.env.DATUM_GO?.trim();
  const candidates = [explicit, 'go', '/usr/local/go/bin/go', path.join(homedir(), 'go', 'bin', 'go')].filter(
    Boolean,
  ) as string[];
  for (const go of candidates) {
    if (spawnSync(go, ['version'], { stdio: 'ignore' }).status === 0) return go;
  }
  throw new ClusterError(
    `building the Temporal server and the packaging tool needs Go (any version from 1.21: it fetches ${GO_TOOLCHAIN} itself), and none was found on PATH or in /usr/local/go`,
    'install Go from https://go.dev/dl/ (or your package manager), or set DATUM_GO to its binary',
  );
}

/** Runs `go ARGS…`; its stdout when `capture`. A failure names the command, its output's tail and `retry`. */
export function runGo(
  go: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  capture = false,
  retry = 'run `npm run cluster -- build` again',
): string {
  const result = spawnSync(go, args, { env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.status !== 0) {
    const output = `${result.stdout ?? ''}\n${result.stderr ?? ''}`.trim().split('\n').slice(-30).join('\n');
    throw new ClusterError(
      `\`go ${args.join(' ')}\` failed (exit ${result.status ?? result.signal}):\n${output}`,
      `check that the Go module proxy is reachable (GOPROXY) and the disk has a few GB free, then ${retry}`,
    );
  }
  return capture ? result.stdout : '';
}
