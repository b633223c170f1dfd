// `npm run package [-- --out DIR]`: the node agent as one bundled program, the Node.js it runs on
// and the Temporal SDK's native module, in a tarball (unpack at /) and in .deb and .rpm packages
// (nfpm), all holding the same files (src/packaging/layout.ts). Default DIR: dist/packages.

import { copyFile, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as tar from 'tar';
import { projectRoot } from '../worker/paths';
import { bundleAgent } from './bundle';
import { AGENT_RUNTIME, PACKAGE_NAME, debianArch, stagePackage } from './layout';
import { buildPackages, ensureNfpm, type PackageInfo } from './nfpm';
import { nodeRuntime } from './runtime';
import { systemDependencies } from './shlibs';

const say = (line: string) => process.stdout.write(`package: ${line}\n`);

export interface Packages {
  tarball: string;
  deb: string;
  rpm: string;
  /** esbuild's metafile of the bundle: what went into it (not shipped). */
  meta: string;
}

export async function packageAgent(outDir: string): Promise<Packages> {
  const root = projectRoot();
  const manifest = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as PackageInfo;
  const info: PackageInfo = { version: manifest.version, description: manifest.description, license: manifest.license };
  const nfpm = await ensureNfpm(say);
  const runtime = await nodeRuntime();
  const work = await mkdtemp(path.join(os.tmpdir(), 'datum-package-'));
  try {
    await mkdir(path.join(work, 'bundle'));
    const bundle = await bundleAgent(path.join(work, 'bundle', 'datum-agent.js'), AGENT_RUNTIME);
    say(`bundled the agent: ${bundle.inputs.length} source files into one ${mb(bundle.bytes)} program`);
    const stage = path.join(work, 'root');
    const entries = await stagePackage(stage, bundle, runtime, info.version);
    const depends = await systemDependencies(entries.flatMap((e) => (e.kind === 'file' ? [e.src] : [])));
    say(`runtime: Node.js ${runtime.version} (${runtime.file}); needs ${depends.deb.join(', ')}`);
    await mkdir(outDir, { recursive: true });
    const tarball = path.join(outDir, `${PACKAGE_NAME}-${info.version}-linux-${debianArch()}.tar.gz`);
    await tar.c({ gzip: true, cwd: stage, file: tarball, portable: true }, ['etc', 'usr']);
    const built = await buildPackages(nfpm, info, entries, depends, work, outDir);
    const meta = path.join(outDir, `${PACKAGE_NAME}-${info.version}.meta.json`);
    await copyFile(`${bundle.file}.meta.json`, meta);
    return { tarball, ...built, meta };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`;

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { out: { type: 'string' } } });
  const out = path.resolve(values.out ?? path.join(projectRoot(), 'dist', 'packages'));
  const packages = await packageAgent(out);
  for (const file of [packages.tarball, packages.deb, packages.rpm]) say(`${file} (${mb((await stat(file)).size)})`);
  return 0;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (error: unknown) => {
      process.stderr.write(`package: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
