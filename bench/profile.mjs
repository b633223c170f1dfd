// Summarizes the V8 CPU profiles (`node --cpu-prof`) the bench's worker and agent write on exit:
// where each process spent its CPU, by area (Temporal's SDK, its native core, Datum, GC, ...)
// and by function. Self time only, so the areas add up to the process's sampled time.
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';

const AREAS = [
  ['(garbage collector)', (f) => f.functionName === '(garbage collector)'],
  ['(idle)', (f) => f.functionName === '(idle)'],
  ['(program: native, incl. the Temporal core bridge)', (f) => f.functionName === '(program)'],
  ['workflow sandbox (vm)', (f) => /workflow-bundle|\/workflow\/lib\/|webpack/.test(f.url)],
  ['@temporalio/worker', (f) => f.url.includes('@temporalio/worker')],
  ['@temporalio/client, common, proto', (f) => /@temporalio\/(client|common|proto)/.test(f.url)],
  ['protobufjs', (f) => f.url.includes('protobufjs')],
  ['zod', (f) => f.url.includes('/zod/')],
  ['Datum (dist/src)', (f) => f.url.includes('/dist/src/')],
  ['node internals', (f) => f.url.startsWith('node:') || f.url === ''],
];

function areaOf(frame) {
  for (const [name, test] of AREAS) if (test(frame)) return name;
  return 'other modules';
}

/** Self time per area and per function of one .cpuprofile, in ms. */
function selfTimes(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000));
  const areas = {};
  const fns = {};
  for (const [id, ms] of self) {
    const frame = byId.get(id).callFrame;
    const area = areaOf(frame);
    areas[area] = (areas[area] ?? 0) + ms;
    const fn =
      `${frame.functionName || '(anonymous)'} ${frame.url ? `${frame.url.replace(/^.*node_modules\//, '').replace(/^.*\/dist\//, 'dist/')}:${frame.lineNumber + 1}` : ''}`.trim();
    fns[fn] = (fns[fn] ?? 0) + ms;
  }
  return { areas, fns };
}

const top = (table, n, total) =>
  Object.entries(table)
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, ms]) => ({ name, s: Math.round(ms / 100) / 10, pct: Math.round((ms / total) * 1000) / 10 }));

/** { worker: {...}, agent: {...} } for the `<name>-prof` directories under `logs`. */
export async function summarizeProfiles(logs) {
  const out = {};
  for (const name of ['worker', 'agent']) {
    const dir = path.join(logs, `${name}-prof`);
    const files = (await readdir(dir).catch(() => [])).filter((f) => f.endsWith('.cpuprofile'));
    if (files.length === 0) {
      out[name] = { error: `no profile in ${dir} (the process did not exit cleanly)` };
      continue;
    }
    const areas = {};
    const fns = {};
    for (const f of files) {
      const t = selfTimes(JSON.parse(await readFile(path.join(dir, f), 'utf8')));
      for (const [k, v] of Object.entries(t.areas)) areas[k] = (areas[k] ?? 0) + v;
      for (const [k, v] of Object.entries(t.fns)) fns[k] = (fns[k] ?? 0) + v;
    }
    const busy = Object.entries(areas)
      .filter(([k]) => k !== '(idle)')
      .reduce((s, [, v]) => s + v, 0);
    out[name] = {
      sampled_busy_s: Math.round(busy / 100) / 10,
      areas: top(Object.fromEntries(Object.entries(areas).filter(([k]) => k !== '(idle)')), 10, busy),
      functions: top(Object.fromEntries(Object.entries(fns).filter(([k]) => !k.startsWith('(idle)'))), 12, busy),
    };
  }
  return out;
}
