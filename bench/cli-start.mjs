// How long `datum --help` and `datum --version` take next to a bare `node -e 0`, measured in the
// same run, interleaved (so a busy machine slows all three alike). Issue 12's target: each at most
// 2x the bare start. `npm run bench:cli [-- --runs 30]`; prints medians and ratios, exit 1 over target.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const { values } = parseArgs({ options: { runs: { type: 'string', default: '21' }, target: { type: 'string', default: '2' } } });
const runs = Number(values.runs);
const target = Number(values.target);
const datum = path.join(root, 'bin', 'datum.js');
const cases = {
  'node -e 0': ['-e', '0'],
  'datum --help': [datum, '--help'],
  'datum --version': [datum, '--version'],
};

function once(args) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const times = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
for (const args of Object.values(cases)) once(args); // warm the file cache
for (let i = 0; i < runs; i++) for (const [name, args] of Object.entries(cases)) times[name].push(once(args));

const bare = median(times['node -e 0']);
const rows = Object.entries(times).map(([name, xs]) => ({ name, median_ms: median(xs), ratio: median(xs) / bare }));
console.log(`| command | median ms (${runs} runs) | × node -e 0 |`);
console.log('|---|---|---|');
for (const r of rows) console.log(`| \`${r.name}\` | ${r.median_ms.toFixed(1)} | ${r.ratio.toFixed(2)} |`);
const over = rows.filter((r) => r.ratio > target);
if (over.length) {
  console.error(`over the ${target}x target: ${over.map((r) => r.name).join(', ')}`);
  process.exit(1);
}
