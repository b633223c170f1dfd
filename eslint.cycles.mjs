// The `datum/no-cycle` lint rule: no import cycle among the project's modules. Every import
// counts, `import type` and `export … from` and `import()` included: a cycle of types is still two
// modules that cannot be read, changed or moved one without the other, and the contract is meant
// to be a leaf for its types too. A cycle is a strongly connected component of the import graph;
// each import that stays inside one is reported with the shortest way back to the importing file.
//
// The graph is read from the files on disk (TypeScript's own import scanner, so every form of
// import is found), cached by modification time, for the directories the rule is given.
//
//   node eslint.cycles.mjs [DIR …]      lists the cycles among DIR's modules (default: src)

import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const SOURCE = /\.(ts|mts|cts)$/;

/** Every TypeScript source file under `dir` (declaration files aside). */
function sourceFiles(dir, out = []) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out; // a directory the rule is given need not exist (a fresh checkout's test fixtures)
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory() && entry.name !== 'node_modules') sourceFiles(full, out);
    else if (entry.isFile() && SOURCE.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/** The file a relative import names ('./x', './x.js', '../dir'), or null for a package or a file not in `known`. */
export function resolveImport(from, specifier, known) {
  if (!specifier.startsWith('.')) return null;
  const base = path.resolve(path.dirname(from), specifier).replace(/\.(js|mjs|cjs|ts|mts|cts)$/, '');
  for (const candidate of [`${base}.ts`, `${base}.mts`, `${base}.cts`, path.join(base, 'index.ts')])
    if (known.has(candidate)) return candidate;
  return null;
}

/** Per file: its modification time and the specifiers it imports, as TypeScript scans them. */
const scanned = new Map();

function importsOf(file) {
  const stat = statSync(file);
  const cached = scanned.get(file);
  if (cached && cached.mtimeMs === stat.mtimeMs && cached.size === stat.size) return cached.specifiers;
  const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const specifiers = info.importedFiles.map((f) => f.fileName);
  scanned.set(file, { mtimeMs: stat.mtimeMs, size: stat.size, specifiers });
  return specifiers;
}

/** The import graph of every source file under `dirs`: file → the files it imports. */
export function importGraph(dirs) {
  const files = dirs.flatMap((d) => sourceFiles(d));
  const known = new Set(files);
  const graph = new Map();
  for (const file of files) {
    const targets = importsOf(file)
      .map((s) => resolveImport(file, s, known))
      .filter((t) => t !== null);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Tarjan's strongly connected components: file → component id, and the components of more than one file (or a self-import). */
export function cyclesOf(graph) {
  const index = new Map();
  const low = new Map();
  const component = new Map();
  const stack = [];
  const onStack = new Set();
  const cycles = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const members = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.set(w, v);
      members.push(w);
    } while (w !== v);
    if (members.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(members.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return { component, cycles };
}

/** The shortest import path from `from` to `to` (both included), or null. */
function shortestPath(graph, from, to) {
  const previous = new Map([[from, null]]);
  const queue = [from];
  while (queue.length > 0) {
    const v = queue.shift();
    if (v === to) {
      const route = [];
      for (let at = to; at !== null; at = previous.get(at)) route.unshift(at);
      return route;
    }
    for (const w of graph.get(v) ?? []) {
      if (previous.has(w)) continue;
      previous.set(w, v);
      queue.push(w);
    }
  }
  return null;
}

/**
 * Options: { dirs: ['src', …] }, relative to ESLint's working directory: the modules that must
 * not import one another in a circle. Files outside them are not checked.
 */
export const noCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'No import cycle among the modules of the given directories, type-only imports included.' },
    schema: [{ type: 'object', properties: { dirs: { type: 'array', items: { type: 'string' } } }, additionalProperties: false }],
    messages: {
      cycle:
        '{{source}} closes an import cycle: {{route}}. Move what these modules share into one that none of them imports (a cycle of types counts too).',
    },
  },
  create(context) {
    const dirs = (context.options[0]?.dirs ?? ['src']).map((d) => path.resolve(context.cwd, d));
    const file = path.resolve(context.filename);
    if (!dirs.some((d) => file.startsWith(d + path.sep))) return {};
    const graph = importGraph(dirs);
    if (!graph.has(file)) return {};
    const { component } = cyclesOf(graph);
    const known = new Set(graph.keys());
    const rel = (f) => path.relative(context.cwd, f).split(path.sep).join('/');
    const check = (sourceNode) => {
      if (!sourceNode || typeof sourceNode.value !== 'string') return;
      const target = resolveImport(file, sourceNode.value, known);
      if (target === null || component.get(target) !== component.get(file)) return;
      const back = shortestPath(graph, target, file);
      if (target !== file && back === null) return;
      const route = [file, ...(target === file ? [file] : back)].map(rel).join(' → ');
      context.report({ node: sourceNode, messageId: 'cycle', data: { source: sourceNode.value, route } });
    };
    return {
      ImportDeclaration: (node) => check(node.source),
      ExportNamedDeclaration: (node) => check(node.source),
      ExportAllDeclaration: (node) => check(node.source),
      ImportExpression: (node) => check(node.source),
      TSImportEqualsDeclaration: (node) => check(node.moduleReference?.expression),
    };
  },
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dirs = (process.argv.length > 2 ? process.argv.slice(2) : ['src']).map((d) => path.resolve(d));
  const graph = importGraph(dirs);
  const { cycles } = cyclesOf(graph);
  const rel = (f) => path.relative(process.cwd(), f);
  for (const members of cycles) console.log(`cycle of ${members.length} files:\n  ${members.map(rel).join('\n  ')}`);
  console.log(`${graph.size} modules, ${cycles.length} cycle(s), ${cycles.reduce((n, c) => n + c.length, 0)} files in cycles`);
  process.exitCode = cycles.length > 0 ? 1 : 0;
}
