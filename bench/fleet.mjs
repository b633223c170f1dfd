// What the bench's harnesses share: the virtual fleet they write and the percentile they report.
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const { stringify } = createRequire(import.meta.url)('yaml');
const ARTIFACT = path.join(root, 'examples', 'fleet', 'artifacts', 'app-7.3.tgz');

/** A demo service on the node's release and config: a real `node server.js` per node. */
const SERVICE = { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] };

/**
 * Writes virtual nodes at generation 1 under `dir`: each a release (the demo app 7.3), a config
 * file and a flag, its desired state in desired/nodes/, its agent.yaml in agents/ and its root in
 * nodes/<node>. The first `services` nodes also run the demo service.
 */
export async function writeFleet(dir, nodes, { policy, services = 0 }) {
  await Promise.all(['desired/nodes', 'agents', 'nodes'].map((d) => mkdir(path.join(dir, d), { recursive: true })));
  const sha = createHash('sha256')
    .update(await readFile(ARTIFACT))
    .digest('hex');
  const write = async (node, i) => {
    const resources = {
      build: { type: 'release', version: '7.3', artifact: ARTIFACT, sha256: sha },
      config: { type: 'file', path: 'etc/app/config.json', content: { workers: 8 } },
      feature: { type: 'flag', value: true },
      ...(i < services ? { app: SERVICE } : {}),
    };
    await writeFile(path.join(dir, 'desired/nodes', `${node}.yaml`), stringify({ node, generation: 1, resources, policy }));
    await writeFile(
      path.join(dir, 'agents', `${node}.yaml`),
      stringify({ node, root: path.join(dir, 'nodes', node), reconciliation: { mode: 'enforce' } }),
    );
  };
  // A few dozen files at a time: 1000 nodes at once would only queue in libuv's thread pool.
  for (let i = 0; i < nodes.length; i += 64) await Promise.all(nodes.slice(i, i + 64).map((node, j) => write(node, i + j)));
  return nodes;
}

/** The p-th percentile (nearest rank) of the non-null values, or null when there are none. */
export function pct(xs, p) {
  const s = xs.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : null;
}

/** A fleet of n virtual nodes; the first `services` run the demo service. */
export async function benchFleet(dir, n, watch, services) {
  const nodes = Array.from({ length: n }, (_, i) => `B-${String(i + 1).padStart(4, '0')}`);
  // Polling mode resyncs every 30s; watch mode relies on events with resync as the safety net.
  // conflict_window 0s: the bench's out-of-band edits are drift, not a second writer.
  const policy = {
    resync_interval: watch ? '10m' : '30s',
    node_timeout: '60s',
    observation_ttl: '120s',
    conflict_window: '0s',
    watch,
  };
  return writeFleet(dir, nodes, { policy, services });
}
