// The programs tests run besides Datum and Temporal (promtool and a real Prometheus, the compose
// CLI, fish and zsh, systemd's tools, objdump, PostgreSQL, Chromium), installed on first use so
// that a fresh CI machine needs no manual step:
//   - from Debian's packages with apt-get, once per machine;
//   - or built with the machine's Go from the Go module proxy, where Debian has none or another
//     major version than the deploy files pin (Prometheus: bookworm ships 2.42, docker-compose.yml
//     runs v3; compose: bookworm has only the Python v1). The build lands in the machine's cache
//     (~/.cache/datum-test-tools/<module>@<version>/), once per machine and version.
// A machine where nothing can be installed (not root and no passwordless sudo, no apt-get, no Go)
// raises ToolUnavailable: in CI the test then fails with the fix; elsewhere it skips saying why
// (toolOrSkip), and the run's closing report lists the skip (test/skip-policy.ts).

import { execFile, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isCI } from '../../scripts/ci.cjs';

/** The longest a test may wait for its tools: a Go build of Prometheus takes minutes on a loaded 2-core machine. */
export const INSTALL_TIMEOUT_MS = 20 * 60_000;

/** Prometheus as docker-compose.yml runs it (prom/prometheus:v3.5.x): the Go module numbers v3.5.1 as v0.305.1. */
export const PROMETHEUS = { module: 'github.com/prometheus/prometheus', version: 'v0.305.1', release: '3.5.1' } as const;
/** The compose CLI (`docker compose`), built standalone: `config` needs no Docker engine. */
export const COMPOSE = { module: 'github.com/docker/compose/v2', version: 'v2.40.3', release: '2.40.3' } as const;

interface GoBuild {
  module: string;
  version: string;
  release: string;
  /** The main package inside the module, and the ldflags variable that carries its version. */
  pkg: string;
  versionVar: string;
}

type Source = { apt: string } | { go: GoBuild };

const systemd = { apt: 'systemd' };
const TOOLS = {
  fish: { apt: 'fish' },
  zsh: { apt: 'zsh' },
  objdump: { apt: 'binutils' },
  systemd,
  systemctl: systemd,
  'systemd-run': systemd,
  'systemd-analyze': systemd,
  'systemd-sysusers': systemd,
  'systemd-escape': systemd,
  prometheus: { go: { ...PROMETHEUS, pkg: './cmd/prometheus', versionVar: 'github.com/prometheus/common/version.Version' } },
  promtool: { go: { ...PROMETHEUS, pkg: './cmd/promtool', versionVar: 'github.com/prometheus/common/version.Version' } },
  'docker-compose': { go: { ...COMPOSE, pkg: './cmd', versionVar: 'github.com/docker/compose/v2/internal.Version' } },
} satisfies Record<string, Source>;

export type Tool = keyof typeof TOOLS;

/** Nothing can install the tool on this machine; the message says what to do instead. */
export class ToolUnavailable extends Error {
  override name = 'ToolUnavailable';
}

/** Whether `file` exists and this process may run it. */
export const isExecutable = (file: string) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** `name` on PATH, as the shell finds it; null when there is none. */
export function onPath(name: string): string | null {
  const found = spawnSync('sh', ['-c', 'command -v "$1"', 'sh', name], { encoding: 'utf8' });
  return found.status === 0 && found.stdout.trim() !== '' ? found.stdout.trim() : null;
}

/** The absolute path of `tool`, installed first if it is missing. */
export async function ensureTool(tool: Tool): Promise<string> {
  const source: Source = TOOLS[tool];
  if ('apt' in source) {
    const found = onPath(tool);
    if (found) return found;
    await aptInstall([source.apt], `${tool} (Debian package ${source.apt})`);
    const installed = onPath(tool);
    if (!installed) throw new Error(`apt-get installed ${source.apt} but \`${tool}\` is still not on PATH`);
    return installed;
  }
  return await goBuild(tool, source.go);
}

/**
 * The path of `tool`, or why it cannot be had here: outside CI only. In CI a machine that cannot
 * install it fails the test, since a skip there would hide missing coverage.
 */
export async function toolOrReason(tool: Tool): Promise<{ path: string } | { skip: string }> {
  try {
    return { path: await ensureTool(tool) };
  } catch (error) {
    if (!(error instanceof ToolUnavailable) || isCI()) throw error;
    return { skip: `not in CI, and ${error.message}` };
  }
}

/** toolOrReason inside a test: its path, or the test skips with the reason (outside CI only). */
export async function toolOrSkip(ctx: { skip: (condition: boolean, note: string) => void }, tool: Tool): Promise<string> {
  const found = await toolOrReason(tool);
  ctx.skip('skip' in found, 'skip' in found ? found.skip : '');
  return (found as { path: string }).path;
}

