import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { projectRoot } from '../worker/paths';
import type { Runtime } from './runtime';

/** A package's own license files: LICENSE, LICENCE, COPYING, NOTICE, with any extension. */
const LICENSE_FILE = /^(licen[cs]e|copying|notice)/i;

/**
 * Node.js's license (the package ships its binary), then the license of every npm package
 * compiled into the agent's bundle, with its license files' text: the package redistributes
 * their code, so it carries their notices (/usr/share/doc/datum-agent/THIRD-PARTY-LICENSES).
 */
export async function thirdPartyLicenses(inputs: string[], runtime: Runtime): Promise<string> {
  const root = projectRoot();
  const packages = new Set<string>();
  for (const input of inputs) {
    const match = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input.replaceAll('\\', '/'));
    if (match) packages.add(match[1]);
  }
  const sections: string[] = [];
  for (const dir of [...packages].sort()) {
    const manifest = JSON.parse(await readFile(path.join(root, dir, 'package.json'), 'utf8')) as {
      name: string;
      version: string;
      license?: string;
    };
    const files = (await readdir(path.join(root, dir))).filter((name) => LICENSE_FILE.test(name)).sort();
    const texts = await Promise.all(files.map((name) => readFile(path.join(root, dir, name), 'utf8')));
    const body = texts.length > 0 ? texts.map((t) => t.trim()).join('\n\n') : '(the package ships no license file)';
    sections.push(`${manifest.name} ${manifest.version} (${manifest.license ?? 'license not stated'})\n\n${body}\n`);
  }
  const intro = `node is Node.js ${runtime.version}; datum-agent.js bundles the code of ${sections.length} npm packages. Their licenses follow, Node.js's first.\n`;
  return [intro, `Node.js ${runtime.version} (node)\n\n${runtime.license.trim()}\n`, ...sections].join(`\n${'='.repeat(78)}\n\n`);
}
