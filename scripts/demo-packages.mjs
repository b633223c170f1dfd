// The demo fleet's packages (examples/fleet/artifacts/demo-motd_<version>_all.deb), built by
// `npm run setup` with scripts/build-deb.mjs: uncompressed members, so the same bytes on every
// machine, whose sha256 examples/fleet/desired/nodes/N-26.yaml names. Git-ignored; built again
// whenever one is missing or not the bytes desired state names.

import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const ARTIFACTS = path.join(root, 'examples', 'fleet', 'artifacts');

/** What each version of the demo package installs: a message of the day the operator can read. */
export const DEMO_PACKAGES = [
  { version: '1.0-1', motd: 'Welcome to the Datum demo fleet.\n' },
  { version: '1.1-1', motd: 'Welcome to the Datum demo fleet (1.1: now with a newline at the end).\n\n' },
];

const fileOf = (version) => path.join(ARTIFACTS, `demo-motd_${version}_all.deb`);
const sha256 = (file) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** Builds the demo packages that are missing or differ from `expected` (version → sha256); returns what it did. */
export async function ensureDemoPackages(expected = {}) {
  const { buildDeb } = await import('./build-deb.mjs');
  const built = [];
  for (const p of DEMO_PACKAGES) {
    const file = fileOf(p.version);
    if (existsSync(file) && (!expected[p.version] || sha256(file) === expected[p.version])) continue;
    await buildDeb({
      name: 'demo-motd',
      version: p.version,
      outDir: ARTIFACTS,
      compress: false,
      maintainer: 'Datum demo <demo@example.invalid>',
      description: `demo-motd ${p.version}, the Datum demo fleet's message of the day`,
      files: { 'usr/share/demo-motd/motd.txt': { content: p.motd } },
    });
    built.push(p.version);
  }
  return built.length === 0 ? 'demo packages up to date' : `demo packages built (demo-motd ${built.join(', ')})`;
}