// --- Debian packages -------------------------------------------------------------------------

const APT_LOCK = 'datum-test-apt.lock';

function run(command: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string) {
  return new Promise<{ code: number | null; output: string }>((resolve) => {
    execFile(
      command,
      args,
      { env, cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: INSTALL_TIMEOUT_MS },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
        resolve({ code, output: `${error && code === null ? `${error.message}\n` : ''}${stdout}${stderr}` });
      },
    );
  });
}

/** The last `lines` of a program's output, where its error is. */
export const tail = (text: string, lines = 30) => text.trim().split('\n').slice(-lines).join('\n');

/**
 * apt-get installs `packages` (quiet unless it fails, without recommends). Root, or passwordless
 * sudo; flock serializes the test files that install at once, and apt's lock timeout waits for
 * any other apt user of the machine.
 */
export async function aptInstall(
  packages: string[],
  what: string,
  fix = `install it yourself (Debian/Ubuntu: apt-get install ${packages.join(' ')})`,
): Promise<void> {
  if (process.platform !== 'linux' || !existsSync('/usr/bin/apt-get'))
    throw new ToolUnavailable(`${what} is missing, and this machine has no apt-get to install it — fix: ${fix}`);
  const root = process.getuid?.() === 0;
  if (!root && spawnSync('sudo', ['-n', 'true']).status !== 0)
    throw new ToolUnavailable(`${what} is missing, and installing it needs root (not root, no passwordless sudo) — fix: ${fix}`);
  const script = [
    'apt-get -qq -o DPkg::Lock::Timeout=300 update',
    `apt-get -qq -y -o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0 install --no-install-recommends ${packages.join(' ')}`,
  ].join(' && ');
  const shell = root ? ['sh', '-c', script] : ['sudo', '-n', 'sh', '-c', script];
  const command = existsSync('/usr/bin/flock') ? ['flock', path.join(os.tmpdir(), APT_LOCK), ...shell] : shell;
  const started = Date.now();
  console.log(`test tools: ${what} missing; installing with apt-get (once per machine) …`);
  const result = await run(command[0], command.slice(1), { ...process.env, DEBIAN_FRONTEND: 'noninteractive' });
  if (result.code !== 0)
    throw new Error(
      `installing ${what} failed (${command.join(' ')} exited ${result.code ?? 'abnormally'}) — fix: ${fix}\n${tail(result.output)}`,
    );
  console.log(`test tools: installed ${packages.join(' ')} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

// --- Go builds -------------------------------------------------------------------------------

/** Where built tools are kept: the machine's cache, so a fresh clone on the same machine reuses them. */
function cacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'datum-test-tools');
}

/**
 * Builds `tool` from its module at the pinned version, in the module's own directory so that its
 * go.mod (replace directives included) decides, as `go install module@version` would refuse to.
 * Two test files building at once each write their own temporary file and rename it into place.
 */
async function goBuild(tool: string, build: GoBuild): Promise<string> {
  const dir = path.join(cacheDir(), `${build.module.replaceAll('/', '_')}@${build.version}`);
  const binary = path.join(dir, tool);
  if (isExecutable(binary)) return binary;
  const fix = `install Go 1.23 or newer (Debian bookworm's golang-go is too old), or put ${tool} ${build.release} at ${binary}`;
  if (!onPath('go'))
    throw new ToolUnavailable(`${tool} ${build.release} is not built yet and this machine has no Go to build it — fix: ${fix}`);
  const env = { ...process.env, CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=readonly -buildvcs=false' };
  const started = Date.now();
  console.log(`test tools: building ${tool} ${build.release} from ${build.module}@${build.version} (once per machine) …`);
  const download = await run('go', ['mod', 'download', '-json', `${build.module}@${build.version}`], env);
  if (download.code !== 0)
    throw new Error(
      `go mod download ${build.module}@${build.version} failed — fix: check that the Go module proxy is reachable (go env GOPROXY)\n${tail(download.output)}`,
    );
  const source = (JSON.parse(download.output) as { Dir: string }).Dir;
  await mkdir(dir, { recursive: true });
  const temp = await mkdtemp(path.join(dir, `.${tool}-`));
  try {
    const ldflags = `-s -w -X ${build.versionVar}=${build.release}`;
    const built = await run(
      'go',
      ['build', '-trimpath', `-ldflags=${ldflags}`, '-o', path.join(temp, tool), build.pkg],
      env,
      source,
    );
    if (built.code !== 0)
      throw new Error(`go build of ${tool} ${build.release} failed (in ${source}) — fix: ${fix}\n${tail(built.output)}`);
    await rename(path.join(temp, tool), binary);
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
  console.log(`test tools: built ${binary} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return binary;
}
