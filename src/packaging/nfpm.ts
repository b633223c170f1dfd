/*
 * nfpm (github.com/goreleaser/nfpm) builds the agent's .deb and .rpm without dpkg or rpmbuild.
 * It is built once per machine from the Go module proxy into the same cache as the Temporal
 * server (src/cluster/binaries.ts: ~/.cache/datum or $DATUM_CACHE_DIR), with the same pinned
 * toolchain, reproducibly, so its digest is known and checked at every use.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { GO_TOOLCHAIN, cacheRoot, findGo, runGo, sha256File, withBuildLock } from '../cluster/binaries';
import { PackagingError } from './errors';
import { PACKAGE_NAME, debianArch, type Entry } from './layout';
import type { SystemDependencies } from './shlibs';

export const NFPM_VERSION = '2.45.2';
const NFPM_PACKAGE = 'github.com/goreleaser/nfpm/v2/cmd/nfpm';

/** SHA-256 of the reproducible build (GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0 -trimpath) per platform. */
const PINNED_DIGESTS: Record<string, string> = {
  'linux/amd64': '9319a840c5046ff82c990a1b6e528c93d5829603973c0692a63ed18a4a2374a6',
};

const platform = () => `${process.platform}/${process.arch === 'x64' ? 'amd64' : process.arch}`;

/** The verified nfpm binary, built first (a few minutes, once per machine) when the cache has none. */
export async function ensureNfpm(log: (line: string) => void = () => undefined): Promise<string> {
  const dir = path.join(cacheRoot(), `nfpm-${NFPM_VERSION}`);
  const bin = path.join(dir, 'nfpm');
  if (!existsSync(bin)) {
    await withBuildLock(dir, async () => {
      if (!existsSync(bin)) await buildNfpm(dir, log);
    });
  }
  const expected = PINNED_DIGESTS[platform()] ?? (await fs.readFile(path.join(dir, 'sha256'), 'utf8')).trim();
  const digest = await sha256File(bin);
  if (digest !== expected)
    throw new PackagingError(
      `${bin} fails its checksum: sha256 ${digest}, expected ${expected} (nfpm ${NFPM_VERSION}, ${platform()})`,
      `delete ${dir} and run \`npm run package\` again to build it from the module proxy`,
    );
  return bin;
}

/** Builds into a directory beside the cache and renames it in place: a killed build leaves nothing half-made. */
async function buildNfpm(dir: string, log: (line: string) => void): Promise<void> {
  const work = `${dir}.build-${process.pid}`;
  await fs.rm(work, { recursive: true, force: true });
  await fs.mkdir(work, { recursive: true });
  const env = { ...process.env, GOTOOLCHAIN: GO_TOOLCHAIN, CGO_ENABLED: '0', GOFLAGS: '-trimpath', GOBIN: work };
  log(`building nfpm ${NFPM_VERSION} with ${GO_TOOLCHAIN} into ${dir} (once per machine; a few minutes) …`);
  runGo(findGo(), ['install', `${NFPM_PACKAGE}@v${NFPM_VERSION}`], env, false, 'run `npm run package` again');
  await fs.writeFile(path.join(work, 'sha256'), `${await sha256File(path.join(work, 'nfpm'))}\n`);
  await fs.rm(dir, { recursive: true, force: true });
  await fs.rename(work, dir);
}

/** Creates the datum user (sysusers.d) and makes systemd read the unit; nothing else. */
const POSTINSTALL = `#!/bin/sh
set -e
if command -v systemd-sysusers >/dev/null 2>&1; then systemd-sysusers datum.conf; fi
if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
`;
/** systemd forgets the removed unit. The datum user stays: files on the host may still be its. */
const POSTREMOVE = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
`;

export interface PackageInfo {
  version: string;
  description: string;
  license: string;
}

/** nfpm's configuration for the staged entries (src/packaging/layout.ts). */
export function nfpmConfig(
  info: PackageInfo,
  entries: Entry[],
  depends: SystemDependencies,
  scriptsDir: string,
): Record<string, unknown> {
  const contents = entries.map((e) => {
    if (e.kind === 'symlink') return { src: e.target, dst: e.dst, type: 'symlink' };
    const file_info = { mode: e.mode, owner: 'root', group: 'root' };
    if (e.kind === 'dir') return { dst: e.dst, type: 'dir', file_info };
    return { src: e.src, dst: e.dst, ...(e.kind === 'config' ? { type: 'config|noreplace' } : {}), file_info };
  });
  return {
    name: PACKAGE_NAME,
    arch: debianArch(),
    platform: 'linux',
    version: info.version,
    release: '1',
    section: 'admin',
    priority: 'optional',
    maintainer: 'Datum maintainers <datum@localhost>',
    vendor: 'Datum',
    // The first line is the synopsis package managers list; the rest, the long description.
    description: `Datum node agent\n${info.description}\nThis is the node agent (datum-agent@.service, one instance per node): one bundled Node.js program, the Node.js runtime it runs on and the Temporal SDK's native module.`,
    license: info.license,
    // The shared libraries the runtime and the native module need (src/packaging/shlibs.ts); no
    // nodejs: the package ships its own.
    depends: depends.deb,
    overrides: { rpm: { depends: depends.rpm } },
    contents,
    scripts: { postinstall: path.join(scriptsDir, 'postinstall.sh'), postremove: path.join(scriptsDir, 'postremove.sh') },
    // gzip, which any reader has (the test reads both with node:zlib).
    deb: { compression: 'gzip' },
    rpm: { compression: 'gzip', summary: 'Datum node agent' },
  };
}

/** Builds the .deb and the .rpm into `outDir`; their paths. */
export async function buildPackages(
  nfpm: string,
  info: PackageInfo,
  entries: Entry[],
  depends: SystemDependencies,
  work: string,
  outDir: string,
) {
  await fs.writeFile(path.join(work, 'postinstall.sh'), POSTINSTALL, { mode: 0o755 });
  await fs.writeFile(path.join(work, 'postremove.sh'), POSTREMOVE, { mode: 0o755 });
  const config = path.join(work, 'nfpm.yaml');
  await fs.writeFile(config, stringify(nfpmConfig(info, entries, depends, work)));
  const built: Record<'deb' | 'rpm', string> = { deb: '', rpm: '' };
  for (const packager of ['deb', 'rpm'] as const) {
    const target = path.join(work, packager);
    await fs.mkdir(target);
    runTool(nfpm, ['package', '--config', config, '--packager', packager, '--target', target]);
    const [name] = await fs.readdir(target);
    built[packager] = path.join(outDir, name);
    await fs.rename(path.join(target, name), built[packager]);
  }
  return built;
}

function runTool(bin: string, args: string[]): void {
  const result = spawnSync(bin, args, { encoding: 'utf8' });
  if (result.status !== 0)
    throw new PackagingError(
      `\`nfpm ${args.join(' ')}\` failed (exit ${result.status ?? result.signal}): ${`${result.stdout}${result.stderr}`.trim()}`,
      'fix what nfpm names above (a staged file missing, or a field it refuses), then run `npm run package` again',
    );
}
