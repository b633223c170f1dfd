/*
 * What the agent's packages install, and where: one list, from which the staged tree, the
 * tarball and nfpm's contents (deb, rpm) are all made, so the three hold the same files.
 *
 *   /usr/bin/datum-agent                              → ../lib/datum-agent/datum-agent.js
 *   /usr/lib/datum-agent/node                         the Node.js it runs on (src/packaging/runtime.ts)
 *   /usr/lib/datum-agent/datum-agent.js               the bundled agent (src/packaging/bundle.ts),
 *                                                     whose #! line names that node
 *   /usr/lib/datum-agent/package.json                 Datum's name and version (datum-agent --version)
 *   /usr/lib/datum-agent/releases/<target>/index.node the Temporal SDK's native module, where
 *                                                     @temporalio/core-bridge looks for it: beside its
 *                                                     own code, which is now the bundle
 *   /usr/lib/systemd/system/datum-agent@.service      deploy/systemd
 *   /usr/lib/sysusers.d/datum.conf                    deploy/systemd/datum.sysusers
 *   /etc/datum/, /etc/datum/agents/                   the agents' configuration (one <node>.yaml each)
 *   /etc/datum/temporal.env.example                   the Temporal connection, to copy to temporal.env
 *   /usr/share/doc/datum-agent/                       README.md, THIRD-PARTY-LICENSES (Node.js's and
 *                                                     the bundled npm packages')
 */
import { chmod, copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { projectRoot } from '../worker/paths';
import type { AgentBundle } from './bundle';
import { PackagingError } from './errors';
import { thirdPartyLicenses } from './licenses';
import type { Runtime } from './runtime';

export const PACKAGE_NAME = 'datum-agent';
export const AGENT_DIR = '/usr/lib/datum-agent';
export const AGENT_PROGRAM = `${AGENT_DIR}/datum-agent.js`;
export const AGENT_RUNTIME = `${AGENT_DIR}/node`;

/** One thing the package installs. `src` is the staged file it is made from. */
export type Entry =
  | { kind: 'file' | 'config'; dst: string; mode: number; src: string }
  | { kind: 'dir'; dst: string; mode: number }
  | { kind: 'symlink'; dst: string; target: string };

/** Debian's name of this machine's architecture; the native module is this machine's. */
export function debianArch(arch = process.arch): string {
  const names: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };
  const name = names[arch];
  if (!name)
    throw new PackagingError(
      `the Temporal SDK ships no native module for ${arch}`,
      'build the packages on an x64 or arm64 Linux machine',
    );
  return name;
}

/** The native module the SDK loads on this machine, and its path under the SDK's package directory. */
function nativeModule(): { file: string; relative: string } {
  const require = createRequire(path.join(projectRoot(), 'package.json'));
  const bridge = require('@temporalio/core-bridge/common') as { getPrebuiltPath: () => string };
  const file = bridge.getPrebuiltPath();
  const packageDir = path.dirname(require.resolve('@temporalio/core-bridge/package.json'));
  return { file, relative: path.relative(packageDir, file) };
}

/** Writes the package's tree under `stage` (empty) and returns its entries, parents before children. */
export async function stagePackage(stage: string, bundle: AgentBundle, runtime: Runtime, version: string): Promise<Entry[]> {
  const root = projectRoot();
  const native = nativeModule();
  const entries: Entry[] = [];
  const dir = (dst: string, mode = 0o755) => entries.push({ kind: 'dir', dst, mode });
  const file = (dst: string, src: string, mode = 0o644, kind: 'file' | 'config' = 'file') =>
    entries.push({ kind, dst, mode, src });
  const generated = path.join(stage, '.generated');
  await mkdir(generated, { recursive: true });
  const write = async (name: string, text: string) => {
    await writeFile(path.join(generated, name), text);
    return path.join(generated, name);
  };

  dir(AGENT_DIR);
  file(AGENT_RUNTIME, runtime.file, 0o755);
  file(AGENT_PROGRAM, bundle.file, 0o755);
  // projectRoot() finds Datum's package.json by name from the bundle's directory: the version.
  file(`${AGENT_DIR}/package.json`, await write('package.json', packageJson(version)));
  const nativeDirs: string[] = [];
  for (let d = path.dirname(native.relative); d !== '.'; d = path.dirname(d)) nativeDirs.unshift(d);
  for (const d of nativeDirs) dir(`${AGENT_DIR}/${d}`);
  file(`${AGENT_DIR}/${native.relative}`, native.file);
  entries.push({ kind: 'symlink', dst: '/usr/bin/datum-agent', target: `../lib/datum-agent/${path.basename(AGENT_PROGRAM)}` });

  const systemd = path.join(root, 'deploy', 'systemd');
  file('/usr/lib/systemd/system/datum-agent@.service', path.join(systemd, 'datum-agent@.service'));
  file('/usr/lib/sysusers.d/datum.conf', path.join(systemd, 'datum.sysusers'));
  dir('/etc/datum');
  dir('/etc/datum/agents');
  file('/etc/datum/temporal.env.example', path.join(systemd, 'temporal.env.example'), 0o644, 'config');
  dir(`/usr/share/doc/${PACKAGE_NAME}`);
  file(`/usr/share/doc/${PACKAGE_NAME}/README.md`, path.join(root, 'README.md'));
  file(
    `/usr/share/doc/${PACKAGE_NAME}/THIRD-PARTY-LICENSES`,
    await write('THIRD-PARTY-LICENSES', await thirdPartyLicenses(bundle.inputs, runtime)),
  );

  for (const entry of entries) await place(stage, entry);
  return entries.map((e) => (e.kind === 'file' || e.kind === 'config' ? { ...e, src: path.join(stage, e.dst) } : e));
}

function packageJson(version: string): string {
  const manifest = { name: 'datum', version, private: true, description: 'Datum node agent (bundled): datum-agent --help' };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

async function place(stage: string, entry: Entry): Promise<void> {
  const target = path.join(stage, entry.dst);
  await mkdir(path.dirname(target), { recursive: true });
  if (entry.kind === 'dir') {
    await mkdir(target, { recursive: true });
    await chmod(target, entry.mode);
  } else if (entry.kind === 'symlink') {
    await symlink(entry.target, target);
  } else {
    await copyFile(entry.src, target);
    await chmod(target, entry.mode);
  }
}
