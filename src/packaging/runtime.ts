/*
 * The Node.js the agent runs on ships in its package, at /usr/lib/datum-agent/node: the binary
 * that runs `npm run package`, copied unchanged. A `Depends: nodejs (>= 20.10)` (package.json's
 * engines) installs nowhere most teams run their hosts: Debian 12 and Ubuntu 24.04 have Node 18,
 * so it needed a third-party repository first. What the binary needs from the system instead,
 * glibc and libstdc++, is read from it (src/packaging/shlibs.ts).
 *
 * Not a single executable application (`node --experimental-sea-config`, the blob injected into a
 * copy of node with postject), though one runs this bundle (tried with Node 20.20.2: its require()
 * reaches built-ins only, and createRequire() beside the executable loads the SDK's native
 * module): on Node 20 the unit's memory flags cannot reach it. A SEA passes every argument of its
 * command line to the program, ignores an `execArgv` in its configuration (added after Node 20,
 * nodejs/node#59314), and takes NODE_OPTIONS, which refuses --optimize-for-size,
 * --single-threaded, --no-opt and --no-maglev ("not allowed in NODE_OPTIONS"): only
 * --max-semi-space-size would apply. Measured with bench/agent-rss.mjs on 2026-12-05, such a
 * SEA of this bundle settled at 100-104 MB, the unit's command line at 86-87 MB (the shipped node
 * and the host's /usr/bin/node alike). A node binary beside the bundle takes that command line.
 */
import { readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { PackagingError } from './errors';

export interface Runtime {
  /** The node binary to ship. */
  file: string;
  /** Its version, without the v: 20.20.2. */
  version: string;
  /** Node.js's LICENSE: its own terms and those of everything built into the binary. */
  license: string;
}

/** The first line of Node.js's LICENSE file. */
const LICENSE_START = 'Node.js is licensed for use as follows:';

/** The Node.js running this, and its license text, which the package must carry with the binary. */
export async function nodeRuntime(): Promise<Runtime> {
  const file = await realpath(process.execPath);
  // Where the official tarball (and nvm, and the official Docker images, which unpack it into
  // /usr/local) puts LICENSE, and where NodeSource's and Debian's packages do.
  const prefix = path.dirname(path.dirname(file));
  const candidates = [path.join(prefix, 'LICENSE'), path.join(prefix, 'share', 'doc', 'nodejs', 'LICENSE')];
  for (const candidate of candidates) {
    const text = await readFile(candidate, 'utf8').catch(() => undefined);
    if (text?.startsWith(LICENSE_START)) return { file, version: process.versions.node, license: text };
  }
  throw new PackagingError(
    `no Node.js LICENSE beside ${file} (looked at ${candidates.join(', ')}): the package ships this node and must carry its license`,
    "run `npm run package` with Node.js installed from the nodejs.org tarball or NodeSource's package, both of which include it",
  );
}
