// What reading agent.yaml costs an agent serving N nodes (issue 33): N agent.yaml files side by
// side (agents/<node>.yaml, as `datum dev` and the bench lay them out), each read once as `datum
// agent` starts, then --rounds passes in which every node's activity reads its own again, each
// pass after a resync's pause (--pause seconds, idle and not counted). Prints one JSON line: CPU
// and wall milliseconds per read, and the agent's own counts where the build has them (parses of
// agent.yaml, root judgements, other roots compared).
//
//   node scripts/build.mjs && node bench/agent-config.mjs --nodes 1000 [--rounds 3] [--pause 6] [--dist DIR]
//
// --dist is a build's dist/ (another commit's, to compare); by default this checkout's.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '3' },
    pause: { type: 'string', default: '6' },
    dist: { type: 'string', default: path.join(root, 'dist') },
  },
});
const [n, rounds, pause] = [Number(values.nodes), Number(values.rounds), Number(values.pause)];
const require = createRequire(import.meta.url);
const config = require(path.join(path.resolve(values.dist), 'src', 'agent', 'config.js'));
const fsWing = require(path.join(path.resolve(values.dist), 'src', 'agent', 'fs', 'index.js'));
const counts = () => ({
  parses: config.agentConfigParses?.() ?? null,
  ...(fsWing.rootCheckCounts?.() ?? { judged: null, compared: null }),
});

const dir = await mkdtemp(path.join(os.tmpdir(), 'datum-bench-config-'));
try {
  const files = [];
  for (let i = 1; i <= n; i++) {
    const node = `N-${i}`;
    const nodeRoot = path.join(dir, 'nodes', node);
    await mkdir(nodeRoot, { recursive: true });
    const file = path.join(dir, 'agents', `${node}.yaml`);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, JSON.stringify({ node, root: nodeRoot, reconciliation: { mode: 'enforce' } }));
    files.push(file);
  }
  // An operator's files are older than a few seconds: let their stamps settle, as on a host.
  await new Promise((r) => setTimeout(r, 2500));
  const startCpu = process.cpuUsage();
  for (const file of files) await config.loadAgentConfig(file);
  const start = process.cpuUsage(startCpu);
  const before = counts();
  let cpuUs = 0;
  let wallMs = 0;
  for (let r = 0; r < rounds; r++) {
    await new Promise((res) => setTimeout(res, pause * 1000));
    const cpu = process.cpuUsage();
    const t = performance.now();
    for (const file of files) await config.loadAgentConfig(file);
    wallMs += performance.now() - t;
    const used = process.cpuUsage(cpu);
    cpuUs += used.user + used.system;
  }
  const after = counts();
  const delta = (k) => (after[k] === null ? null : after[k] - before[k]);
  process.stdout.write(
    `${JSON.stringify({
      nodes: n,
      rounds,
      dist: values.dist,
      start_cpu_ms: Math.round((start.user + start.system) / 1000),
      cpu_ms_per_read: +(cpuUs / 1000 / (n * rounds)).toFixed(3),
      wall_ms_per_read: +(wallMs / (n * rounds)).toFixed(3),
      reads: n * rounds,
      parses: delta('parses'),
      judged: delta('judged'),
      compared: delta('compared'),
      load: os.loadavg().map((l) => +l.toFixed(1)),
    })}\n`,
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
