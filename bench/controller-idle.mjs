#!/usr/bin/env node
// The resident memory of a `datum worker` that runs no loop yet (issue 19's idle target: ≤ 200 MB).
// On a dev server, it starts the controller on an empty fleet and samples its RSS once a second:
// the peak (VmHWM, while the worker starts) and the settled figure (the median of the last ten
// samples). Variants, each in a fresh worker process on the same server:
//   - bundling: as `npm start` and a checkout run it, webpack bundles the workflow code at start;
//   - prebuilt: as the image runs it, DATUM_WORKFLOW_BUNDLE names a bundle made ahead of time
//               (scripts/bundle-workflows.mjs, src/worker/bundle.ts).
//
//   node bench/controller-idle.mjs [--variants bundling,prebuilt] [--seconds 60]
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { start, startServer } from './servers.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const VARIANTS = ['bundling', 'prebuilt'];

const { values } = parseArgs({
  options: { variants: { type: 'string', default: VARIANTS.join(',') }, seconds: { type: 'string', default: '60' } },
});
const variants = values.variants.split(',');
for (const v of variants)
  if (!VARIANTS.includes(v)) throw new Error(`--variants: unknown ${v}; choose from ${VARIANTS.join(', ')}`);
const seconds = Number(values.seconds);
if (!Number.isInteger(seconds) || seconds < 15)
  throw new Error(`--seconds: ${values.seconds} is not a whole number of 15 or more`);

async function memory(pid) {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const mb = (key) => Math.round(Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? 0) / 1024);
  return { rss: mb('VmRSS'), peak: mb('VmHWM') };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(variant, dir, logs, address) {
  const fleet = path.join(dir, `fleet-${variant}`);
  for (const sub of ['desired/nodes', 'agents', 'artifacts']) await mkdir(path.join(fleet, sub), { recursive: true });
  const env = { ...process.env };
  delete env.DATUM_WORKFLOW_BUNDLE;
  if (variant === 'prebuilt') {
    const { writeWorkflowBundles } = require(path.join(root, 'dist', 'src', 'worker', 'bundle.js'));
    env.DATUM_WORKFLOW_BUNDLE = path.join(dir, 'workflows.js');
    await writeWorkflowBundles(env.DATUM_WORKFLOW_BUNDLE);
  }
  const args = [path.join(root, 'bin', 'datum.js'), 'worker', '--address', address, '--fleet', fleet];
  args.push('--data', path.join(dir, `data-${variant}`), '--log-level', 'warn');
  const worker = start(`worker-${variant}`, process.execPath, args, logs, env);
  const samples = [];
  try {
    for (let s = 0; s < seconds; s++) {
      await sleep(1000);
      if (worker.exitCode !== null) throw new Error(`datum worker (${variant}) exited ${worker.exitCode}: ${worker.output()}`);
      samples.push(await memory(worker.pid));
    }
  } finally {
    worker.kill('SIGTERM');
    await worker.exited;
  }
  const last = samples.slice(-10).map((x) => x.rss);
  return { variant, settled_rss_mb: median(last), peak_rss_mb: samples.at(-1).peak, samples_mb: samples.map((x) => x.rss) };
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'datum-controller-idle-'));
const logs = path.join(dir, 'logs');
await mkdir(logs);
const server = await startServer('dev', dir, logs);
const rows = [];
try {
  for (const v of variants) {
    const row = await measure(v, dir, logs, server.address);
    console.error(`controller-idle: ${v}: settled ${row.settled_rss_mb} MB, peak ${row.peak_rss_mb} MB`);
    rows.push(row);
  }
} finally {
  await server.stop();
}
await rm(dir, { recursive: true, force: true });
const date = new Date().toISOString();
const file = path.join(root, 'bench', 'results', `${date.slice(0, 10)}-controller-idle.json`);
await writeFile(file, `${JSON.stringify({ date, node: process.version, seconds, rows }, null, 2)}\n`);
console.log(`| variant | settled RSS MB | peak RSS MB |\n| --- | --- | --- |`);
for (const r of rows) console.log(`| ${r.variant} | ${r.settled_rss_mb} | ${r.peak_rss_mb} |`);
console.error(`controller-idle: wrote ${path.relative(root, file)}`);
