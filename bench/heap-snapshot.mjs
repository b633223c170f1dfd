#!/usr/bin/env node
// What a cached loop holds in the controller's workflow thread, from a heap snapshot of that
// thread (DATUM_BENCH_HEAP_SNAPSHOT=DIR on a bench row writes one, bench/memory-report.js):
//
//   node bench/heap-snapshot.mjs DIR/thread-<pid>-<id>.heapsnapshot
//
// Every workflow the SDK runs has an `Activator` (its state, handlers and module cache). What is
// reachable from the roots only through activators is the per-workflow memory; within it, what
// is reachable from zod's schema instances (`_` and their `Internals`) is the loops' own copies
// of zod and of Datum's schemas. Prints both per workflow, and the largest kinds of what is left.
import { readFile } from 'node:fs/promises';

const file = process.argv[2];
if (!file) {
  console.error('usage: node bench/heap-snapshot.mjs FILE.heapsnapshot');
  process.exit(2);
}
const snap = JSON.parse(await readFile(file, 'utf8'));
const { node_fields: nf, edge_fields: ef, node_types: nt, edge_types: et } = snap.snapshot.meta;
const [nodeTypes, edgeTypes] = [nt[0], et[0]];
const { nodes, edges, strings } = snap;
const [N, E] = [nf.length, ef.length];
const count = nodes.length / N;
const [TYPE, NAME, SIZE, EDGES] = ['type', 'name', 'self_size', 'edge_count'].map((f) => nf.indexOf(f));
const [ETYPE, ETO] = ['type', 'to_node'].map((f) => ef.indexOf(f));

const first = new Uint32Array(count + 1);
for (let i = 0; i < count; i++) first[i + 1] = first[i] + nodes[i * N + EDGES];
const type = (i) => nodeTypes[nodes[i * N + TYPE]];
const name = (i) => strings[nodes[i * N + NAME]];
const size = (i) => nodes[i * N + SIZE];

/** Nodes reachable from the root (node 0) over strong edges, never entering `cut`. */
function reach(cut, from = [0], within = null) {
  const seen = new Uint8Array(count);
  const stack = [...from];
  for (const i of from) seen[i] = 1;
  while (stack.length) {
    const i = stack.pop();
    for (let e = first[i]; e < first[i + 1]; e++) {
      if (edgeTypes[edges[e * E + ETYPE]] === 'weak') continue;
      const to = edges[e * E + ETO] / N;
      if (seen[to] || cut.has(to) || (within && !within[to])) continue;
      seen[to] = 1;
      stack.push(to);
    }
  }
  return seen;
}

const activators = [];
for (let i = 0; i < count; i++) if (type(i) === 'object' && name(i) === 'Activator') activators.push(i);
if (activators.length === 0) {
  console.error(`${file}: no workflow Activator in this snapshot (is it the workflow thread's?)`);
  process.exit(1);
}
const all = reach(new Set());
const shared = reach(new Set(activators));
const perWorkflow = new Uint8Array(count);
let total = 0;
let workflows = 0;
for (let i = 0; i < count; i++) {
  if (!all[i]) continue;
  total += size(i);
  if (!shared[i]) {
    perWorkflow[i] = 1;
    workflows += size(i);
  }
}
const schemaRoots = [];
for (let i = 0; i < count; i++) {
  if (perWorkflow[i] && type(i) === 'object' && (name(i) === '_' || name(i) === 'Internals')) schemaRoots.push(i);
}
const zodOwn = reach(new Set(), schemaRoots, perWorkflow);
let zod = 0;
const rest = new Map();
for (let i = 0; i < count; i++) {
  if (!perWorkflow[i]) continue;
  if (zodOwn[i]) zod += size(i);
  else {
    const key = `${type(i)} ${name(i).slice(0, 40).replace(/\n/g, ' ')}`;
    rest.set(key, (rest.get(key) ?? 0) + size(i));
  }
}
const kb = (b) => (b / 1024 / activators.length).toFixed(1);
console.log(`${file}`);
console.log(`heap reachable: ${(total / 2 ** 20).toFixed(1)} MB; workflows (Activator): ${activators.length}`);
console.log(`per workflow: ${kb(workflows)} KB, of which reachable from its own zod schemas: ${kb(zod)} KB`);
console.log(`zod schema instances per workflow: ${(schemaRoots.length / 2 / activators.length).toFixed(0)}`);
console.log('the rest, per workflow, largest first:');
for (const [key, bytes] of [...rest].sort((a, b) => b[1] - a[1]).slice(0, 12))
  console.log(`  ${kb(bytes).padStart(8)} KB  ${key}`);
