#!/usr/bin/env node
// Builds the demo app's release artifact: app-<version>.tgz, a tar.gz whose root holds
// server.js and build.json (no top-level folder), plus app-<version>.tgz.sha256 (the hex digest
// desired state pins). Deterministic: fixed mtimes, sorted entries, portable headers and gzip,
// so the same version (and the same server.js) always gives the same sha256.
//
//   node scripts/build-artifact.mjs --version 7.4 [--out DIR] [--report-build X]
//
// --report-build bakes a different build string into build.json: a release that installs
// cleanly but whose service still reports the old build (the seed's probe 4).

import { createHash } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as tar from 'tar';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DEMO_APP_DIR = path.resolve(HERE, '..', 'examples', 'demo-app');
// Same rule as a release version in desired state (src/schemas/desired.ts).
const VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,62}$/;
const FIXED_MTIME = new Date('2000-01-01T00:00:00Z');

/**
 * @param {{version: string, outDir?: string, reportBuild?: string, sourceDir?: string}} options
 * @returns {Promise<{file: string, sha256: string, sha256File: string}>}
 */
export async function buildArtifact({ version, outDir = process.cwd(), reportBuild, sourceDir = DEMO_APP_DIR }) {
  if (typeof version !== 'string' || !VERSION.test(version)) {
    throw new Error(
      `--version ${JSON.stringify(version)} is not a usable release version — fix: use letters, digits, ".", "_", "+" or "-", such as 7.4`,
    );
  }
  const out = path.resolve(outDir);
  await mkdir(out, { recursive: true });
  const staging = await mkdtemp(path.join(os.tmpdir(), 'datum-artifact-'));
  try {
    await copyFile(path.join(sourceDir, 'server.js'), path.join(staging, 'server.js'));
    await writeFile(
      path.join(staging, 'build.json'),
      `${JSON.stringify({ build: reportBuild ?? version, version }, null, 2)}\n`,
      { mode: 0o644 },
    );
    const file = path.join(out, `app-${version}.tgz`);
    await tar.c({ file, cwd: staging, gzip: true, portable: true, mtime: FIXED_MTIME, noDirRecurse: true }, [
      'build.json',
      'server.js',
    ]);
    const sha256 = createHash('sha256')
      .update(await readFile(file))
      .digest('hex');
    const sha256File = `${file}.sha256`;
    await writeFile(sha256File, `${sha256}\n`);
    return { file, sha256, sha256File };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

async function main() {
  const { values } = parseArgs({
    options: { version: { type: 'string' }, out: { type: 'string' }, 'report-build': { type: 'string' } },
    strict: true,
  });
  if (!values.version) throw new Error('usage: node scripts/build-artifact.mjs --version 7.4 [--out DIR] [--report-build X]');
  const result = await buildArtifact({ version: values.version, outDir: values.out, reportBuild: values['report-build'] });
  process.stdout.write(`${result.sha256}  ${result.file}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err) => {
    process.stderr.write(`build-artifact: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
