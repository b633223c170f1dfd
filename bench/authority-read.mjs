// What the controller's authority read costs when nothing changed (issue 33): one desired-state
// file (examples/fleet's N-24, outside git so no commit is looked up) read --reads times by one
// DesiredStateAuthority, as a loop's every pass does. Prints one JSON line: CPU microseconds per
// read, and how many times the file was parsed where the build counts it.
//
//   node scripts/build.mjs && node bench/authority-read.mjs [--reads 2000] [--dist DIR]
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const { values } = parseArgs({
  options: { reads: { type: 'string', default: '2000' }, dist: { type: 'string', default: path.join(root, 'dist') } },
});
const reads = Number(values.reads);
const require = createRequire(import.meta.url);
const { DesiredStateAuthority } = require(path.join(path.resolve(values.dist), 'src', 'activities', 'authority.js'));

const fleet = await mkdtemp(path.join(os.tmpdir(), 'datum-bench-authority-'));
try {
  await mkdir(path.join(fleet, 'desired', 'nodes'), { recursive: true });
  await cp(
    path.join(root, 'examples', 'fleet', 'desired', 'nodes', 'N-24.yaml'),
    path.join(fleet, 'desired', 'nodes', 'N-24.yaml'),
  );
  await cp(path.join(root, 'examples', 'fleet', 'artifacts'), path.join(fleet, 'artifacts'), { recursive: true });
  const authority = new DesiredStateAuthority(fleet);
  const first = await authority.read('N-24');
  if (!first.ok) throw new Error(first.error);
  const cpu = process.cpuUsage();
  const t = performance.now();
  for (let i = 0; i < reads; i++) await authority.read('N-24');
  const used = process.cpuUsage(cpu);
  process.stdout.write(
    `${JSON.stringify({
      reads,
      dist: values.dist,
      cpu_us_per_read: Math.round((used.user + used.system) / reads),
      wall_us_per_read: Math.round(((performance.now() - t) * 1000) / reads),
      parses: authority.parses ?? null,
      load: os.loadavg().map((l) => +l.toFixed(1)),
    })}\n`,
  );
} finally {
  await rm(fleet, { recursive: true, force: true });
}
